"""``explore``: run a graph under many schedules and report the ones whose outcome differs.

The deterministic runtime's ``seed`` decides in which order a parallel batch's tasks start
(and which ready task continues at each wake-up). A graph whose nodes are independent of one
another ends the same way under every seed; one with a node that mutates shared
(module-level) state, or reads what a sibling left there, does not. ``explore`` runs the graph
once per seed on a fresh runtime, records the order in which each batch's node functions
started, and compares each run's outcome with the first run's.

What is compared, and why:

* the final ``status`` and state;
* the event stream as JSON, after replacing the seed-derived run token (the hex part of
  ``run-…``, which is also in thread, checkpoint and task ids and interrupt keys) with
  ``<run>``. Those ids differ between seeds by design, so comparing them would report every
  seed; ``seq`` and virtual times are compared as they are, because in a correct runtime
  neither depends on the seed (events of a batch are yielded in declared order, C4).

The runtime folds a parallel batch's writes in declared node order, so a reducer that is not
commutative gives the same result under every seed — and a different one as soon as the
nodes are declared in another order, or an expansion's items come in another order. So
``explore(..., merge_orders=True)`` also re-folds each parallel batch's recorded writes in
every other order
(all of them for up to 5 writes, 120 sampled orders beyond) and reports the reducer keys
whose value would change (:class:`MergeOrderDependence`).

``schedules="exhaustive"`` keeps running seeds (past ``seeds`` if needed, up to ``max_runs``)
until every batch of up to 5 tasks it has seen has started in each of its ``k!`` orders;
``schedules=N`` runs ``N`` seeds.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from ..._engine._merge import merge_patches, validate_state
from ..._engine._runtime import GraphRuntime
from ..._graph._builder import CompiledGraph
from ..._graph._node import NODE_SEED
from ..._records._events import EventBase, Interrupt, NodeEnd, RunEnd, RunStart
from ..._records._json import jcopy
from ..._stores._memory import InMemoryCheckpointStore
from ..._time._clock import VirtualClock
from ..._time._loops import run_sync_owned
from ...errors import GraphflowError, InvalidArgument
from .._progress import Progress, ProgressCallback, check_progress, report_progress
from ..checks._checks import Violation
from ..strategies._instrument import CallLog, record_calls, task_number
from ._compare import Compare, Normalize, diff_paths
from ._deadlock import deadlock_violation
from ._pairs import report_pair

__all__ = ["Divergence", "ExploreReport", "MergeOrderDependence", "ScheduleOutcome", "explore"]

MAX_EXHAUSTIVE = 5
"""Batches of up to this many tasks are covered in every start order by ``"exhaustive"``."""


@dataclass(frozen=True)
class ScheduleOutcome:
    """One seed's run.

    Attributes:
        seed: the runtime seed (``GraphRuntime(..., seed=seed)`` reproduces the run;
            :meth:`ExploreReport.reproduction` gives the exact call).
        status: the run's status (``"raised"`` if the stream raised).
        state: the final state (JSON), run token replaced.
        start_orders: for each parallel batch, ``(step, nodes in the order they started)``.
        fingerprint: SHA-256 of the normalised stream.
        lines: the normalised stream, one JSON line per event.
        error: ``repr`` of what the stream raised, if it did.
        positions: per batch, its start order as positions in declared order.
    """

    seed: int
    status: str
    state: str
    start_orders: tuple[tuple[int, tuple[str, ...]], ...]
    fingerprint: str
    lines: tuple[str, ...] = field(repr=False, default=())
    error: str | None = None
    positions: tuple[tuple[str, tuple[int, ...]], ...] = field(repr=False, default=())


@dataclass(frozen=True)
class Divergence:
    """A seed whose outcome differs from the first seed's.

    Attributes:
        seed: reproduces it (:meth:`ExploreReport.reproduction` gives the call).
        outcome: its run.
        differs_in: ``"status"``, ``"state"`` and/or ``"events"``.
        detail: the first difference, readable.
    """

    seed: int
    outcome: ScheduleOutcome
    differs_in: tuple[str, ...]
    detail: str

    def __str__(self) -> str:
        orders = "; ".join(f"step {s}: {' < '.join(o)}" for s, o in self.outcome.start_orders)
        return (f"seed {self.seed} differs in {', '.join(self.differs_in)}"
                f" (start order {orders or 'n/a'}): {self.detail}")


@dataclass(frozen=True)
class MergeOrderDependence:
    """A reducer key whose value depends on the order a parallel batch's writes are folded in.

    Attributes:
        step: the batch's superstep (in the first seed's run).
        key: the state key.
        declared: the writers in the order the runtime folds them (declared order).
        order: another order of the same writes.
        declared_value: the key's value folded in declared order.
        other_value: its value folded in ``order``.
    """

    step: int
    key: str
    declared: tuple[str, ...]
    order: tuple[str, ...]
    declared_value: Any
    other_value: Any

    def __str__(self) -> str:
        return (f"step {self.step}, key {self.key!r}: folding the writes of "
                f"[{', '.join(self.declared)}] gives {self.declared_value!r}, of "
                f"[{', '.join(self.order)}] gives {self.other_value!r}; the reducer is "
                "order-dependent (the result hangs on declaration order)")


@dataclass
class ExploreReport:
    """What :func:`explore` found.

    Attributes:
        baseline: the first seed's run; every other is compared with it.
        outcomes: every run, in the order run.
        divergences: the seeds whose outcome differs from the baseline.
        merge_orders: reducer keys whose value depends on the order of a batch's writes.
        coverage: per parallel batch (``"step S: a, b, c"``), ``(orders seen, k!)``.
        not_reproducible: seeds that gave another outcome when run again (state leaking
            between runs, e.g. a module-level counter).
        deadlock: a seed's run that can never end (``VirtualDeadlock``: every task of a batch
            waits on something virtual time cannot bring about), naming the waiting nodes;
            exploring stops at the first.

        reproduce: the call that reproduces a seed's run, with ``{seed}`` for the seed (see
            :meth:`reproduction`).
    """

    baseline: ScheduleOutcome
    outcomes: list[ScheduleOutcome]
    divergences: list[Divergence]
    merge_orders: list[MergeOrderDependence]
    coverage: dict[str, tuple[int, int]]
    not_reproducible: list[int] = field(default_factory=list)
    deadlock: Violation | None = None
    reproduce: str = "GraphRuntime(..., clock=VirtualClock(), seed={seed})"

    def reproduction(self, seed: int) -> str:
        """The call that runs ``seed``'s schedule again (printed with each divergence)."""
        return self.reproduce.replace("{seed}", str(seed))

    @property
    def runs(self) -> int:
        """How many runs were made."""
        return len(self.outcomes)

    @property
    def seeds(self) -> list[int]:
        """The seeds run."""
        return [o.seed for o in self.outcomes]

    @property
    def ok(self) -> bool:
        """No deadlock, no divergence, no merge-order dependence, every seed reproducible."""
        return not (self.deadlock or self.divergences or self.merge_orders
                    or self.not_reproducible)

    @property
    def violations(self) -> list[Violation]:
        """The findings as :class:`Violation` values (rule ``"deadlock"``, ``"schedule"``,
        ``"reducer:order"``)."""
        out = [] if self.deadlock is None else [self.deadlock]
        out += [Violation("schedule", None, str(d), example=d.seed) for d in self.divergences]
        out += [Violation("schedule", None, f"seed {s} is not reproducible: a second run gave "
                          "another outcome (state leaks between runs)", example=s)
                for s in self.not_reproducible]
        out += [Violation("reducer:order", None, str(m), example=m) for m in self.merge_orders]
        return out

    @property
    def distinct(self) -> list[list[Divergence]]:
        """The divergences grouped by outcome (same status, state and stream), first seen first."""
        groups: dict[tuple[str, str, str], list[Divergence]] = {}
        for d in self.divergences:
            o = d.outcome
            groups.setdefault((o.status, o.state, o.fingerprint), []).append(d)
        return list(groups.values())

    def __str__(self) -> str:
        lines = [f"explore: {self.runs} runs (seeds {_ranges(self.seeds)}); baseline seed "
                 f"{self.baseline.seed} ended {self.baseline.status} with state "
                 f"{self.baseline.state}"]
        for batch, (seen, total) in self.coverage.items():
            lines.append(f"  {batch}: {seen}/{total} start orders")
        if self.deadlock is not None:
            lines.append(f"  - {self.deadlock}")
        if self.ok:
            lines.append("  every schedule ended the same way")
        groups = self.distinct
        if groups:
            lines.append(f"  {len(groups)} other outcome(s) in {len(self.divergences)} run(s):")
        for group in groups:
            first = group[0]
            seeds = ", ".join(str(d.seed) for d in group[:8]) + (", ..." if len(group) > 8 else "")
            lines.append(f"  - seeds {seeds}: {first} "
                         f"(reproduce: {self.reproduction(first.seed)})")
        for s in self.not_reproducible:
            lines.append(f"  - seed {s} is not reproducible: a second run gave another outcome "
                         "(state leaks between runs)")
        for m in self.merge_orders:
            lines.append(f"  - {m}")
        return "\n".join(lines)

    def assert_ok(self) -> None:
        """Raise ``AssertionError`` with the report unless :attr:`ok`."""
        if not self.ok:
            raise AssertionError(str(self))


