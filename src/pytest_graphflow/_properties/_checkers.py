"""Whole-run properties: interrupt/resume equivalence, crash recovery and determinism.

Each check runs the graph several ways on fresh deterministic runtimes (a
:class:`VirtualClock`, a seed, an in-memory store) and returns :class:`Violation` values; an
empty list means the property held. They are synchronous: each run executes on an event loop
owned by its virtual clock, as ``GraphRuntime.invoke`` does, so timers are virtual and a batch
that can never wake fails with ``VirtualDeadlock`` instead of hanging. Call them from sync
tests, Hypothesis tests included.

``graph`` is a compiled graph, a ``GraphSpec``, or a factory ``() -> CompiledGraph`` called
for each independent run (fakes built into the graph are then fresh per run). ``ignore=`` and
``normalize=`` leave values that legitimately differ out of the comparison (see
:mod:`._compare`); differences are reported as the differing paths only.

Interrupt answers are a mapping keyed as ``Resume(answers=...)`` takes them (the interrupt's
key, ``"<node>:<id>"`` — what ``strategies.resume_answers(spec)`` draws —, the interrupt id or
the node's name), or a function of the :class:`~pytest_graphflow.Interrupt`; an interrupt
without an answer is answered ``None``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from .._engine._results import GraphResult
from .._engine._runtime import GraphRuntime
from .._graph._builder import CompiledGraph
from .._graph._effects import EFFECT_LEDGER, Effect
from .._graph._node import Resume, answer_keys
from .._records._events import EventBase, Interrupt, RunStart
from .._stores._faulty import FaultyStore
from .._stores._memory import InMemoryCheckpointStore
from .._time._clock import VirtualClock
from .._time._loops import run_sync_owned
from ..errors import InvalidArgument, SimulatedCrash
from ._checks import Violation, check_invariants
from ._compare import Compare, Normalize, diff_paths
from ._genspec import GraphSpec
from ._instrument import CallLog, NodeCall, record_calls

__all__ = [
    "Answers",
    "Drive",
    "check_crash_recovery",
    "check_determinism",
    "check_interrupt_resume_equivalence",
    "drive",
]

Answers = Mapping[str, Any] | Callable[[Interrupt], Any] | None
GraphLike = CompiledGraph | GraphSpec | Callable[[], CompiledGraph]
Input = Mapping[str, Any] | BaseModel | None


def graph_maker(graph: GraphLike, where: str) -> Callable[[], CompiledGraph]:
    """A function giving the graph for one independent run: a compiled graph itself, a
    :class:`GraphSpec` compiled once, or the user's factory called anew each time."""
    if isinstance(graph, CompiledGraph):
        return lambda: graph
    if isinstance(graph, GraphSpec):
        compiled = graph.compile()
        return lambda: compiled
    if callable(graph):
        def make() -> CompiledGraph:
            built = graph()
            if not isinstance(built, CompiledGraph):
                raise InvalidArgument(f"{where}(graph={graph!r}): the factory returned "
                                      f"{built!r}; it must return a CompiledGraph (call "
                                      ".compile())")
            return built

        return make
    raise InvalidArgument(f"{where}(graph={graph!r}): pass a CompiledGraph, a GraphSpec or a "
                          "factory () -> CompiledGraph")


def as_graph(graph: GraphLike) -> CompiledGraph:
    """A compiled graph from a :class:`GraphSpec`, a compiled graph or a factory."""
    return graph_maker(graph, "as_graph")()


def answer_for(answers: Answers, interrupt: Interrupt) -> Any:
    """The answer ``answers`` gives ``interrupt`` (``None`` when it has none).

    Mapping keys are matched most specific first: the interrupt's key, ``"<node>:<id>"``, the
    interrupt id, the node's name (as ``Resume(answers=...)`` matches them).
    """
    if answers is None:
        return None
    if callable(answers):
        return answers(interrupt)
    for k in answer_keys(interrupt):
        if k in answers:
            return answers[k]
    return None


def _runtime(store: Any, seed: int, clock: VirtualClock | None = None,
             backend: str = "asyncio", wall: bool = True) -> GraphRuntime:
    """A deterministic runtime. ``wall``: node code reading ``datetime.now()`` sees virtual
    time (a user's graph may; generated graphs never do, and skip the cost)."""
    return GraphRuntime(store=store, clock=clock or VirtualClock(patch_wall_clock=wall),
                        seed=seed, backend=backend)


def _wall(graph: GraphLike) -> bool:
    return not isinstance(graph, GraphSpec)


