"""Whole-run properties of LangGraph graphs under the harness.

Each property runs the graph several ways on fresh harnesses and compares outcomes:
determinism (same seed, byte-identical events), schedule exploration (seeds), crash at every
checkpointer operation then recovery, and interrupt/resume equivalence (one process vs a
fresh "process" per leg). Outcomes of different schedules are compared by status, final state
and each task's result (node, step, write, interrupt payload, error), not by event order:
LangGraph reports a step's results in completion order, which is what a schedule changes.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Literal, ParamSpec, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from .._properties._progress import Progress, ProgressCallback, check_progress, report_progress
from .._properties.checks._checks import Violation
from .._properties.runs._explore import (
    MAX_EXHAUSTIVE,
    ExploreReport,
    ScheduleOutcome,
    _compare,
    _seed_stream,
)
from .._records._events import EventBase, Interrupt
from .._stores.faults._faults import CrashPhase
from .._time import _wallclock
from .._time._clock import DEFAULT_START, VirtualClock
from ..errors import InvalidArgument, SimulatedCrash
from ._harness import LangGraphHarness
from ._loop import TaskStart
from ._saver import FaultySaver

__all__ = [
    "Answers",
    "check_crash_recovery",
    "check_determinism",
    "check_interrupt_resume_equivalence",
    "drive",
    "explore",
]

Answers = Mapping[str, Any] | Callable[[Interrupt], Any] | None
"""Answers to interrupts: by node name, ``Interrupt.id`` or ``Interrupt.key``, or a function."""

_MAX_LEGS = 50
T = TypeVar("T")
P = ParamSpec("P")


@contextmanager
def _wall_clock_held() -> Iterator[None]:
    """Hold the wall-clock patch for a whole property (starting freezegun costs ~70 ms; a
    held patch makes each harness leg's own activation free)."""
    driver = _wallclock.activate()
    try:
        yield
    finally:
        _wallclock.deactivate(driver)


def _held(fn: Callable[P, T]) -> Callable[P, T]:
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with _wall_clock_held():
            return fn(*args, **kwargs)
    return wrapper


def _answer(answers: Answers, interrupt: Interrupt) -> Any:
    if callable(answers):
        return answers(interrupt)
    if answers is None:
        raise InvalidArgument(f"the run paused at {interrupt.node!r} ({interrupt.key}); pass "
                              "answers={node: value} to the property")
    for key in (interrupt.key, interrupt.id, interrupt.node):
        if key in answers:
            return answers[key]
    raise InvalidArgument(f"no answer for the interrupt of node {interrupt.node!r} "
                          f"({interrupt.key}); answers has {sorted(answers)}")


def _fresh(input: Any) -> Any:
    """A deep copy of a property's input for one run: LangGraph hands nodes the input's own
    objects (a list in the state, the messages ``add_messages`` gives ids to), so a node
    mutating them would change what the next run starts from."""
    try:
        return copy.deepcopy(input)
    except Exception as exc:
        raise InvalidArgument(
            f"the input {type(input).__name__} cannot be deep-copied ({type(exc).__name__}: "
            f"{exc}); every run of a property starts from a fresh copy of it, so pass plain "
            "data (dicts, lists, messages, dataclasses)") from exc


def drive(harness: LangGraphHarness, input: Any, answers: Answers = None, *,
          first: bool = True) -> list[EventBase]:
    """Run ``harness`` on a fresh deep copy of ``input`` (``first``) or continue its thread,
    answering every interrupt from ``answers`` until the run completes or fails; return the
    events. (The copy keeps a node that mutates its input from changing ``input`` itself.)"""
    trace = harness.trace(_fresh(input)) if first else harness.resume()
    legs = 1
    while trace.result.status == "interrupted" and answers is not None:
        legs += 1
        if legs > _MAX_LEGS:
            raise InvalidArgument(f"the run paused more than {_MAX_LEGS} times; do the "
                                  "answers let it finish?")
        pending = harness.pending_interrupts()  # none: a static breakpoint, to go on from
        trace = harness.resume(answers={i.key: _answer(answers, i) for i in pending}
                               ) if pending else harness.resume()
    return list(harness.events)


def _task_results(events: Iterable[EventBase]) -> list[str]:
    out = []
    for e in events:
        kind = getattr(e, "type", "")
        if kind == "node_end":
            body: Any = e.patch  # type: ignore[attr-defined]
        elif kind == "interrupt":
            body = [i.payload for i in e.interrupts]  # type: ignore[attr-defined]
        elif kind == "error":
            body = [e.error_type, e.message]  # type: ignore[attr-defined]
        else:
            continue
        out.append(json.dumps({"step": e.step, "type": kind, "node": e.node, "result": body},
                              sort_keys=True))
    return sorted(out)


def _state_key(harness: LangGraphHarness, *more: LangGraphHarness,
               ignore: Iterable[str] = ()) -> str:
    """The final state as JSON, without the ``ignore`` keys, with ids the run generated
    (``add_messages`` gives id-less messages a fresh uuid4, which differs between a clean run
    and a recovered one in production too) replaced by ``<generated-id>``."""
    result = harness.last
    data = None if result is None else {k: v for k, v in result.data.items()
                                        if k not in set(ignore)}
    text = json.dumps(data, sort_keys=True)
    for h in (harness, *more):
        for generated in h.generated_ids:
            text = text.replace(generated, "<generated-id>")
    return text


def _successor(harness: LangGraphHarness, saver: BaseCheckpointSaver[Any],
               **harness_kwargs: Any) -> LangGraphHarness:
    """A fresh harness (a new process) on ``harness``'s thread and seed, over ``saver``, whose
    clock starts where ``harness``'s stopped (time goes on across a restart)."""
    return LangGraphHarness(harness.graph, seed=harness.seed, saver=saver,
                            thread_id=harness.thread_id,
                            clock=VirtualClock(start=harness.clock.now()), **harness_kwargs)


@_held
def check_determinism(graph: Any, input: Any = None, *, seed: int = 0, runs: int = 2,
                      answers: Answers = None,
                      saver_factory: Callable[[], BaseCheckpointSaver[Any]] = InMemorySaver,
                      **harness_kwargs: Any) -> list[Violation]:
    """The same seed gives byte-identical events (ids and times included) ``runs`` times.

    Returns:
        one ``"determinism"`` violation per run whose events differ from the first.
    """
    first: str | None = None
    out: list[Violation] = []
    for n in range(runs):
        h = LangGraphHarness(graph, seed=seed, saver=saver_factory(), **harness_kwargs)
        text = "\n".join(e.model_dump_json() for e in drive(h, input, answers))
        if first is None:
            first = text
        elif text != first:
            a, b = first.splitlines(), text.splitlines()
            i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                     min(len(a), len(b)))
            out.append(Violation("determinism", i, f"run {n + 1} with seed {seed} differs "
                                 f"from run 1 at event #{i}: {b[i] if i < len(b) else '(end)'}"
                                 f" vs {a[i] if i < len(a) else '(end)'}"))
    return out


