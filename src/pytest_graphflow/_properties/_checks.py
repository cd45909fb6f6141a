"""Checkers for the event invariants C1–C10 (SPEC §3) over an event list.

Each ``check_cN`` takes the events of one run — one leg, or several legs of the same run in
order (a run paused and resumed) — and returns :class:`Violation` values naming the rule, the
index of the offending event in the list, and what is wrong. They never raise on bad input:
a malformed stream is what they are for.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._graph._builder import REPLAYED_EFFECTS, CompiledGraph
from .._records._events import (
    CheckpointSaved,
    EdgeTransition,
    ErrorEvent,
    EventBase,
    InterruptEvent,
    NodeEnd,
    NodeStart,
    RunEnd,
    RunStart,
    parse_event,
)

__all__ = [
    "Leg",
    "Violation",
    "check_c1",
    "check_c2",
    "check_c3",
    "check_c4",
    "check_c5",
    "check_c6",
    "check_c7",
    "check_c8",
    "check_c9",
    "check_c10",
    "check_invariants",
    "format_violations",
    "normalise_events",
    "split_legs",
]


@dataclass(frozen=True)
class Violation:
    """A broken rule.

    Attributes:
        rule: ``"C1"``..``"C10"`` for the event invariants; the whole-run properties use
            ``"equivalence"``, ``"crash-recovery"``, ``"effects"``, ``"determinism"``,
            ``"schedule"`` and ``"reducer:<law>"``.
        index: the index of the offending event in the list checked, or ``None``.
        message: what is wrong, naming nodes, tasks and checkpoints.
        example: for whole-run properties and reducer laws, the (minimal) counterexample.
    """

    rule: str
    index: int | None
    message: str
    example: Any = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        where = "" if self.index is None else f" at event #{self.index}"
        return f"{self.rule}{where}: {self.message}"


@dataclass
class Leg:
    """One leg of a run: from a ``run_start`` to its ``run_end`` (or the end of the list).

    Attributes:
        start: index of the leg's first event in the whole list.
        events: the leg's events.
    """

    start: int
    events: list[EventBase]

    @property
    def end(self) -> int:
        """Index one past the leg's last event."""
        return self.start + len(self.events)

    def indexed(self) -> Iterable[tuple[int, EventBase]]:
        """``(index in the whole list, event)`` pairs."""
        return enumerate(self.events, start=self.start)

    @property
    def run_start(self) -> RunStart | None:
        """The leg's ``run_start``, if it begins with one."""
        first = self.events[0] if self.events else None
        return first if isinstance(first, RunStart) else None

    @property
    def run_end(self) -> RunEnd | None:
        """The leg's ``run_end``, if it ends with one."""
        last = self.events[-1] if self.events else None
        return last if isinstance(last, RunEnd) else None


def normalise_events(events: Iterable[Any]) -> list[EventBase]:
    """Events as models: wire-form dicts and JSON strings are parsed."""
    out: list[EventBase] = []
    for e in events:
        out.append(e if isinstance(e, EventBase) else parse_event(e))
    return out


def split_legs(events: Sequence[EventBase]) -> list[Leg]:
    """The legs of a run's log, split at each ``run_start`` (a prefix before any is a leg)."""
    legs: list[Leg] = []
    for i, e in enumerate(events):
        if isinstance(e, RunStart) or not legs:
            legs.append(Leg(i, []))
        legs[-1].events.append(e)
    return legs


def _halting(e: EventBase) -> bool:
    """An event reporting a node's halt: an interrupt, or a final, unrouted node error."""
    if isinstance(e, InterruptEvent):
        return True
    return (isinstance(e, ErrorEvent) and e.task_id is not None and not e.will_retry
            and e.routed_to is None)


def _terminal(e: EventBase) -> bool:
    """A task's result: ``node_end``, ``interrupt`` or a final ``error``."""
    return isinstance(e, (NodeEnd, InterruptEvent)) or (
        isinstance(e, ErrorEvent) and e.task_id is not None and not e.will_retry
    )


# --------------------------------------------------------------------------- C1