def _ranges(seeds: list[int]) -> str:
    if not seeds:
        return "none"
    s = sorted(seeds)
    if s == list(range(s[0], s[-1] + 1)):
        return f"{s[0]}..{s[-1]}"
    return ", ".join(map(str, s[:10])) + (", ..." if len(s) > 10 else "")


def _normalise(events: list[EventBase], data: Any,
               cmp: Compare) -> tuple[tuple[str, ...], str]:
    lines = [json.dumps(cmp.event(e.model_dump(mode="json")), sort_keys=True) for e in events]
    state = json.dumps(cmp.state(data), sort_keys=True)
    run = next((e.run_id for e in events if isinstance(e, RunStart)), None)
    token = run[4:] if run and run.startswith("run-") else run
    if token:
        lines = [line.replace(token, "<run>") for line in lines]
        state = state.replace(token, "<run>")
    return tuple(lines), state


def _default_runtime(seed: int) -> GraphRuntime:
    return GraphRuntime(store=InMemoryCheckpointStore(), clock=VirtualClock(), seed=seed)


async def _run_one(
    graph: CompiledGraph, input: Any, rt: GraphRuntime, answers: Any, cmp: Compare,
) -> tuple[ScheduleOutcome, list[EventBase], Violation | None]:
    seed = rt.seed if rt.seed is not None else 0
    calls = CallLog()
    g = record_calls(graph, calls)
    opts: dict[str, Any] = {}
    if answers is not None:
        from ._drive import answer_for

        opts["on_interrupt"] = lambda i: answer_for(answers, i)
    events: list[EventBase] = []
    status, data, error, stuck = "raised", None, None, None
    stream = rt.stream(g, input, **opts)
    try:
        async for e in stream:
            events.append(e)
        result = stream.result()
        status, data = result.status, result.data
        stuck = deadlock_violation(result, f"seed {seed}")
    except Exception as exc:  # an edge function or the store raised: part of the outcome
        error = f"{type(exc).__name__}: {exc}"
        await stream.aclose()
    orders, positions = [], []
    for step, started in sorted(calls.start_orders().items()):
        if len(started) > 1:
            declared = sorted(started, key=lambda c: task_number(c.task_id))
            orders.append((step, tuple(c.node for c in started)))
            positions.append((f"step {step}: {', '.join(c.node for c in declared)}",
                              tuple(declared.index(c) for c in started)))
    lines, state = _normalise(events, data, cmp)
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    return ScheduleOutcome(seed, status, state, tuple(orders), digest, lines, error,
                           tuple(positions)), events, stuck