def _outcome(seed: int, harness: LangGraphHarness, error: str | None) -> ScheduleOutcome:
    lines = tuple(_task_results(harness.events))
    status = "raised" if error else (harness.last.status if harness.last else "raised")
    batches: dict[tuple[int, str, int], list[TaskStart]] = {}
    for leg, start in harness.start_steps:
        batches.setdefault((leg, start.graph, start.step), []).append(start)
    # A choice point is a batch the seed really chose in: two or more of its tasks waited at
    # their start gates together. A subgraph's steps are batches of their own (named by the
    # subgraph node), never part of the parent's step of the same number.
    chosen = [(key, b) for key, b in sorted(batches.items())
              if len(b) > 1 and any(t.contested for t in b)]
    start_orders = tuple((step, tuple(_qualified(t) for t in b))
                         for (_, _, step), b in chosen)
    # A batch is named by its nodes, and an order by each task's place among them, as the
    # start gates sort them (node, then task id): the names do not follow the task ids.
    positions = tuple(
        (f"leg {leg}{' ' + graph if graph else ''} step {step}: "
         f"{', '.join(t.node for t in sorted(b, key=_gate_key))}",
         tuple(sorted(b, key=_gate_key).index(t) for t in b))
        for (leg, graph, step), b in chosen)
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    return ScheduleOutcome(seed, status, _state_key(harness), start_orders, digest, lines,
                           error, positions)