def _outcome(result: GraphResult[Any], cmp: Compare | None = None) -> tuple[str, str]:
    data = result.data if cmp is None else cmp.state(result.data)
    return result.status, json.dumps(data, sort_keys=True)


def _outcome_diff(want: GraphResult[Any], got: GraphResult[Any], cmp: Compare) -> str:
    """How ``got`` ended unlike ``want``: status, then the differing state paths only."""
    parts = []
    if got.status != want.status:
        parts.append(f"status {want.status} → {got.status}")
    paths = diff_paths(cmp.state(want.data), cmp.state(got.data))
    if paths:
        parts.append("state differs at:\n    " + "\n    ".join(paths))
    return "; ".join(parts)


def _pause_seconds(pause: float, where: str) -> float:
    if isinstance(pause, bool) or not isinstance(pause, int | float) or pause < 0:
        raise InvalidArgument(f"{where}(pause={pause!r}): give the seconds of virtual time a "
                              "pause lasts (>= 0)")
    return float(pause)


@dataclass
class Drive:
    """What :func:`drive` did: every leg's events, the last result, the runtimes used."""

    events: list[EventBase] = field(default_factory=list)
    result: GraphResult[Any] | None = None
    legs: int = 0
    runtimes: list[GraphRuntime] = field(default_factory=list)
    run_id: str | None = None


async def drive(
    runtime: GraphRuntime,
    graph: CompiledGraph,
    input: Input,
    answers: Answers,
    *,
    hook: bool = False,
    fresh: Callable[[GraphRuntime], GraphRuntime] | None = None,
    resume_run: str | None = None,
    first_resume: Resume | None = None,
    calls: CallLog | None = None,
    max_legs: int = 50,
    out: Drive | None = None,
    pause: float = 0.0,
) -> Drive:
    """Run ``graph`` to its end, answering interrupts.

    With ``hook``, an ``on_interrupt`` hook answers at once; otherwise the run pauses and is
    resumed by run id with ``Resume(answers=...)``, by ``fresh(previous_runtime)`` when given
    (a new process over the same store, handed ``graph=``), else by the same runtime. With
    ``resume_run`` the first leg resumes that run (with ``first_resume``) instead of starting
    one. Events of every leg are appended to ``out.events`` as they are consumed, so a crash
    leaves in ``out`` what was seen. ``pause``: seconds of virtual time that pass while the
    run waits for its answers, before each resume.
    """
    d = out if out is not None else Drive()
    opts: dict[str, Any] = {}
    if hook:
        opts["on_interrupt"] = lambda i: answer_for(answers, i)
    rt = runtime
    d.runtimes.append(rt)
    run_id, resume = resume_run, first_resume
    if run_id is not None:
        d.run_id = run_id
    while True:
        if calls is not None:
            calls.leg += 1
        d.legs += 1
        if run_id is None:
            stream = rt.stream(graph, input, **opts)
        else:
            stream = rt.resume_stream(run_id, resume, graph=graph, **opts)
        async for event in stream:
            if d.run_id is None and isinstance(event, RunStart):
                d.run_id = event.run_id
            d.events.append(event)
        result = stream.result()
        d.result = result
        d.run_id = run_id = result.run_id
        if result.status != "interrupted" or hook or d.legs >= max_legs:
            return d
        resume = Resume(answers={k: answer_for(answers, i) for k, i in result.interrupts.items()})
        if pause and isinstance(rt.clock, VirtualClock):
            rt.clock.advance(pause)
        if fresh is not None:
            rt = fresh(rt)
            d.runtimes.append(rt)


def _fresh_after(previous: GraphRuntime) -> GraphRuntime:
    """A new runtime over the same store, its clock going on where the previous one stopped
    (the same virtual clock: the owned loop reads it)."""
    assert isinstance(previous.clock, VirtualClock)
    return _runtime(previous.store, previous.seed or 0, previous.clock, previous.backend)


def _on_owned_loop(runtime: GraphRuntime, fn: Callable[[GraphRuntime], Any]) -> Any:
    """Run ``fn(runtime)`` on a loop owned by the runtime's clock (as ``invoke`` does)."""
    async def main() -> Any:
        return await fn(runtime)

    return run_sync_owned(main, runtime.clock, runtime.backend)