def _compare(base: ScheduleOutcome, other: ScheduleOutcome) -> Divergence | None:
    differs = []
    details = []
    if base.status != other.status or base.error != other.error:
        differs.append("status")
        details.append(f"status {other.status} ({other.error or 'no error'}) vs "
                       f"{base.status} ({base.error or 'no error'})")
    if base.state != other.state:
        differs.append("state")
        paths = diff_paths(json.loads(base.state), json.loads(other.state), limit=5)
        details.append("state differs at " + "; ".join(paths))
    if base.lines != other.lines:
        differs.append("events")
        for i, (a, b) in enumerate(itertools.zip_longest(base.lines, other.lines)):
            if a != b:
                details.append(_event_diff(i, a, b))
                break
    if not differs:
        return None
    return Divergence(other.seed, other, tuple(differs), "; ".join(details))


def _first_index(base: ScheduleOutcome, other: ScheduleOutcome) -> int | None:
    """The index of the first event where ``other``'s stream differs from ``base``'s."""
    for i, (a, b) in enumerate(itertools.zip_longest(base.lines, other.lines)):
        if a != b:
            return i
    return None


def _event_diff(i: int, base: str | None, other: str | None) -> str:
    if base is None or other is None:
        return f"the stream {'ends' if other is None else 'goes on'} at event #{i}"
    a, b = json.loads(base), json.loads(other)
    what = f"{b.get('type')} {b.get('node') or ''}".strip()
    if a.get("type") != b.get("type") or a.get("node") != b.get("node"):
        return f"event #{i} is {what}, not {a.get('type')} {a.get('node') or ''}".rstrip()
    return f"event #{i} ({what}) differs at " + "; ".join(diff_paths(a, b, limit=5))