def check_c1(events: Sequence[EventBase], *, stream_raised: bool = False) -> list[Violation]:
    """C1: each leg has one ``run_start`` first and one ``run_end`` last.

    With ``stream_raised`` the last leg may stop early (C6, C7: the stream raised).
    """
    out: list[Violation] = []
    if not events:
        if not stream_raised:
            out.append(Violation("C1", None, "the stream yielded no event (no run_start)"))
        return out
    legs = split_legs(events)
    for n, leg in enumerate(legs):
        last_leg = n == len(legs) - 1
        if leg.run_start is None:
            out.append(Violation("C1", leg.start, f"the first event is "
                                 f"{leg.events[0].type!r}, not run_start"))  # type: ignore[attr-defined]
        ends = [i for i, e in leg.indexed() if isinstance(e, RunEnd)]
        if len(ends) > 1:
            out.append(Violation("C1", ends[1], f"a second run_end in one leg (first at "
                                 f"#{ends[0]})"))
        if ends and ends[0] != leg.end - 1:
            out.append(Violation("C1", ends[0] + 1, "an event follows run_end"))
        if not ends and not (last_leg and stream_raised):
            out.append(Violation("C1", leg.end - 1, "the leg has no run_end (and the stream "
                                 "did not raise)"))
    return out


# --------------------------------------------------------------------------- C2


def check_c2(events: Sequence[EventBase]) -> list[Violation]:
    """C2: each task has ``node_start``, then exactly one of ``node_end``/``interrupt``/``error``.

    Retried attempts show as ``error(will_retry=True)`` followed by the next ``node_start``.
    """
    out: list[Violation] = []
    for leg in split_legs(events):
        state: dict[str, str] = {}
        where: dict[str, int] = {}
        for i, e in leg.indexed():
            tid = e.task_id
            if tid is None or isinstance(e, (CheckpointSaved, RunEnd, RunStart)):
                continue
            s = state.get(tid, "idle")
            if isinstance(e, NodeStart):
                if s == "running":
                    out.append(Violation("C2", i, f"task {tid} ({e.node}) started again "
                                         "before reporting a result"))
                elif s == "done":
                    out.append(Violation("C2", i, f"task {tid} ({e.node}) started again after "
                                         "its result in the same leg"))
                state[tid], where[tid] = "running", i
            elif isinstance(e, ErrorEvent) and e.will_retry:
                if s != "running":
                    out.append(Violation("C2", i, f"retry error of task {tid} ({e.node}) "
                                         "without a running attempt"))
                state[tid] = "retrying"
            elif _terminal(e):
                if s == "idle":
                    out.append(Violation("C2", i, f"{e.type} of task {tid} ({e.node}) without "  # type: ignore[attr-defined]
                                         "a node_start"))
                elif s == "retrying":
                    out.append(Violation("C2", i, f"{e.type} of task {tid} ({e.node}) after a "  # type: ignore[attr-defined]
                                         "retry error, without the next attempt's node_start"))
                elif s == "done":
                    out.append(Violation("C2", i, f"a second result ({e.type}) for task {tid} "  # type: ignore[attr-defined]
                                         f"({e.node})"))
                state[tid] = "done"
            elif not isinstance(e, EdgeTransition) and s != "running":
                out.append(Violation("C2", i, f"{e.type} of task {tid} ({e.node}) outside its "  # type: ignore[attr-defined]
                                     "node_start..result span"))
        for tid, s in state.items():
            if s in ("running", "retrying") and leg.run_end is not None:
                out.append(Violation("C2", where[tid], f"task {tid} started but reported no "
                                     "node_end, interrupt or error before run_end"))
    return out


# --------------------------------------------------------------------------- C3