def _first_difference(a: list[str], b: list[str]) -> tuple[int, str]:
    """The first differing event, as the paths that differ in it (not both dumps)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            ex, ey = json.loads(x), json.loads(y)
            what = f"{ex.get('type')} {ex.get('node') or ''}".strip()
            paths = diff_paths(ex, ey)
            return i, f"event #{i} ({what}) differs at:\n    " + "\n    ".join(paths)
    i = min(len(a), len(b))
    return i, f"one stream has {len(a)} events, the other {len(b)}"


def _lines(events: Iterable[EventBase], cmp: Compare | None = None) -> list[str]:
    if cmp is None or not cmp.active:
        return [e.model_dump_json() for e in events]
    return [json.dumps(cmp.event(e.model_dump(mode="json")), sort_keys=True) for e in events]


# --------------------------------------------------------------------------- equivalence


def check_interrupt_resume_equivalence(
    graph: GraphLike,
    input: Input = None,
    answers: Answers = None,
    *,
    seed: int = 0,
    backend: str = "asyncio",
    max_legs: int = 50,
    pause: float = 0.0,
    ignore: Iterable[str] | str | None = None,
    normalize: Normalize | None = None,
) -> list[Violation]:
    """Pausing at every interrupt and resuming ends where answering at once does.

    Three runs: (a) an ``on_interrupt`` hook answers each interrupt at once; (b) the run
    pauses at each interrupt and the same runtime resumes it by run id; (c) like (b), each
    resume by a fresh :class:`GraphRuntime` over the same store, given ``graph=`` (another
    process; its virtual clock goes on where the previous one stopped). (b) and (c) must end
    in the status and state of (a); (c)'s log must equal (b)'s byte for byte; and (b)'s log,
    all legs together, must keep C1–C10.

    Args:
        pause: seconds of virtual time each pause lasts in (b) and (c) (a human takes a while
            to answer): a route or node that decides again on resume from the clock, and so
            decides differently after a pause, is then reported. Default 0.
        ignore: state paths left out of the comparison (``"audit.*.at"``).
        normalize: a function ``state -> state`` applied before comparing.
    """
    make = graph_maker(graph, "check_interrupt_resume_equivalence")
    cmp = Compare.of(ignore, normalize)
    wait = _pause_seconds(pause, "check_interrupt_resume_equivalence")
    w = _wall(graph)

    def run(**kw: Any) -> Drive:
        g = make()
        rt = _runtime(InMemoryCheckpointStore(), seed, backend=backend, wall=w)
        return _on_owned_loop(rt, lambda r: drive(r, g, input, answers, **kw))  # type: ignore[no-any-return]

    a = run(hook=True)
    b = run(max_legs=max_legs, pause=wait)
    c = run(fresh=_fresh_after, max_legs=max_legs, pause=wait)
    out: list[Violation] = []
    assert a.result is not None
    want = _outcome(a.result, cmp)
    for name, d in (("same-runtime resumes", b), ("fresh-runtime resumes", c)):
        assert d.result is not None
        if _outcome(d.result, cmp) != want:
            out.append(Violation(
                "equivalence", None,
                f"pausing and resuming ({name}, {d.legs} legs"
                + (f", {wait:g}s each pause" if wait else "") + ") ended unlike answering at "
                f"once: {_outcome_diff(a.result, d.result, cmp)}",
                example=(d.events, a.events)))
    lb, lc = _lines(b.events), _lines(c.events)
    if lb != lc:
        i, diff = _first_difference(lb, lc)
        out.append(Violation("equivalence", i, "resuming in a fresh runtime gave another "
                             f"log than resuming in the same runtime: {diff}"))
    out += check_invariants(b.events, graph=make())
    return out


# --------------------------------------------------------------------------- determinism


def check_determinism(
    graph: GraphLike,
    input: Input = None,
    seed: int = 0,
    *,
    answers: Answers = None,
    runs: int = 5,
    backends: Iterable[str] = ("asyncio",),
    ignore: Iterable[str] | str | None = None,
    normalize: Normalize | None = None,
    processes: int | None = None,
) -> list[Violation]:
    """One seed, run ``runs`` times per backend on fresh runtimes: identical JSON streams.

    Interrupts pause the run and are resumed with ``answers`` (all legs are compared). Every
    run is compared with the first, so a decision that differs only now and then is caught
    far more often than by two runs (a 30% coin agrees in two runs more than half the time;
    in five, under a fifth). The first divergent event is reported (only the fields that
    differ), with how many of the runs diverged and the streams' SHA-256 in the example.
    With ``processes=N``, the runs happen in N fresh interpreters with different
    ``PYTHONHASHSEED`` values instead (:func:`check_determinism_across_processes`; the graph
    is then ``"module:attr"``, a module-level factory, or a graph a module holds).

    Args:
        runs: runs per backend (at least 2).
        ignore: state paths left out of the comparison, in the events' patches and states.
        normalize: a function ``state -> state`` applied to each ``run_end`` state.
    """
    if processes is not None:
        from ._xprocess import check_determinism_across_processes

        return check_determinism_across_processes(graph, input, seed, answers=answers,
                                                  processes=processes)
    import hashlib

    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 2:
        raise InvalidArgument(f"check_determinism(runs={runs!r}): compare at least 2 runs")
    make = graph_maker(graph, "check_determinism")
    cmp = Compare.of(ignore, normalize)
    seen: list[tuple[str, list[str]]] = []
    for backend in backends:
        for _ in range(runs):
            g = make()
            rt = _runtime(InMemoryCheckpointStore(), seed, backend=backend, wall=_wall(graph))
            d: Drive = _on_owned_loop(rt, lambda r, g=g: drive(  # type: ignore[misc]
                r, g, input, answers))
            seen.append((backend, _lines(d.events, cmp)))
    out: list[Violation] = []
    base_backend, base = seen[0]
    digest = hashlib.sha256("\n".join(base).encode()).hexdigest()
    differ = [(b, lines) for b, lines in seen[1:] if lines != base]
    if differ:
        backend, lines = differ[0]
        i, diff = _first_difference(base, lines)
        other = hashlib.sha256("\n".join(lines).encode()).hexdigest()
        out.append(Violation("determinism", i, f"seed {seed}: {len(differ)} of {len(seen) - 1} "
                             f"repeated runs gave another stream than the first "
                             f"({base_backend} vs {backend}): {diff}", example=(digest, other)))
    return out


# --------------------------------------------------------------------------- crash recovery


@dataclass(frozen=True)
class CrashPoint:
    """Where a crash was injected: the store call's index, operation and phase."""

    index: int
    op: str
    nth: int
    phase: str

    def __str__(self) -> str:
        return (f"crash_at({self.op!r}, nth={self.nth}, phase={self.phase!r}) "
                f"(store call #{self.index})")