def _gate_key(start: TaskStart) -> tuple[str, str]:
    return start.node, start.task_id


def _qualified(start: TaskStart) -> str:
    return f"{start.graph}/{start.node}" if start.graph else start.node


def _reproduction(answers: Answers, harness_kwargs: Mapping[str, Any],
                  start: datetime) -> str:
    """The harness call that runs one seed of :func:`explore` again, ``{seed}`` left open
    (the clock's start named unless it is where a fresh ``VirtualClock()`` starts)."""
    options = "".join(f", {k}={v!r}" for k, v in harness_kwargs.items())
    if start != DEFAULT_START:
        options += f", clock=VirtualClock(start={start!r})"
    harness = f"LangGraphHarness(graph, seed={{seed}}, thread_id='explore'{options})"
    if answers is None:
        return f"{harness}.trace(input)"
    return f"drive({harness}, input, answers)"


@_held
def explore(graph: Any, input: Any = None, *, seeds: Iterable[int] = range(20),
            schedules: Literal["exhaustive"] | int = "exhaustive", answers: Answers = None,
            max_runs: int = 500,
            saver_factory: Callable[[], BaseCheckpointSaver[Any]] = InMemorySaver,
            progress: ProgressCallback | None = None,
            **harness_kwargs: Any) -> ExploreReport:
    """Run a LangGraph graph under many seeds and report those whose outcome differs.

    An outcome is the status, the final state and each task's result (its write, interrupt
    or error); a seed changes only the order parallel tasks start and interleave in, so a
    divergence means the result hangs on timing (shared mutable state, a side channel).
    ``schedules="exhaustive"`` runs ``seeds`` and more until every parallel step of up to 5
    tasks has started in all ``k!`` orders (or ``max_runs``); an int runs that many seeds.
    ``progress(p: Progress)`` is called after every run and at the end of each phase, as by
    :func:`pytest_graphflow.explore`.

    Returns:
        an :class:`~pytest_graphflow.ExploreReport` (``report.assert_ok()`` raises).
    """
    progress = check_progress(progress, "explore")
    if schedules != "exhaustive" and (not isinstance(schedules, int)
                                      or isinstance(schedules, bool) or schedules < 1):
        raise InvalidArgument(f"explore(schedules={schedules!r}): use 'exhaustive' or an int >= 1")
    seed_list = list(seeds)
    budget = schedules if isinstance(schedules, int) else max(max_runs, 1)
    minimum = schedules if isinstance(schedules, int) else len(seed_list)
    total = schedules if isinstance(schedules, int) else None
    outcomes: list[ScheduleOutcome] = []
    coverage: dict[str, set[tuple[int, ...]]] = {}
    sizes: dict[str, int] = {}

    _fresh(input)  # an input no run could start from is refused before any run
    options = dict(harness_kwargs)
    clock = options.pop("clock", None)
    if clock is not None and not isinstance(clock, VirtualClock):
        raise InvalidArgument(f"explore(clock={clock!r}): pass a VirtualClock")
    # Each run on a fresh clock from the same instant: one shared clock would start every
    # run where the last one stopped (and a fresh VirtualClock() follows a freeze_time).
    start = VirtualClock().start if clock is None else clock.now()

    def run(seed: int) -> ScheduleOutcome:
        h = LangGraphHarness(graph, seed=seed, saver=saver_factory(), thread_id="explore",
                             clock=VirtualClock(start=start), **options)
        error = None
        try:
            drive(h, input, answers)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        return _outcome(seed, h, error)

    for n, seed in enumerate(_seed_stream(seed_list)):
        if n >= budget or (n >= minimum and _covered(coverage, sizes)):
            break
        outcome = run(seed)
        outcomes.append(outcome)
        report_progress(progress, Progress("explore", "schedules", n + 1, total,
                                           detail=f"seed {seed}"))
        for name, order in outcome.positions:
            coverage.setdefault(name, set()).add(order)
            sizes[name] = len(order)
    base = outcomes[0]
    divergences = [d for o in outcomes[1:] if (d := _compare(base, o)) is not None]
    report_progress(progress, Progress(
        "explore", "schedules", len(outcomes), len(outcomes), finished=True,
        detail=f"{len(divergences)} seed(s) ended otherwise" if divergences
        else "every seed ended alike"))
    again = run(base.seed)
    unstable = [] if _compare(base, again) is None else [base.seed]
    report_progress(progress, Progress(
        "explore", "rerun", 1, 1, finished=True,
        detail=f"seed {base.seed} {'unstable' if unstable else 'repeats'}"))
    cov = {name: (len(seen), math.factorial(sizes[name])) for name, seen in coverage.items()}
    return ExploreReport(base, outcomes, divergences, [], cov, unstable,
                         reproduce=_reproduction(answers, options, start))