def check_c3(events: Sequence[EventBase]) -> list[Violation]:
    """C3: an ``edge_transition`` comes after its source's result and before its target starts.

    Every task after the entry batch must have been reached by an earlier edge (in an earlier
    step, possibly in an earlier leg); a leg resumed from outside the list is given the benefit
    of the doubt for its first batch.
    """
    out: list[Violation] = []
    legs = split_legs(events)
    pending: dict[str, list[int]] = {}  # target -> steps of edges into it not yet used
    started: dict[str, int] = {}  # node -> the step its last batch started in
    for n, leg in enumerate(legs):
        results: dict[str, tuple[int, str, EventBase]] = {}
        rs = leg.run_start
        resumed_outside = rs is not None and rs.resumed_from is not None and n == 0
        first_step = next((e.step for e in leg.events if isinstance(e, NodeStart)), None)
        for i, e in leg.indexed():
            if _terminal(e) or (isinstance(e, ErrorEvent) and e.routed_to is not None):
                assert e.task_id is not None
                results[e.task_id] = (i, e.node or "", e)
            if isinstance(e, EdgeTransition):
                src = results.get(e.task_id or "")
                if src is None:
                    out.append(Violation("C3", i, f"edge {e.source} -> {e.target} (task "
                                         f"{e.task_id}) before its source's result"))
                elif src[1] != e.source:
                    out.append(Violation("C3", i, f"edge {e.source} -> {e.target} names task "
                                         f"{e.task_id}, which is node {src[1]!r}"))
                elif isinstance(src[2], InterruptEvent) or (
                    isinstance(src[2], ErrorEvent) and src[2].routed_to is None
                ):
                    out.append(Violation("C3", i, f"edge {e.source} -> {e.target} after "
                                         f"{e.source} halted ({src[2].type})"))
                pending.setdefault(e.target, []).append(e.step)
            elif isinstance(e, NodeStart) and e.attempt == 1:
                node = e.node or ""
                entry = e.step == 0  # reached from START, which has no edge events
                if entry or (resumed_outside and e.step == first_step):
                    started[node] = e.step
                    continue
                steps = pending.get(node, [])
                if not any(s < e.step for s in steps) and started.get(node) != e.step:
                    out.append(Violation("C3", i, f"node_start of {node} (task {e.task_id}, "
                                         f"step {e.step}) with no earlier edge into it"))
                pending[node] = [s for s in steps if s >= e.step]
                started[node] = e.step
    return out


# --------------------------------------------------------------------------- C4


def _blocks(leg: Leg) -> list[tuple[int, int, str, list[tuple[int, EventBase]]]]:
    """Contiguous runs of one task's events: ``(first index, step, task_id, events)``."""
    blocks: list[tuple[int, int, str, list[tuple[int, EventBase]]]] = []
    for i, e in leg.indexed():
        if e.task_id is None or isinstance(e, (CheckpointSaved, RunEnd)):
            blocks.append((i, e.step, "", [(i, e)]))
            continue
        if blocks and blocks[-1][2] == e.task_id:
            blocks[-1][3].append((i, e))
        else:
            blocks.append((i, e.step, e.task_id, [(i, e)]))
    return blocks


def check_c4(events: Sequence[EventBase], *, graph: CompiledGraph | None = None) -> list[Violation]:
    """C4: a batch's events come once every node ran, task by task, halting tasks last.

    Checked: each task's events are contiguous; within a step, tasks that halted (interrupt,
    unrouted error) come after every task that completed; every event of a step is stamped no
    earlier than the latest ``finished_at`` of the step's tasks; with ``graph``, tasks come in
    declared node order (completed ones, then halting ones).
    """
    out: list[Violation] = []
    order = None if graph is None else {name: s.index for name, s in graph.nodes.items()}
    for leg in split_legs(events):
        seen: dict[str, int] = {}
        finished: dict[int, Any] = {}
        for _, e in leg.indexed():
            if isinstance(e, NodeEnd):
                prev = finished.get(e.step)
                finished[e.step] = e.finished_at if prev is None else max(prev, e.finished_at)
        first_start: dict[int, int] = {}
        for i, e in leg.indexed():
            if isinstance(e, NodeStart):
                first_start.setdefault(e.step, i)
        for i, e in leg.indexed():
            latest = finished.get(e.step)
            if latest is not None and e.time < latest and i >= first_start.get(e.step, i + 1):
                out.append(Violation("C4", i, f"{e.type} of step {e.step} yielded at "  # type: ignore[attr-defined]
                                     f"{e.time.isoformat()}, before a task of the step "
                                     f"finished ({latest.isoformat()})"))
                break
        by_step: dict[int, list[tuple[int, str, str, bool]]] = {}
        for first, step, tid, evs in _blocks(leg):
            if not tid:
                continue
            if tid in seen:
                out.append(Violation("C4", first, f"events of task {tid} are interleaved with "
                                     f"another task's (its block began at #{seen[tid]})"))
                continue
            seen[tid] = first
            halted = any(_halting(ev) for _, ev in evs)
            node = next((ev.node for _, ev in evs if ev.node), "")
            by_step.setdefault(step, []).append((first, tid, node or "", halted))
        for step, tasks in by_step.items():
            seen_halt: str | None = None
            for first, tid, node, halted in tasks:
                if halted:
                    seen_halt = seen_halt or node
                elif seen_halt is not None:
                    out.append(Violation("C4", first, f"step {step}: {node} (task {tid}) "
                                         f"completed but comes after halting node {seen_halt}"))
            if order is None:
                continue
            for group in (False, True):
                idx = [(first, node) for first, _, node, h in tasks if h is group]
                for (_, a), (f2, b) in itertools.pairwise(idx):
                    if a in order and b in order and order[b] < order[a]:
                        out.append(Violation("C4", f2, f"step {step}: {b} comes after {a}, "
                                             "against declared order"))
    return out