def _covered(call: NodeCall, cp: Any) -> bool:
    """Whether checkpoint ``cp`` records ``call``'s task as done (so recovery won't re-run it)."""
    if cp is None:
        return False
    if cp.next_step > call.step:
        return True
    return cp.next_step == call.step and call.task_id in cp.completed


async def _recover(
    faulty: FaultyStore, crashed: Drive, graph: CompiledGraph, input: Input, answers: Answers,
    calls: CallLog, seed: int, claim_ttl: float,
) -> tuple[Drive, Any]:
    """Recover like a new process: a fresh runtime over the inner store, once the dead
    process's claim has expired. Returns the recovered drive and the checkpoint it resumed
    from (``None`` when nothing was saved and the run started anew)."""
    inner = faulty.inner
    old = crashed.runtimes[-1]
    assert isinstance(old.clock, VirtualClock)
    # The same clock (the owned loop reads it), moved past the dead process's claim.
    old.clock.advance(claim_ttl + 1)
    rt = _runtime(inner, seed, old.clock, old.backend)
    run_id = crashed.run_id
    if run_id is None:
        runs = {cp.run_id for cp in await inner.list()}
        run_id = next(iter(runs)) if runs else None
    cp = None if run_id is None else await inner.latest(run_id)
    if cp is None:
        return await drive(rt, graph, input, answers, calls=calls), None
    if cp.status in ("completed", "failed", "cancelled"):
        # The process died after the run ended: nothing to recover, the store has the outcome.
        d = Drive(run_id=cp.run_id)
        d.result = GraphResult(state=graph.state_model.model_validate(cp.state), data=cp.state,
                               status=cp.status, run_id=cp.run_id, thread_id=cp.thread_id,
                               step=cp.step)
        return d, cp
    resume = None
    if cp.status == "interrupted":
        # It died after the run paused: answer, as the dead driver was about to.
        resume = Resume(answers={i.key: answer_for(answers, i) for i in cp.interrupts})
    return await drive(rt, graph, input, answers, calls=calls, resume_run=run_id,
                       first_resume=resume), cp


