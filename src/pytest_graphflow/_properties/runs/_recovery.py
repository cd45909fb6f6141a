"""``check_crash_recovery``: crash at every store operation in turn (over a
:class:`FaultyStore`), recover like a new process, and end where the fault-free run ends, with
every effect exactly once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..._engine._results import GraphResult
from ..._engine._runtime import GraphRuntime
from ..._graph._builder import CompiledGraph
from ..._graph._effects import EFFECT_LEDGER, Effect
from ..._graph._node import Resume
from ..._stores._memory import InMemoryCheckpointStore
from ..._stores.faults._store import FaultyStore
from ..._time._clock import VirtualClock
from ...errors import SimulatedCrash
from .._progress import Progress, ProgressCallback, check_progress, report_progress
from ..checks._checks import Violation, check_invariants
from ..checks._ledger import recovered_effects, repeated_effects, undeclared_effects
from ..strategies._instrument import CallLog, NodeCall, record_calls
from ._compare import Compare, Normalize
from ._deadlock import deadlock_violation
from ._drive import (
    Answers,
    Drive,
    GraphLike,
    Input,
    _on_owned_loop,
    _outcome,
    _outcome_diff,
    _runtime,
    _wall,
    answer_for,
    drive,
    graph_maker,
)
from ._pairs import report_pair

__all__ = ["CrashPoint", "check_crash_recovery"]


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
    progress: ProgressCallback | None = None,
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
      nodes' functions complete exactly as often as in the oracle plus those re-runs;
    * effects recorded with :func:`~pytest_graphflow.record_effect` (by a fake service):
      none in a node declared ``pure``/``read`` (re-run freely, so unprotected: the node and
      the effect are named); each once in the fault-free run (a ``Retry`` attempt repeating
      one is reported); and once after every crash and recovery. A repeat there is told apart
      by the checkpoint recovery resumed from: the re-run of a task no acknowledged checkpoint
      recorded is the at-least-once window (reported with its fix by default, accepted with
      ``strict_effects``); the same key again from a covered task or another task is a real
      duplicate (always reported);
    * with ``strict_effects``, exactly once must be shown, not assumed: every task of a
      ``write``/``external`` node that completes in the fault-free run records its effect
      with ``record_effect`` (a node that records nothing is reported, since a re-run of it
      cannot be told from a repeated effect); the ledger then holds the run to the
      runtime's promise (at least once inside the window, exactly once after it);
    * the recovered legs keep C1–C10;
    * a fault-free run that can never end (``VirtualDeadlock``) is reported at once as a
      ``"deadlock"`` violation naming the waiting nodes, and no crash point is tried.

    The oracle and each crash point run on a graph of their own when ``graph`` is a factory;
    the crashed and the recovering process of one crash point share it (fakes built into the
    graph stand for the outside world, which outlives the process).

    Args:
        points: store-call indexes to crash at (default: every call of the oracle).
        strict_effects: require every ``write``/``external`` task to record its effect, and
            accept repeats inside the at-least-once window (see above).
        ignore: state paths left out of the comparison with the oracle (recovery waits out
            the dead process's claim, ``claim_ttl + 1`` virtual seconds, so a timestamp taken
            from ``ctx.now()`` after the crash differs: ``ignore=["audit.*.at"]``).
        normalize: a function ``state -> state`` applied before comparing.
        progress: ``progress(p: Progress)``, called after each crash point (phase ``"crash
            points"``, ``p.detail`` the point) and when they are done.
    """
    progress = check_progress(progress, "check_crash_recovery")
    if store_factory is not None:
        from ._xprocess import check_crash_recovery_across_processes

        return check_crash_recovery_across_processes(
            graph, input, answers, store_factory=store_factory, seed=seed, phases=phases,
            points=points, progress=progress)
    make = graph_maker(graph, "check_crash_recovery")
    cmp = Compare.of(ignore, normalize)
    g0 = make()
    declared = {n: s.effect for n, s in g0.nodes.items()}
    effectful = {n for n, e in declared.items() if e in ("write", "external")}

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
        out += recovered_effects(ledger, oracle_effects, f"after {point} and recovery", point,
                                 window={c.task_id for c in uncovered},
                                 allow_window=strict_effects)
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
            report_pair("check_crash_recovery", str(out[-1]),
                        ("the run without the crash", f"after {point} and recovery"),
                        want.events, got.events, graph=g0)
        allowed = Counter(c.task_id for c in uncovered)
        out += _effects_per_task(calls, effectful, allowed, f"after {point}", point)
        unavoidable = Counter(c.node for c in uncovered)
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
    stuck = deadlock_violation(oracle.result, "the fault-free run")
    if stuck is not None:
        return [stuck]  # every crash point would wait the same way
    broken = _effects_per_task(oracle_calls, effectful, Counter(), "in the fault-free run", None)
    broken += undeclared_effects(oracle_effects, declared, "in the fault-free run")
    broken += repeated_effects(oracle_effects, "in the fault-free run")
    if strict_effects:
        broken += _unrecorded(oracle_calls, oracle_effects, {n: g0.nodes[n].effect
                                                             for n in effectful})
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
    for n, point in enumerate(crash_points, start=1):
        violations += _on_owned_loop(fresh_runtime(),
                                     lambda rt, p=point: crash_once(p, rt))  # type: ignore[misc]
        report_progress(progress, Progress("check_crash_recovery", "crash points", n,
                                           len(crash_points), detail=str(point)))
    report_progress(progress, Progress("check_crash_recovery", "crash points",
                                       len(crash_points), len(crash_points), finished=True,
                                       detail=f"{len(violations)} violation(s)"))
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


def _unrecorded(calls: CallLog, effects: list[Effect], effectful: dict[str, str]
                ) -> list[Violation]:
    """``strict_effects``: each completed ``write``/``external`` task recorded its effect."""
    recorded = {e.task_id for e in effects}
    out: list[Violation] = []
    seen: set[str] = set()
    for call in calls.calls:
        if call.node not in effectful or call.outcome != "ok" or call.task_id in seen:
            continue
        seen.add(call.task_id)
        if call.task_id not in recorded:
            out.append(Violation(
                "effects", None, f"strict_effects: {effectful[call.node]} node {call.node!r} "
                f"(task {call.task_id}) completed in the fault-free run without recording its "
                "effect; call record_effect(name, key) where the effect happens (after its "
                "idempotency check) so the check can count it, or leave strict_effects off"))
    return out