# --------------------------------------------------------------------------- C5, C6


def _save_outcomes(store_log: Iterable[Any]) -> dict[str, list[str]]:
    """``checkpoint id -> outcomes of its saves`` from a ``FaultyStore`` call log."""
    out: dict[str, list[str]] = {}
    for call in store_log:
        if getattr(call, "op", None) != "save":
            continue
        cid = str(getattr(call, "args", "")).split(" of run", 1)[0]
        out.setdefault(cid, []).append(str(getattr(call, "outcome", "")))
    return out


def check_c5(
    events: Sequence[EventBase], *, store_log: Iterable[Any] | None = None
) -> list[Violation]:
    """C5 (from the events, and the store's call log if given).

    A leg that halts (``run_end`` status ``interrupted``/``failed``/``cancelled``) ends with the
    halting events, then the ``checkpoint_saved`` of the checkpoint to resume from, then
    ``run_end``; with ``store_log``, every ``checkpoint_saved`` names a save that succeeded.
    Whether the save *returned before* the halting event was yielded needs the interleaving:
    see :func:`pytest_graphflow.invariants.check_recording`.
    """
    out: list[Violation] = []
    for leg in split_legs(events):
        end = leg.run_end
        if end is None or end.status == "completed":
            continue
        evs = leg.events
        if len(evs) < 2 or not isinstance(evs[-2], CheckpointSaved):
            out.append(Violation("C5", leg.end - 1, f"run_end({end.status}) is not directly "
                                 "preceded by the checkpoint_saved of the checkpoint to resume "
                                 "from"))
            continue
        halts = [i for i, e in leg.indexed() if _halting(e) and e.step == end.step]
        for i in halts:
            if i > leg.end - 2:
                out.append(Violation("C5", i, "a halting event comes after its checkpoint_saved"))
    if store_log is not None:
        saves = _save_outcomes(store_log)
        for i, e in enumerate(events):
            if isinstance(e, CheckpointSaved) and "ok" not in saves.get(e.checkpoint_id, []):
                got = saves.get(e.checkpoint_id)
                out.append(Violation("C5", i, f"checkpoint_saved {e.checkpoint_id}, but the store "
                                     + ("never saw its save" if not got else
                                        f"did not save it (outcomes: {got})")))
    return out


def check_c6(
    events: Sequence[EventBase], *, store_log: Iterable[Any], stream_raised: bool
) -> list[Violation]:
    """C6: a save the store rejected ends the run, and the stream raises.

    No ``checkpoint_saved`` names a rejected checkpoint, the stream raised, and the last leg
    has no ``run_end``.
    """
    out: list[Violation] = []
    saves = _save_outcomes(store_log)
    rejected = [cid for cid, oc in saves.items()
                if any(o in ("rejected", "failed") for o in oc) and "ok" not in oc]
    if not rejected:
        return out
    for i, e in enumerate(events):
        if isinstance(e, CheckpointSaved) and e.checkpoint_id in rejected:
            out.append(Violation("C6", i, f"checkpoint_saved {e.checkpoint_id}, whose save the "
                                 "store rejected"))
    if not stream_raised:
        out.append(Violation("C6", None, f"the store rejected the save of {rejected[0]}, but "
                             "the stream did not raise"))
    legs = split_legs(events)
    if legs and legs[-1].run_end is not None:
        out.append(Violation("C6", legs[-1].end - 1, f"run_end after the store rejected the save "
                             f"of {rejected[0]}"))
    return out


# --------------------------------------------------------------------------- C7, C8


