"""How a task's outcome reads as events: its start, attempts, custom values, end and edges."""

from __future__ import annotations

from typing import Any

from .._graph._tools import ToolCallRecord
from .._records._checkpoint import TaskOutput
from .._records._events import (
    CustomEvent,
    EdgeTransition,
    ErrorEvent,
    Interrupt,
    InterruptEvent,
    NodeEnd,
    NodeStart,
    ToolCallEvent,
    error_message,
)
from .._records._fast import adopt, make
from .._records._json import jcopy
from ._outcome import Outcome
from ._run_state import RunState

__all__ = ["edge_events", "interrupt_copy", "task_event_count", "task_events", "task_output"]


def task_events(run: RunState, out: Outcome, step: int, events: list[Any]) -> None:
    """Append the events of one task (C2: ``node_start``, then its result)."""
    rec = out.record
    node, tid = rec.node, rec.task_id
    e = run.numbers.event
    events.append(e(NodeStart, step, node=node, task_id=tid))
    for n, (_s, _f, exc) in enumerate(out.failed_attempts, start=1):
        events.append(e(ErrorEvent, step, node=node, task_id=tid, error_type=type(exc).__name__,
                        message=error_message(exc), attempt=n, will_retry=True))
        events.append(e(NodeStart, step, node=node, task_id=tid, attempt=n + 1))
    for channel, value in out.custom:
        if type(value) is ToolCallRecord:
            events.append(e(ToolCallEvent, step, node=node, task_id=tid, tool=value.tool,
                            key=value.key, effect=value.effect, args=value.args,
                            value=value.value, update=value.update, attempts=value.attempts,
                            replayed=value.replayed, outcome=value.outcome,
                            error=value.error, started_at=value.started_at,
                            finished_at=value.finished_at))
            continue
        events.append(e(CustomEvent, step, node=node, task_id=tid, channel=channel,
                        value=value))
    kind = out.kind
    if kind == "done":
        patch = out.patch
        events.append(e(NodeEnd, step, node=node, task_id=tid,
                        patch=jcopy(patch) if patch and run.spec.record_events else patch,
                        replayed=out.replayed, attempt=out.attempt,
                        started_at=out.started_at, finished_at=out.finished_at,
                        goto=out.goto))
    elif kind == "interrupt":
        if not run.numbers.record_events:  # invoke(): numbered, not built
            events.append(e(InterruptEvent, step))
            return
        # A subgraph node may surface several child interrupts, or none (a child breakpoint).
        asked = [] if out.interrupt is None else [out.interrupt, *out.more]
        events.append(e(InterruptEvent, step, node=node, task_id=tid,
                        interrupts=[interrupt_copy(pending) for pending in asked]))
    elif kind == "error":
        err = out.error
        events.append(e(ErrorEvent, step, node=node, task_id=tid,
                        error_type=type(err).__name__, message=error_message(err),
                        attempt=out.attempt, routed_to=out.routed_to))
    else:  # cancelled
        events.append(e(ErrorEvent, step, node=node, task_id=tid, error_type="Cancelled",
                        message=f"task {tid} was cancelled", attempt=out.attempt))


def interrupt_copy(pending: Interrupt) -> Interrupt:
    """The interrupt an ``interrupt`` event carries: ``pending`` with a copy of its payload
    (what ``pending.model_copy(update={"payload": jcopy(pending.payload)})`` gives: the
    same fields, ``payload`` among those set), built without pydantic's copy (a dozen calls
    an interrupt; a subclass, or one with extra or private attributes, takes that way)."""
    if type(pending) is not Interrupt or pending.__pydantic_extra__ is not None \
            or pending.__pydantic_private__ is not None:
        return pending.model_copy(update={"payload": jcopy(pending.payload)})
    data = pending.__dict__.copy()
    payload = data["payload"]
    if payload is not None and type(payload) is not str:
        data["payload"] = jcopy(payload)
    return adopt(Interrupt, data, pending.__pydantic_fields_set__ | {"payload"})


def task_event_count(out: Outcome) -> int:
    """How many events :func:`task_events` appends for ``out`` (``invoke`` builds none, but
    numbers the events the same way)."""
    return 2 + 2 * len(out.failed_attempts) + len(out.custom)


def edge_events(run: RunState, out: Outcome, step: int, events: list[Any]) -> None:
    """Edge events of a completed task in a halted batch (its routes, expansion, joins)."""
    node = out.record.node
    tid = out.record.task_id
    e = run.numbers.event
    for target in out.targets:
        events.append(e(EdgeTransition, step, node=node, task_id=tid, source=node,
                        target=target))
    if out.expand is not None:
        events.append(e(EdgeTransition, step, node=node, task_id=tid, source=node,
                        target=out.expand["node"]))
    if out.goto is None and (out.expand is None or out.route_expand):
        for join in run.spec.graph.joins_from.get(node, ()):
            events.append(e(EdgeTransition, step, node=node, task_id=tid, source=node,
                            target=join.target))


def task_output(out: Outcome, keep: bool = False) -> TaskOutput:
    """What a checkpoint keeps of a completed task, to replay it on resume (C9)."""
    return make(TaskOutput,
        task_id=out.record.task_id, node=out.record.node, patch=out.patch, goto=out.goto,
        expand=None if out.route_expand else out.expand, keep=keep, started_at=out.started_at,
        finished_at=out.finished_at,
    )