def _covered(coverage: dict[str, set[tuple[int, ...]]], sizes: dict[str, int]) -> bool:
    return all(sizes[name] > MAX_EXHAUSTIVE or len(seen) >= math.factorial(sizes[name])
               for name, seen in coverage.items())


@_held
def check_crash_recovery(graph: Any, input: Any = None, *, answers: Answers = None,
                         seed: int = 0, phases: Iterable[CrashPhase] = ("before", "after"),
                         ignore: Iterable[str] = (),
                         saver_factory: Callable[[], BaseCheckpointSaver[Any]] = InMemorySaver,
                         progress: ProgressCallback | None = None,
                         **harness_kwargs: Any) -> list[Violation]:
    """Crash at every checkpointer operation of a clean run, recover, compare.

    The clean run (answering interrupts from ``answers``) logs its saver calls. Then, for
    each call and each phase (``"before"``: the call never reaches the saver; ``"after"``: it
    does, the caller never learns), a fresh run over a fresh saver crashes there
    (:class:`~pytest_graphflow.errors.SimulatedCrash`), and a fresh harness over the same
    inner saver (a new process) recovers: it continues the thread (or, when nothing was
    saved, starts again from ``input``) and answers interrupts until the run ends. Its final
    state must equal the clean run's (except the ``ignore`` keys: a value that records when
    something happened is later after a crash, as in production). A node with a side effect
    outside the state that feeds back into it (a counter, a payment ledger) shows up here when
    it re-runs. ``progress(p: Progress)`` is called after each crash point and when they are
    done, as by :func:`pytest_graphflow.invariants.check_crash_recovery`.

    Returns:
        one ``"crash-recovery"`` violation per crash point whose recovered state differs (or
        whose recovery raised); ``example`` is ``(op, nth, phase)``.
    """
    phases = tuple(phases)
    bad = [p for p in phases if p not in ("before", "after")]
    if bad or not phases:
        raise InvalidArgument(f"check_crash_recovery(phases={phases!r}): use 'before' and/or "
                              "'after'")
    clean = LangGraphHarness(graph, seed=seed, saver=saver_factory(), **harness_kwargs)
    drive(clean, input, answers)
    ignore = tuple(ignore)
    expected = _state_key(clean, ignore=ignore)
    counts: dict[str, int] = {}
    points: list[tuple[str, int]] = []
    for call in clean.saver.calls:
        counts[call.op] = counts.get(call.op, 0) + 1
        points.append((call.op, counts[call.op]))
    progress = check_progress(progress, "check_crash_recovery")
    out: list[Violation] = []
    todo = [(op, nth, phase) for op, nth in points for phase in phases]
    for n, (op, nth, phase) in enumerate(todo, start=1):
        try:
            saver = FaultySaver(saver_factory())
            saver.crash_at(op, nth, phase=phase)
            crashed = LangGraphHarness(graph, seed=seed, saver=saver, **harness_kwargs)
            try:
                drive(crashed, input, answers)
            except SimulatedCrash:
                pass
            else:
                continue  # the crash point was not reached in this run
            recovered = _successor(crashed, saver.inner, **harness_kwargs)
            where = f"crash {phase} {op} #{nth}"
            try:
                saved = recovered.graph.copy(update={"checkpointer": saver.inner}).get_state(
                    {"configurable": {"thread_id": crashed.thread_id}})
                fresh = not saved.values and not saved.next
                drive(recovered, input if fresh else None, answers, first=fresh)
            except Exception as exc:
                out.append(Violation("crash-recovery", None, f"{where}: recovery raised "
                                     f"{type(exc).__name__}: {exc}", example=(op, nth, phase)))
                continue
            got = _state_key(recovered, crashed, ignore=ignore)
            if got != expected:
                out.append(Violation(
                    "crash-recovery", None, f"{where}: the recovered run ends in {got}, the "
                    f"clean run in {expected} (a node re-ran with a different result: is it "
                    "idempotent?)", example=(op, nth, phase)))
        finally:
            report_progress(progress, Progress("check_crash_recovery", "crash points", n,
                                               len(todo), detail=f"{phase} {op} #{nth}"))
    report_progress(progress, Progress("check_crash_recovery", "crash points", len(todo),
                                       len(todo), finished=True,
                                       detail=f"{len(out)} violation(s)"))
    return out


