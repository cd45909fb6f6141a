"""Whole-run properties: interrupt/resume equivalence, crash recovery and determinism.

Each check runs the graph several ways on fresh deterministic runtimes (a
:class:`VirtualClock`, a seed, an in-memory store) and returns :class:`Violation` values; an
empty list means the property held. They are synchronous (each runs its own event loop with
``anyio.run``), so call them from sync tests, Hypothesis tests included.

Interrupt answers are given as a mapping keyed by ``"<node>:<id>"`` (what
``strategies.resume_answers(spec)`` draws) or by ``Interrupt.key``, or as a function of the
:class:`~pytest_graphflow.Interrupt`; an interrupt without an answer is answered ``None``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import anyio
from pydantic import BaseModel

from .._engine._results import GraphResult
from .._engine._runtime import GraphRuntime
from .._graph._builder import CompiledGraph
from .._graph._node import Resume
from .._records._events import EventBase, Interrupt, RunStart
from .._stores._faulty import FaultyStore
from .._stores._memory import InMemoryCheckpointStore
from .._time._clock import VirtualClock
from ..errors import SimulatedCrash
from ._checks import Violation, check_invariants
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
GraphLike = CompiledGraph | GraphSpec
Input = Mapping[str, Any] | BaseModel | None


def as_graph(graph: GraphLike) -> CompiledGraph:
    """A compiled graph from a :class:`GraphSpec` or a compiled graph."""
    return graph.compile() if isinstance(graph, GraphSpec) else graph


def answer_for(answers: Answers, interrupt: Interrupt) -> Any:
    """The answer ``answers`` gives ``interrupt`` (``None`` when it has none)."""
    if answers is None:
        return None
    if callable(answers):
        return answers(interrupt)
    if interrupt.key in answers:
        return answers[interrupt.key]
    return answers.get(f"{interrupt.node}:{interrupt.id}")


def _runtime(store: Any, seed: int, clock: VirtualClock | None = None,
             backend: str = "asyncio", wall: bool = True) -> GraphRuntime:
    """A deterministic runtime. ``wall``: node code reading ``datetime.now()`` sees virtual
    time (a user's graph may; generated graphs never do, and skip the cost)."""
    return GraphRuntime(store=store, clock=clock or VirtualClock(patch_wall_clock=wall),
                        seed=seed, backend=backend)


def _wall(graph: GraphLike) -> bool:
    return not isinstance(graph, GraphSpec)


def _outcome(result: GraphResult[Any]) -> tuple[str, str]:
    return result.status, json.dumps(result.data, sort_keys=True)


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
) -> Drive:
    """Run ``graph`` to its end, answering interrupts.

    With ``hook``, an ``on_interrupt`` hook answers at once; otherwise the run pauses and is
    resumed by run id with ``Resume(answers=...)``, by ``fresh(previous_runtime)`` when given
    (a new process over the same store, handed ``graph=``), else by the same runtime. With
    ``resume_run`` the first leg resumes that run (with ``first_resume``) instead of starting
    one. Events of every leg are appended to ``out.events`` as they are consumed, so a crash
    leaves in ``out`` what was seen.
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
        if fresh is not None:
            rt = fresh(rt)
            d.runtimes.append(rt)


def _fresh_after(previous: GraphRuntime) -> GraphRuntime:
    """A new runtime over the same store, its clock where the previous one stopped."""
    assert isinstance(previous.clock, VirtualClock)
    clock = VirtualClock(previous.clock.now(), patch_wall_clock=previous.clock.patch_wall_clock)
    return _runtime(previous.store, previous.seed or 0, clock, previous.backend)


def _first_difference(a: list[str], b: list[str]) -> tuple[int, str]:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i, f"event #{i} differs:\n  {x}\n  {y}"
    i = min(len(a), len(b))
    return i, f"one stream has {len(a)} events, the other {len(b)}"


def _lines(events: Iterable[EventBase]) -> list[str]:
    return [e.model_dump_json() for e in events]


# --------------------------------------------------------------------------- equivalence


def check_interrupt_resume_equivalence(
    graph: GraphLike,
    input: Input = None,
    answers: Answers = None,
    *,
    seed: int = 0,
    backend: str = "asyncio",
    max_legs: int = 50,
) -> list[Violation]:
    """Pausing at every interrupt and resuming ends where answering at once does.

    Three runs: (a) an ``on_interrupt`` hook answers each interrupt at once; (b) the run
    pauses at each interrupt and the same runtime resumes it by run id; (c) like (b), each
    resume by a fresh :class:`GraphRuntime` over the same store, given ``graph=`` (another
    process; its virtual clock starts where the previous one stopped). (b) and (c) must end in
    the status and state of (a); (c)'s log must equal (b)'s byte for byte; and (b)'s log, all
    legs together, must keep C1–C10.
    """
    g = as_graph(graph)

    async def main() -> list[Violation]:
        w = _wall(graph)
        a = await drive(_runtime(InMemoryCheckpointStore(), seed, wall=w), g, input, answers,
                        hook=True)
        b = await drive(_runtime(InMemoryCheckpointStore(), seed, wall=w), g, input, answers,
                        max_legs=max_legs)
        c = await drive(_runtime(InMemoryCheckpointStore(), seed, wall=w), g, input, answers,
                        fresh=_fresh_after, max_legs=max_legs)
        out: list[Violation] = []
        assert a.result is not None
        want = _outcome(a.result)
        for name, d in (("same-runtime resumes", b), ("fresh-runtime resumes", c)):
            got = _outcome(d.result)  # type: ignore[arg-type]
            if got != want:
                out.append(Violation(
                    "equivalence", None,
                    f"pausing and resuming ({name}, {d.legs} legs) ended {got[0]} with state "
                    f"{got[1]}; answering at once ended {want[0]} with state {want[1]}",
                    example=(d.events, a.events)))
        lb, lc = _lines(b.events), _lines(c.events)
        if lb != lc:
            i, diff = _first_difference(lb, lc)
            out.append(Violation("equivalence", i, "resuming in a fresh runtime gave another "
                                 f"log than resuming in the same runtime: {diff}"))
        out += check_invariants(b.events, graph=g)
        return out

    return anyio.run(main, backend=backend)


# --------------------------------------------------------------------------- determinism


def check_determinism(
    graph: GraphLike,
    input: Input = None,
    seed: int = 0,
    *,
    answers: Answers = None,
    runs: int = 2,
    backends: Iterable[str] = ("asyncio",),
    processes: int | None = None,
) -> list[Violation]:
    """One seed, run ``runs`` times per backend on fresh runtimes: identical JSON streams.

    Interrupts pause the run and are resumed with ``answers`` (all legs are compared). The
    first divergent event is reported, and the streams' SHA-256 in the example. With
    ``processes=N``, the runs happen in N fresh interpreters with different
    ``PYTHONHASHSEED`` values instead (:func:`check_determinism_across_processes`; the graph
    is then ``"module:attr"``, a module-level factory, or a graph a module holds).
    """
    if processes is not None:
        from ._xprocess import check_determinism_across_processes

        return check_determinism_across_processes(graph, input, seed, answers=answers,
                                                  processes=processes)
    import hashlib

    g = as_graph(graph)
    seen: list[tuple[str, list[str]]] = []
    async def once(backend: str) -> list[str]:
        d = await drive(_runtime(InMemoryCheckpointStore(), seed, backend=backend,
                                 wall=_wall(graph)), g, input,
                        answers)
        return _lines(d.events)

    for backend in backends:
        for _ in range(runs):
            seen.append((backend, anyio.run(once, backend, backend=backend)))
    out: list[Violation] = []
    base_backend, base = seen[0]
    digest = hashlib.sha256("\n".join(base).encode()).hexdigest()
    for backend, lines in seen[1:]:
        if lines != base:
            i, diff = _first_difference(base, lines)
            other = hashlib.sha256("\n".join(lines).encode()).hexdigest()
            out.append(Violation("determinism", i, f"seed {seed} gave two streams ({base_backend}"
                                 f" vs {backend}): {diff}", example=(digest, other)))
            break
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
    clock = VirtualClock(old.clock.now() + timedelta(seconds=claim_ttl + 1),
                         patch_wall_clock=old.clock.patch_wall_clock)
    rt = _runtime(inner, seed, clock, old.backend)
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
    * the recovered legs keep C1–C10.

    Args:
        points: store-call indexes to crash at (default: every call of the oracle).
    """
    if store_factory is not None:
        from ._xprocess import check_crash_recovery_across_processes

        return check_crash_recovery_across_processes(
            graph, input, answers, store_factory=store_factory, seed=seed, phases=phases,
            points=points)
    g0 = as_graph(graph)
    effectful = {n for n, s in g0.nodes.items() if s.effect in ("write", "external")}

    async def run_oracle() -> tuple[Drive, CallLog, list[Any]]:
        calls = CallLog()
        g = record_calls(g0, calls)
        faulty = FaultyStore(InMemoryCheckpointStore())
        d = await drive(_runtime(faulty, seed, backend=backend, wall=_wall(graph)), g, input,
                        answers, calls=calls)
        return d, calls, faulty.calls

    async def crash_once(point: CrashPoint) -> list[Violation]:
        calls = CallLog()
        g = record_calls(g0, calls)
        faulty = FaultyStore(InMemoryCheckpointStore())
        faulty.crash_at(point.op, point.nth, phase=point.phase)  # type: ignore[arg-type]
        rt = _runtime(faulty, seed, backend=backend, wall=_wall(graph))
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
        if _outcome(got.result) != _outcome(want.result):
            g_s, g_d = _outcome(got.result)
            w_s, w_d = _outcome(want.result)
            out.append(Violation("crash-recovery", None, f"after {point} and recovery the run "
                                 f"ended {g_s} with state {g_d}; without the crash it ends {w_s} "
                                 f"with state {w_d}", example=point))
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

    oracle, oracle_calls, log = anyio.run(run_oracle, backend=backend)
    broken = _effects_per_task(oracle_calls, effectful, Counter(), "in the fault-free run", None)
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
        async def one(p: CrashPoint = point) -> list[Violation]:
            return await crash_once(p)

        violations += anyio.run(one, backend=backend)
    return violations


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