def check_c7(events: Sequence[EventBase], *, graph: CompiledGraph) -> list[Violation]:
    """C7 (expansions): a step whose node expanded saves a checkpoint before the expansion runs.

    With a checkpoint policy that saves per step this is the extra "before" checkpoint; in
    every policy, at least one ``checkpoint_saved`` precedes the expanded tasks' batch.
    """
    out: list[Violation] = []
    for leg in split_legs(events):
        ends: dict[str, NodeEnd] = {}
        for i, e in leg.indexed():
            if isinstance(e, NodeEnd) and e.task_id:
                ends[e.task_id] = e
            if not isinstance(e, EdgeTransition) or e.source not in graph.nodes:
                continue
            spec = graph.nodes[e.source]
            end = ends.get(e.task_id or "")
            if end is None or end.goto is not None or e.target not in spec.destinations:
                continue
            static = set(graph.edges.get(e.source, ()))
            for b in graph.branches.get(e.source, ()):
                static.update(b.targets)
            if e.target in static:
                continue
            later = [ev for _, ev in leg.indexed() if ev.step == e.step
                     and isinstance(ev, CheckpointSaved)]
            nxt = [j for j, ev in leg.indexed() if j > i and isinstance(ev, NodeStart)
                   and ev.node == e.target]
            if nxt and not later:
                out.append(Violation("C7", i, f"{e.source} expanded into {e.target}, but no "
                                     "checkpoint was saved before the expansion's tasks ran"))
    return out


def check_c8(events: Sequence[EventBase], *, resumed_by_run_id: bool = True) -> list[Violation]:
    """C8: a resumed leg continues from the last checkpoint saved (resume by run id).

    Each leg after the first must name, in ``run_start.resumed_from``, the last checkpoint the
    earlier legs saved (with ``resumed_by_run_id=False``: any checkpoint they saved), and keep
    the run id.
    """
    out: list[Violation] = []
    saved: list[str] = []
    run_id: str | None = None
    for n, leg in enumerate(split_legs(events)):
        rs = leg.run_start
        if n > 0 and rs is not None:
            if rs.run_id != run_id:
                out.append(Violation("C8", leg.start, f"leg resumes run {rs.run_id}, not "
                                     f"{run_id}"))
            if rs.resumed_from is None:
                out.append(Violation("C8", leg.start, "a later leg of the run is not a resume "
                                     "(resumed_from is None)"))
            elif resumed_by_run_id and saved and rs.resumed_from != saved[-1]:
                out.append(Violation("C8", leg.start, f"resumed from {rs.resumed_from}, but the "
                                     f"last checkpoint saved was {saved[-1]}"))
            elif not resumed_by_run_id and rs.resumed_from not in saved:
                out.append(Violation("C8", leg.start, f"resumed from {rs.resumed_from}, which no "
                                     "earlier leg saved"))
        if rs is not None and run_id is None:
            run_id = rs.run_id
        saved += [e.checkpoint_id for e in leg.events if isinstance(e, CheckpointSaved)]
    return out


# --------------------------------------------------------------------------- C9


def check_c9(events: Sequence[EventBase], *, graph: CompiledGraph | None = None) -> list[Violation]:
    """C9: what a resume re-runs and what it replays.

    After a leg that halted by an interrupt or a failure, in the batch it resumes: a completed
    task of a ``write``/``external``/``human`` node is replayed (``replayed=True``, same patch);
    of a ``pure``/``read`` node, re-run (needs ``graph`` to know effect classes); the halting
    tasks re-run. After a timeout or a cancellation every completed task is replayed. A
    replayed ``node_end`` anywhere else is a violation, and so is a replayed patch that differs
    from the recorded one.
    """
    out: list[Violation] = []
    legs = split_legs(events)
    for prev, leg in itertools.pairwise(legs):
        end = prev.run_end
        rs = leg.run_start
        if end is None or rs is None or end.status == "completed":
            continue
        keep_all = end.status == "cancelled" or end.error_type == "RunTimedOut"
        step = end.step
        done = {e.task_id: e for e in prev.events
                if isinstance(e, NodeEnd) and e.step == step and e.task_id}
        halted = {e.task_id for e in prev.events
                  if _halting(e) and e.step == step and e.task_id}
        for i, e in leg.indexed():
            if not isinstance(e, NodeEnd) or e.task_id is None:
                continue
            if e.step != step:
                if e.replayed:
                    out.append(Violation("C9", i, f"{e.node} (task {e.task_id}) replayed in step "
                                         f"{e.step}, not the resumed batch (step {step})"))
                continue
            orig = done.get(e.task_id)
            if orig is None:
                if e.replayed:
                    what = "halted" if e.task_id in halted else "did not complete"
                    out.append(Violation("C9", i, f"{e.node} (task {e.task_id}) replayed, but "
                                         f"it {what} before the resume"))
                continue
            effect = None if graph is None or e.node not in graph.nodes else \
                graph.nodes[e.node].effect
            should = keep_all or (effect in REPLAYED_EFFECTS if effect else None)
            if should is True and not e.replayed:
                out.append(Violation("C9", i, f"{e.node} ({effect or 'kept'}; task {e.task_id}) "
                                     "completed before the resume but re-ran instead of replaying"))
            elif should is False and e.replayed:
                out.append(Violation("C9", i, f"{e.node} ({effect}; task {e.task_id}) was "
                                     "replayed; pure/read nodes re-run on resume"))
            if e.replayed and e.patch != orig.patch:
                out.append(Violation("C9", i, f"{e.node} (task {e.task_id}) replayed patch "
                                     f"{e.patch!r}, but it recorded {orig.patch!r}"))
    return out