@_held
def check_interrupt_resume_equivalence(
    graph: Any, input: Any, answers: Answers, *, seed: int = 0,
    saver_factory: Callable[[], BaseCheckpointSaver[Any]] = InMemorySaver,
    **harness_kwargs: Any,
) -> list[Violation]:
    """Resuming in the same harness equals resuming in a fresh one (a new process) per leg.

    Both answer every interrupt from ``answers``. They must end with the same status and
    state, and every task must have the same result.

    Returns:
        ``"equivalence"`` violations (empty when the property holds).
    """
    same = LangGraphHarness(graph, seed=seed, saver=saver_factory(), **harness_kwargs)
    drive(same, input, answers)
    inner = saver_factory()
    h = LangGraphHarness(graph, seed=seed, saver=inner, **harness_kwargs)
    trace = h.trace(_fresh(input))
    results = _task_results(trace.events)
    legs = 1
    while trace.result.status == "interrupted" and legs < _MAX_LEGS:
        legs += 1
        pending = h.pending_interrupts()
        previous = h
        h = _successor(previous, inner, **harness_kwargs)
        h.generated_ids = list(previous.generated_ids)
        h.last = trace.result
        trace = h.resume(answers={i.key: _answer(answers, i) for i in pending}
                         ) if pending else h.resume()
        results += _task_results(trace.events)
    out: list[Violation] = []
    if (same.last and same.last.status) != trace.result.status:
        out.append(Violation("equivalence", None, f"status {trace.result.status} with a fresh "
                             f"harness per leg, {same.last and same.last.status} in one"))
    if _state_key(same) != _state_key(h):
        out.append(Violation("equivalence", None, f"final state {trace.result.data} with a "
                             f"fresh harness per leg, {same.last and same.last.data} in one"))
    if sorted(results) != _task_results(same.events):
        out.append(Violation("equivalence", None, "the tasks' results differ between one "
                             "harness and a fresh harness per leg"))
    return out