def check_crash_recovery(
    graph: GraphLike,
    input: Input = None,
    answers: Answers = None,
    *,
    seed: int = 0,
    phases: Iterable[str] = ("before", "after"),
    points: Iterable[int] | None = None,
    strict_effects: bool = False,
    backend: str = "asyncio",
    ignore: Iterable[str] | str | None = None,
    normalize: Normalize | None = None,
    store_factory: Any = None,
) -> list[Violation]:
    """Crash at every store operation in turn, recover, and end where the fault-free run ends.

    With ``store_factory`` (``"module:attr"`` or a module-level ``f(directory) -> store``),
    the crash kills a real process and recovery reopens the store from its medium in a fresh
    one: see :func:`check_crash_recovery_across_processes` (crash points at ``save`` only,
    unless ``points`` picks others).

    The fault-free run (interrupts answered by pausing and resuming) is the oracle: its store
    calls are the crash points. For each call and phase (``"before"``: the call never reaches
    the store; ``"after"``: it does, and the process dies before learning so), the run is
    repeated over ``FaultyStore(...).crash_at(...)``; after the :class:`SimulatedCrash`, a fresh
    runtime over the inner store (its clock past the dead process's claim) resumes the run by
    id — or starts it anew when nothing was saved — and drives it to its end. Checked:

    * the recovered run ends in the oracle's status and state ("crash-recovery");
    * ``write``/``external`` nodes ("effects"): in the oracle every task completes exactly
      once (a recorded effect is replayed, not re-run, on resume: C9); after a crash, every
      task completes once more only if it had completed when the process died and no saved
      checkpoint recorded it — re-running those is unavoidable (at least once) — and the
      nodes' functions complete exactly as often as in the oracle plus those re-runs. With
      ``strict_effects`` no re-run is allowed;
    * effects recorded with :func:`~pytest_graphflow.record_effect` (by a fake service, a
      node left ``pure``, ...): each happens exactly once in the fault-free run (a ``Retry``
      attempt repeating one is reported) and exactly once after every crash and recovery —
      no allowance for re-runs: recording it where the effect really happens, after an
      idempotency check, is how a node shows it is safe to run again;
    * the recovered legs keep C1–C10.

    The oracle and each crash point run on a graph of their own when ``graph`` is a factory;
    the crashed and the recovering process of one crash point share it (fakes built into the
    graph stand for the outside world, which outlives the process).

    Args:
        points: store-call indexes to crash at (default: every call of the oracle).
        ignore: state paths left out of the comparison with the oracle (recovery waits out
            the dead process's claim, ``claim_ttl + 1`` virtual seconds, so a timestamp taken
            from ``ctx.now()`` after the crash differs: ``ignore=["audit.*.at"]``).
        normalize: a function ``state -> state`` applied before comparing.
    """
    if store_factory is not None:
        from ._xprocess import check_crash_recovery_across_processes

        return check_crash_recovery_across_processes(
            graph, input, answers, store_factory=store_factory, seed=seed, phases=phases,
            points=points)
    make = graph_maker(graph, "check_crash_recovery")
    cmp = Compare.of(ignore, normalize)
    g0 = make()
    effectful = {n for n, s in g0.nodes.items() if s.effect in ("write", "external")}

    async def run_oracle(rt: GraphRuntime) -> tuple[Drive, CallLog, list[Any], list[Effect]]:
        calls = CallLog()
        ledger: list[Effect] = []
        EFFECT_LEDGER.set(ledger)
        g = record_calls(g0, calls)
        d = await drive(rt, g, input, answers, calls=calls)
        return d, calls, rt.store.calls, ledger  # type: ignore[attr-defined]

    async def crash_once(point: CrashPoint, rt: GraphRuntime) -> list[Violation]:
        ledger: list[Effect] = []
        EFFECT_LEDGER.set(ledger)
        calls = CallLog()
        g = record_calls(make(), calls)
        faulty = rt.store
        assert isinstance(faulty, FaultyStore)
        faulty.crash_at(point.op, point.nth, phase=point.phase)  # type: ignore[arg-type]
        crashed = Drive()
        try:
            await drive(rt, g, input, answers, calls=calls, out=crashed)
        except SimulatedCrash:
            pass
        else:
            # The runtime swallowed the crash (or never reached it): what it produced stands.
            return _compare(point, crashed, oracle, [], calls, oracle_calls)
        before_recovery = [c for c in calls.calls if c.outcome == "ok"]
        recovered, cp = await _recover(faulty, crashed, g, input, answers, calls, seed,
                                       rt.claim_ttl)
        uncovered = [c for c in before_recovery if not _covered(c, cp)]
        out = _compare(point, recovered, oracle, uncovered, calls, oracle_calls)
        out += _ledger_violations(ledger, oracle_effects, f"after {point} and recovery", point)
        if recovered.events:
            for v in check_invariants(recovered.events, graph=g0, resumed_by_run_id=True):
                out.append(Violation(v.rule, v.index, f"after {point}: {v.message}"))
        return out

    def _compare(point: CrashPoint, got: Drive, want: Drive, uncovered: list[NodeCall],
                 calls: CallLog, want_calls: CallLog) -> list[Violation]:
        out: list[Violation] = []
        if got.result is None:
            return [Violation("crash-recovery", None, f"after {point}: no result")]
        assert want.result is not None
        if _outcome(got.result, cmp) != _outcome(want.result, cmp):
            out.append(Violation("crash-recovery", None, f"after {point} and recovery the run "
                                 "ended unlike the run without the crash: "
                                 f"{_outcome_diff(want.result, got.result, cmp)}",
                                 example=point))
        allowed = Counter() if strict_effects else Counter(c.task_id for c in uncovered)
        out += _effects_per_task(calls, effectful, allowed, f"after {point}", point)
        unavoidable = Counter() if strict_effects else Counter(c.node for c in uncovered)
        for node in sorted(effectful):
            n_got = len(calls.completed(node))
            n_want = len(want_calls.completed(node))
            extra = unavoidable[node]
            if n_got != n_want + extra:
                why = (f" ({extra} re-run(s) unavoidable: no checkpoint saved before the crash "
                       "recorded them)") if extra else ""
                out.append(Violation("effects", None, f"after {point}: {g0.nodes[node].effect} "
                                     f"node {node!r} completed {n_got} time(s); expected "
                                     f"{n_want + extra}{why}", example=point))
        return out

    def fresh_runtime() -> GraphRuntime:
        return _runtime(FaultyStore(InMemoryCheckpointStore()), seed, backend=backend,
                        wall=_wall(graph))

    oracle, oracle_calls, log, oracle_effects = _on_owned_loop(fresh_runtime(), run_oracle)
    broken = _effects_per_task(oracle_calls, effectful, Counter(), "in the fault-free run", None)
    broken += _ledger_violations(oracle_effects, None, "in the fault-free run", None)
    if broken:
        return broken  # every crash point would repeat it; fix this first
    nth: Counter[str] = Counter()
    crash_points: list[CrashPoint] = []
    wanted = None if points is None else set(points)
    for call in log:
        nth[call.op] += 1
        if wanted is None or call.index in wanted:
            for phase in phases:
                crash_points.append(CrashPoint(call.index, call.op, nth[call.op], phase))
    violations: list[Violation] = []
    for point in crash_points:
        violations += _on_owned_loop(fresh_runtime(),
                                     lambda rt, p=point: crash_once(p, rt))  # type: ignore[misc]
    return violations