# --------------------------------------------------------------------------- C10


def check_c10(events: Sequence[EventBase]) -> list[Violation]:
    """C10: ``seq`` strictly increases and ``time`` never decreases, across resumed legs too
    (when a leg resumes from the previous leg's last checkpoint)."""
    out: list[Violation] = []
    prev: EventBase | None = None
    last_cp: str | None = None
    for i, e in enumerate(events):
        if isinstance(e, RunStart) and prev is not None and e.resumed_from != last_cp:
            prev = None  # time travel: the log forks here
        if prev is not None:
            if e.seq <= prev.seq:
                out.append(Violation("C10", i, f"seq {e.seq} after seq {prev.seq}"))
            if e.time < prev.time:
                out.append(Violation("C10", i, f"time {e.time.isoformat()} after "
                                     f"{prev.time.isoformat()}"))
        elif isinstance(e, RunStart) and e.resumed_from is None and e.seq != 0:
            out.append(Violation("C10", i, f"a run's first seq is {e.seq}, not 0"))
        if isinstance(e, CheckpointSaved):
            last_cp = e.checkpoint_id
        prev = e
    return out


# --------------------------------------------------------------------------- all of them


def check_invariants(
    events: Iterable[Any],
    *,
    graph: CompiledGraph | None = None,
    store_log: Iterable[Any] | None = None,
    stream_raised: bool = False,
    resumed_by_run_id: bool = True,
) -> list[Violation]:
    """Every event invariant that can be checked from what is given, sorted by event index.

    Args:
        events: one run's events (its legs in order), as models, wire-form dicts or JSON.
        graph: the graph (declared order for C4, expansions for C7, effect classes for C9).
        store_log: a ``FaultyStore.calls`` log of the same run (C5: saves that returned;
            C6: rejected saves).
        stream_raised: the stream raised (C6, C7), so the last leg may lack ``run_end``.
        resumed_by_run_id: later legs were resumed by run id (C8, C10), not time travel.
    """
    evs = normalise_events(events)
    log = None if store_log is None else list(store_log)
    out = check_c1(evs, stream_raised=stream_raised)
    out += check_c2(evs)
    out += check_c3(evs)
    out += check_c4(evs, graph=graph)
    out += check_c5(evs, store_log=log)
    if log is not None:
        out += check_c6(evs, store_log=log, stream_raised=stream_raised)
    if graph is not None:
        out += check_c7(evs, graph=graph)
    out += check_c8(evs, resumed_by_run_id=resumed_by_run_id)
    out += check_c9(evs, graph=graph)
    out += check_c10(evs)
    return sorted(out, key=lambda v: (v.index is None, v.index or 0, v.rule))


def format_violations(
    violations: Sequence[Violation], events: Sequence[EventBase] | None = None, *,
    context: Mapping[str, Any] | None = None, window: int = 2,
) -> str:
    """A readable report: each violation, and the events around it when given."""
    lines = [f"{len(violations)} invariant violation(s):"]
    for k, v in (context or {}).items():
        lines.append(f"  {k}: {v}")
    for v in violations:
        lines.append(f"- {v}")
        if events is not None and v.index is not None:
            lo, hi = max(0, v.index - window), min(len(events), v.index + window + 1)
            for j in range(lo, hi):
                lines.append(f"    {'>' if j == v.index else ' '} #{j} {_short(events[j])}")
    return "\n".join(lines)


def _short(e: EventBase) -> str:
    data = e.model_dump(mode="json", exclude={"run_id", "time"})
    kind = data.pop("type", "?")
    keep = {k: v for k, v in data.items() if v not in (None, False, [], {})}
    return f"{kind} " + " ".join(f"{k}={v!r}" for k, v in keep.items())