def _merge_orders(
    graph: CompiledGraph, input: Any, events: list[EventBase]
) -> list[MergeOrderDependence]:
    """Re-fold each committed parallel batch's writes in other orders (first leg only)."""
    if not graph.reducers:
        return []
    try:
        state = validate_state(graph, _input_dict(input)).model_dump(mode="json")
    except GraphflowError:
        return []
    out: list[MergeOrderDependence] = []
    found: set[tuple[int, str]] = set()
    by_step: dict[int, list[NodeEnd]] = {}
    steps: list[int] = []
    for e in events:
        if isinstance(e, NodeEnd):
            if e.step not in by_step:
                steps.append(e.step)
            by_step.setdefault(e.step, []).append(e)
        if isinstance(e, RunEnd):
            break
    for step in steps:
        ends = by_step[step]
        patches = [(e.node or "", e.patch) for e in ends]
        try:
            after = merge_patches(graph, state, patches, parallel=len(patches) > 1)
        except GraphflowError:
            return out
        keys = {k for _, p in patches if p for k in p if k in graph.reducers}
        writers = [i for i, (_, p) in enumerate(patches) if p and keys & set(p)]
        if len(writers) > 1 and keys:
            for order in _orders(len(patches)):
                permuted = [patches[i] for i in order]
                try:
                    other = merge_patches(graph, state, permuted, parallel=True)
                except GraphflowError:
                    continue
                for key in sorted(keys):
                    if (step, key) in found or other.get(key) == after.get(key):
                        continue
                    found.add((step, key))
                    out.append(MergeOrderDependence(
                        step, key, tuple(n for n, _ in patches), tuple(n for n, _ in permuted),
                        jcopy(after.get(key)), jcopy(other.get(key))))
        state = after
    return out


def _orders(n: int) -> Iterator[tuple[int, ...]]:
    if n <= MAX_EXHAUSTIVE:
        yield from itertools.permutations(range(n))
        return
    rng = random.Random(f"graphflow-explore:{n}")
    for _ in range(120):
        order = list(range(n))
        rng.shuffle(order)
        yield tuple(order)


def _input_dict(input: Any) -> dict[str, Any]:
    if input is None:
        return {}
    if isinstance(input, BaseModel):
        return input.model_dump(mode="json")
    return dict(input)


def _seed_stream(seeds: Iterable[int]) -> Iterator[int]:
    seen: set[int] = set()
    top = -1
    for s in seeds:
        if not isinstance(s, int) or isinstance(s, bool):
            raise InvalidArgument(f"explore(seeds=...): seeds must be ints, got {s!r}")
        if s not in seen:
            seen.add(s)
            top = max(top, s)
            yield s
    while True:
        top += 1
        yield top