def _ledger_violations(
    got: list[Effect], want: list[Effect] | None, where: str, example: Any
) -> list[Violation]:
    """Effects recorded with ``record_effect``: each once, and (after a crash) exactly the
    fault-free run's."""
    out: list[Violation] = []
    counts = Counter(e.identity for e in got)
    for (name, key), n in counts.items():
        if n > 1:
            attempts = sorted({e.attempt for e in got if e.identity == (name, key)
                               and e.attempt is not None})
            why = (" (Retry attempts " + ", ".join(map(str, attempts)) + " each did it)"
                   if len(attempts) > 1 else "")
            out.append(Violation("effects", None, f"{where}: effect {name!r} (key {key}) "
                                 f"happened {n} times; it must happen once{why}",
                                 example=example))
    if want is not None:
        missing = sorted({e.identity for e in want} - set(counts))
        for name, key in missing:
            out.append(Violation("effects", None, f"{where}: effect {name!r} (key {key}) "
                                 "never happened; without the crash it does",
                                 example=example))
    return out


def _effects_per_task(
    calls: CallLog, effectful: set[str], allowed: Counter[str], where: str, example: Any
) -> list[Violation]:
    """Each effectful task completes once, plus its ``allowed`` (unavoidable) re-runs."""
    out: list[Violation] = []
    done = Counter(c.task_id for c in calls.calls if c.outcome == "ok" and c.node in effectful)
    for call in calls.calls:
        n = done.pop(call.task_id, 0)
        if n > 1 + allowed[call.task_id]:
            out.append(Violation(
                "effects", None, f"{where}: write/external node {call.node!r} (task "
                f"{call.task_id}) completed {n} times; a completed task's effect must be "
                "recorded and replayed, not re-run", example=example))
    return out

