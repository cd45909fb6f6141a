"""Checkers for the shape and order of a run's events: C1 (one start, one end), C2 (each
task's start and result), C3 (edges between results and starts), C4 (batches in declared order).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from ..._graph._builder import CompiledGraph
from ..._records._events import (
    CheckpointSaved,
    EdgeTransition,
    ErrorEvent,
    EventBase,
    InterruptEvent,
    InterruptExpired,
    NodeEnd,
    NodeStart,
    RunEnd,
    RunStart,
)
from ._legs import Leg, Violation, split_legs

__all__ = ["check_c1", "check_c2", "check_c3", "check_c4"]

_RESULTS: frozenset[type] = frozenset((NodeEnd, InterruptEvent))
"""Event types that are always a task's result (an ``error`` is one when final:
:func:`._legs.terminal`, tested inline here: a call per event otherwise)."""

_UNTASKED_C2: frozenset[type] = frozenset((CheckpointSaved, RunEnd, RunStart, InterruptExpired))
"""Event types C2 leaves out even when they carry a task id."""

_UNTASKED_C4: frozenset[type] = frozenset((CheckpointSaved, RunEnd, InterruptExpired))
"""Event types that belong to no task's block in C4."""


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
        ends = [i for i, e in leg.indexed() if type(e) is RunEnd]
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
        e: Any  # (narrowed by ``t``, its type, which mypy does not follow)
        for i, e in enumerate(leg.events, leg.start):
            tid = e.task_id
            t = type(e)
            if tid is None or t in _UNTASKED_C2:
                continue
            s = state[tid] if tid in state else "idle"  # noqa: SIM401 (no call an event)
            if t is NodeStart:
                if s == "running":
                    out.append(Violation("C2", i, f"task {tid} ({e.node}) started again "
                                         "before reporting a result"))
                elif s == "done":
                    out.append(Violation("C2", i, f"task {tid} ({e.node}) started again after "
                                         "its result in the same leg"))
                state[tid], where[tid] = "running", i
            elif t is ErrorEvent and e.will_retry:
                if s != "running":
                    out.append(Violation("C2", i, f"retry error of task {tid} ({e.node}) "
                                         "without a running attempt"))
                state[tid] = "retrying"
                if tid not in where:  # (a retry error without a node_start: C2 above)
                    where[tid] = i
            elif t in _RESULTS or (t is ErrorEvent and tid is not None and not e.will_retry):
                if s == "idle":
                    out.append(Violation("C2", i, f"{e.type} of task {tid} ({e.node}) without "
                                         "a node_start"))
                elif s == "retrying":
                    out.append(Violation("C2", i, f"{e.type} of task {tid} ({e.node}) after a "
                                         "retry error, without the next attempt's node_start"))
                elif s == "done":
                    out.append(Violation("C2", i, f"a second result ({e.type}) for task {tid} "
                                         f"({e.node})"))
                state[tid] = "done"
            elif t is not EdgeTransition and s != "running":
                out.append(Violation("C2", i, f"{e.type} of task {tid} ({e.node}) outside its "
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
        first_step = next((e.step for e in leg.events if type(e) is NodeStart), None)
        e: Any  # (narrowed by ``t``, its type, which mypy does not follow)
        for i, e in enumerate(leg.events, leg.start):
            t = type(e)
            if t in _RESULTS or (t is ErrorEvent and (
                    (e.task_id is not None and not e.will_retry) or e.routed_to is not None)):
                assert e.task_id is not None
                results[e.task_id] = (i, e.node or "", e)
            if t is EdgeTransition:
                src = results.get(e.task_id or "")
                if src is None:
                    out.append(Violation("C3", i, f"edge {e.source} -> {e.target} (task "
                                         f"{e.task_id}) before its source's result"))
                elif src[1] != e.source:
                    out.append(Violation("C3", i, f"edge {e.source} -> {e.target} names task "
                                         f"{e.task_id}, which is node {src[1]!r}"))
                elif type(src[2]) is InterruptEvent or (
                    type(src[2]) is ErrorEvent and src[2].routed_to is None
                ):
                    out.append(Violation("C3", i, f"edge {e.source} -> {e.target} after "
                                         f"{e.source} halted ({src[2].type})"))
                pending.setdefault(e.target, []).append(e.step)
            elif t is NodeStart and e.attempt == 1:
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


def _blocks(leg: Leg) -> list[tuple[int, int, str, bool, str]]:
    """Contiguous runs of one task's events: ``(first index, step, task_id, halted, node)``
    (``task_id`` ``""`` for an event of no task; ``halted``: a halting event is in the run;
    ``node``: the first node the run names)."""
    blocks: list[tuple[int, int, str, bool, str]] = []
    first = step = 0
    tid: str | None = None  # the open run's task ("": an event of no task); None: none yet
    halted = False
    node = ""
    e: Any  # (narrowed by ``t``, its type, which mypy does not follow)
    for i, e in enumerate(leg.events, leg.start):
        t = type(e)
        etid = e.task_id
        if etid is None or t in _UNTASKED_C4:
            if tid is not None:
                blocks.append((first, step, tid, halted, node))
            blocks.append((i, e.step, "", False, ""))
            tid = None
            continue
        if tid != etid:  # a new run begins (``etid`` is a task's: never None here)
            if tid is not None:
                blocks.append((first, step, tid, halted, node))
            first, step, tid, halted, node = i, e.step, etid, False, ""
        if not node and e.node:
            node = e.node
        if not halted and (t is InterruptEvent or (
                t is ErrorEvent and not e.will_retry and e.routed_to is None)):
            halted = True  # (halting(e): the task id is set here)
    if tid is not None:
        blocks.append((first, step, tid, halted, node))
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
        first_start: dict[int, int] = {}
        e: Any  # (narrowed by ``t``, its type, which mypy does not follow)
        for i, e in enumerate(leg.events, leg.start):
            t = type(e)
            if t is NodeEnd:
                s = e.step
                if s in finished:
                    prev = finished[s]
                    finished[s] = e.finished_at if prev is None else max(prev, e.finished_at)
                else:
                    finished[s] = e.finished_at
            elif t is NodeStart and e.step not in first_start:
                first_start[e.step] = i
        if finished and first_start:
            for i, e in enumerate(leg.events, leg.start):
                s = e.step
                if s in finished and s in first_start and i >= first_start[s]:
                    latest = finished[s]
                    if latest is not None and e.time < latest:
                        out.append(Violation("C4", i, f"{e.type} of step {e.step} yielded at "
                                             f"{e.time.isoformat()}, before a task of the step "
                                             f"finished ({latest.isoformat()})"))
                        break
        by_step: dict[int, list[tuple[int, str, str, bool]]] = {}
        for first, step, tid, halted, node in _blocks(leg):
            if not tid:
                continue
            if tid in seen:
                out.append(Violation("C4", first, f"events of task {tid} are interleaved with "
                                     f"another task's (its block began at #{seen[tid]})"))
                continue
            seen[tid] = first
            if step in by_step:
                by_step[step].append((first, tid, node, halted))
            else:
                by_step[step] = [(first, tid, node, halted)]
        for step, tasks in by_step.items():
            seen_halt: str | None = None
            for first, tid, node, halted in tasks:
                if halted:
                    seen_halt = seen_halt or node
                elif seen_halt is not None:
                    out.append(Violation("C4", first, f"step {step}: {node} (task {tid}) "
                                         f"completed but comes after halting node {seen_halt}"))
            if order is None or len(tasks) < 2:
                continue
            for group in (False, True):
                idx = [(first, node) for first, _, node, h in tasks if h is group]
                for (_, a), (f2, b) in itertools.pairwise(idx):
                    if a in order and b in order and order[b] < order[a]:
                        out.append(Violation("C4", f2, f"step {step}: {b} comes after {a}, "
                                             "against declared order"))
    return out