def explore(
    graph: CompiledGraph | Callable[[], CompiledGraph],
    input: Mapping[str, Any] | BaseModel | None = None,
    *,
    seeds: Iterable[int] = range(50),
    schedules: Literal["exhaustive"] | int = "exhaustive",
    runtime_factory: Callable[[int], GraphRuntime] | None = None,
    answers: Mapping[str, Any] | Callable[[Interrupt], Any] | None = None,
    merge_orders: bool = False,
    max_runs: int = 2000,
    backend: str = "asyncio",
    ignore: Iterable[str] | str | None = None,
    normalize: Normalize | None = None,
    node_seed: int | None = None,
    progress: ProgressCallback | None = None,
) -> ExploreReport:
    """Run ``graph`` under many schedules and report those whose outcome differs.

    Each seed runs on a fresh runtime; a run's outcome is its status, final state and event
    stream, compared with the first seed's. Ids derive from the seed by design, so the seed's
    run token (in run, thread, checkpoint and task ids and interrupt keys) is replaced by
    ``<run>`` before comparing; ``seq`` and virtual times are compared as they are. Each
    parallel batch's writes are also re-folded in other orders to find order-dependent
    reducers, which seeds cannot reveal (the runtime folds in declared order).

    Every run executes on an event loop owned by its runtime's virtual clock, as
    ``GraphRuntime.invoke`` does: timers and cancel scopes in node code are virtual, and a
    batch that can never wake ends the run with ``VirtualDeadlock`` at once instead of
    hanging; that is a finding (``report.deadlock``, naming the waiting nodes) and exploring
    stops there.

    Args:
        graph: the graph, or a factory ``() -> CompiledGraph`` called for every run (fakes
            built into the graph are then fresh per run and cannot leak between runs).
        input: its input.
        seeds: the seeds to run first (the first is the baseline).
        schedules: ``"exhaustive"``: every seed of ``seeds``, then more until every parallel
            batch of up to 5 tasks has started in all its ``k!`` orders (or ``max_runs``);
            an int: exactly that many seeds.
        runtime_factory: ``seed -> GraphRuntime`` (default: an in-memory store and a
            :class:`VirtualClock`); called once per run, so every run is independent.
        answers: answers for interrupts (``"<node>:<id>"`` or ``Interrupt.key`` keys, or a
            function), given at once by an ``on_interrupt`` hook; without, a run stops at its
            first interrupt.
        merge_orders: also re-fold each parallel batch's writes in other orders, and report
            reducer keys whose value hangs on declaration order. Off by default: the runtime
            folds in declared order, so such a value is still deterministic, and the most
            common reducer — appending a parallel batch's items to a list with
            ``Reducer(operator.add)``, as the Quickstart does — legitimately depends on it.
            Turn it on to find reducers that silently drop writes (last writer wins).
        max_runs: the most runs ``"exhaustive"`` makes.
        backend: the anyio backend to run on.
        ignore: state paths left out of the comparison (``"audit.*.at"``), in the final
            state and in the state events carry.
        normalize: a function ``state -> state`` applied before comparing.
        node_seed: hold node randomness fixed across seeds: ``ctx.random()`` and
            ``ctx.uuid()`` draw from ``node_seed`` and the task's place in its run, not from
            the run's id, so only the schedule differs between seeds (by default each seed's
            runs draw their own values, which ``ignore=`` must then leave out).
        progress: ``progress(p: Progress)``, called after every run (phase ``"schedules"``,
            ``p.detail`` the seed), when the schedules are done, and after the baseline's
            second run (``"rerun"``) and the merge orders (``"merge orders"``). The pytest
            plugin prints the same (``--graphflow-progress``).

    Returns:
        an :class:`ExploreReport`; ``report.assert_ok()`` raises with a readable summary.
    """
    if node_seed is not None and (not isinstance(node_seed, int) or isinstance(node_seed, bool)):
        raise InvalidArgument(f"explore(node_seed={node_seed!r}): pass an int or None")
    if schedules != "exhaustive" and (not isinstance(schedules, int) or isinstance(
            schedules, bool) or schedules < 1):
        raise InvalidArgument(f"explore(schedules={schedules!r}): use 'exhaustive' or an int >= 1")
    if not isinstance(graph, CompiledGraph) and (not callable(graph) or isinstance(graph, type)
                                                 or type(graph).__module__.startswith("langgraph")):
        hint = ("; for a LangGraph graph use pytest_graphflow.langgraph.explore"
                if type(graph).__module__.startswith("langgraph") else "")
        raise InvalidArgument(f"explore(graph={graph!r}): pass a CompiledGraph or a factory "
                              f"() -> CompiledGraph{hint}")
    from ._drive import graph_maker

    progress = check_progress(progress, "explore")
    make = graph_maker(graph, "explore")
    cmp = Compare.of(ignore, normalize)
    factory = runtime_factory or _default_runtime
    seed_list = list(seeds)
    budget = schedules if isinstance(schedules, int) else max(max_runs, 1)
    total = schedules if isinstance(schedules, int) else None
    minimum = schedules if isinstance(schedules, int) else len(seed_list)

    def run(seed: int) -> tuple[ScheduleOutcome, list[EventBase], Violation | None,
                                CompiledGraph]:
        g, rt = make(), factory(seed)

        async def main() -> tuple[ScheduleOutcome, list[EventBase], Violation | None]:
            held = NODE_SEED.set(node_seed)
            try:
                return await _run_one(g, input, rt, answers, cmp)
            finally:
                NODE_SEED.reset(held)

        return (*run_sync_owned(main, rt.clock, backend), g)

    outcomes: list[ScheduleOutcome] = []
    coverage: dict[str, set[tuple[int, ...]]] = {}
    sizes: dict[str, int] = {}
    base_events: list[EventBase] = []
    base_graph: CompiledGraph | None = None
    stuck: Violation | None = None
    for n, seed in enumerate(_seed_stream(seed_list)):
        if n >= budget or (n >= minimum and _covered(coverage, sizes)):
            break
        outcome, events, stuck, g = run(seed)
        if n == 0:
            base_events, base_graph = events, g
        outcomes.append(outcome)
        report_progress(progress, Progress("explore", "schedules", n + 1, total,
                                           detail=f"seed {seed}"))
        if stuck is not None:
            break  # a run that can never end: the finding; more seeds would wait too
        for name, order in outcome.positions:
            coverage.setdefault(name, set()).add(order)
            sizes[name] = len(order)
    base = outcomes[0]
    divergences = [d for o in outcomes[1:] if (d := _compare(base, o)) is not None]
    verdict = (f"{len(divergences)} seed(s) ended otherwise" if divergences
               else "a deadlock" if stuck is not None else "every seed ended alike")
    report_progress(progress, Progress("explore", "schedules", len(outcomes), len(outcomes),
                                       finished=True, detail=verdict))
    if divergences:
        first = divergences[0]
        report_pair("explore", str(first), (f"seed {base.seed} (baseline)", f"seed {first.seed}"),
                    base.lines, first.outcome.lines, first=_first_index(base, first.outcome),
                    graph=base_graph)
    unstable: list[int] = []
    if stuck is None:
        again = run(base.seed)[0]
        unstable = [] if _compare(base, again) is None else [base.seed]
        report_progress(progress, Progress(
            "explore", "rerun", 1, 1, finished=True,
            detail=f"seed {base.seed} {'unstable' if unstable else 'repeats'}"))
    assert base_graph is not None
    merges = _merge_orders(base_graph, input, base_events) if merge_orders else []
    if merge_orders:
        report_progress(progress, Progress("explore", "merge orders", 1, 1, finished=True,
                                           detail=f"{len(merges)} order-dependent key(s)"))
    cov = {name: (len(seen), math.factorial(sizes[name])) for name, seen in coverage.items()}
    return ExploreReport(base, outcomes, divergences, merges, cov, unstable, stuck)


def _covered(coverage: dict[str, set[tuple[int, ...]]], sizes: dict[str, int]) -> bool:
    for name, seen in coverage.items():
        k = sizes[name]
        if k <= MAX_EXHAUSTIVE and len(seen) < math.factorial(k):
            return False
    return True
