"""What every part of the run loop shares: the run's state, ids, events and checkpoints.

:class:`RunnerState` holds a leg's state and the small pieces the phases share — ids, event
construction, the events of a finished task, saving a checkpoint, finishing the leg. The
phases themselves are in :mod:`._batch` (running a superstep's tasks), :mod:`._halts`
(interrupts, failures, timeouts, cancellation) and :mod:`._runner` (the loop).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any

import anyio
from pydantic import BaseModel

from .._graph._builder import CompiledGraph
from .._graph._node import Visited
from .._records._checkpoint import Checkpoint, TaskOutput, TaskRecord
from .._records._events import (
    CustomEvent,
    EdgeTransition,
    ErrorEvent,
    EventBase,
    Interrupt,
    InterruptEvent,
    NodeEnd,
    NodeStart,
)
from .._records._fast import adopt, make, template
from .._records._json import jcopy
from .._stores._protocol import CheckpointStore
from .._time._clock import Clock
from ..errors import SimulatedCrash
from ._task import Outcome

__all__ = ["RunnerState", "StepState"]


_EVENT_TEMPLATES: dict[type[EventBase], tuple[dict[str, Any], set[str]]] = {}


def _ev(cls: type[EventBase], **fields: Any) -> Any:
    """Build an event without validation (hot path); ``time`` is stamped when yielded."""
    found = _EVENT_TEMPLATES.get(cls)
    if found is None:
        static, every = template(cls)
        found = _EVENT_TEMPLATES[cls] = ({**static, "time": None}, every)
    data = found[0].copy()
    data.update(fields)
    return adopt(cls, data, found[1])


@contextlib.asynccontextmanager
async def _unwrapped() -> AsyncIterator[None]:
    """Let a lone exception out of a task group as itself, as a sync node's would be."""
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


class _Unrecorded:
    """Stands in for an event when a run's events are not wanted (``invoke``): the sequence
    numbers still advance, so checkpoints record the same ``next_seq`` either way."""

    __slots__ = ("__dict__",)


_UNRECORDED = _Unrecorded()


class StepState:
    """Marker the runner puts after a superstep's events for the ``values`` view (internal).

    It is not an event: the ``events`` view drops it.
    """

    __slots__ = ("checkpoint_id", "state", "step")

    def __init__(self, step: int, state: dict[str, Any], checkpoint_id: str | None) -> None:
        self.step = step
        self.state = state
        self.checkpoint_id = checkpoint_id


class RunnerState:
    """A leg's state and the helpers every phase of the run loop uses (internal)."""

    graph: CompiledGraph
    store: CheckpointStore
    clock: Clock
    seed: int | None
    run_id: str
    thread_id: str
    tenant_id: str | None
    state: dict[str, Any]
    model: BaseModel | None
    step: int
    tasks: list[TaskRecord] | None
    completed: dict[str, TaskOutput]
    answers: dict[str, Any]
    visited: Visited
    arrivals: dict[str, list[str]]
    seq: int
    parent_id: str | None
    resumed_from: str | None
    cp_counter: int
    task_counter: int
    max_supersteps: int | None
    timeout: float | None
    on_interrupt: Callable[[Interrupt], Any] | None
    _release: Callable[[], Awaitable[None]] | None
    _on_done: Callable[[], None] | None
    wall_clock: bool
    _hex: str
    started: bool
    done: bool
    status: str | None
    error: BaseException | None
    interrupts: list[Interrupt]
    checkpoint_id: str | None
    supersteps: int
    cancel_requested: bool
    _scope: anyio.CancelScope | None
    _deadline: float | None
    _deadline_ns: int | None
    started_at: datetime | None
    ended_at: datetime | None
    record: Any
    leg: Any
    _durable: bool
    record_events: bool
    _adopt: Callable[[dict[str, Any]], None] | None
    _batch: list[Outcome] | None
    thread_explicit: bool
    start_order: list[str]

    def _next_cp_id(self) -> str:
        self.cp_counter += 1
        return f"cp-{self._hex}-{self.cp_counter}"

    def _task(
        self,
        node: str,
        failure: dict[str, Any] | None = None,
        item: Any = None,
        has_item: bool = False,
        checkpoint_id_before: str | None = None,
    ) -> TaskRecord:
        self.task_counter += 1
        return make(TaskRecord, task_id=f"task-{self._hex}-{self.task_counter}", node=node,
                    item=item, has_item=has_item, checkpoint_id_before=checkpoint_id_before,
                    failure=failure)

    def _e(self, cls: type[EventBase], step: int, **fields: Any) -> Any:
        self.seq += 1
        if not self.record_events:
            return _UNRECORDED
        return _ev(cls, seq=self.seq - 1, run_id=self.run_id, step=step, **fields)

    def _copy(self, state: dict[str, Any]) -> dict[str, Any]:
        """Events carry copies: mutating one changes nothing in the run."""
        return jcopy(state) if self.record_events else state

    def _stamp(self, events: list[Any]) -> list[Any]:
        if not self.record_events:
            return [e for e in events if type(e) is StepState]
        now = self.clock.now()
        for ev in events:
            if type(ev) is not StepState:
                ev.__dict__["time"] = now
        return events

    def _task_events(self, out: Outcome, step: int, events: list[Any]) -> None:
        rec = out.record
        node, tid = rec.node, rec.task_id
        e = self._e
        events.append(e(NodeStart, step, node=node, task_id=tid))
        for n, (_s, _f, exc) in enumerate(out.failed_attempts, start=1):
            events.append(e(ErrorEvent, step, node=node, task_id=tid, error_type=type(exc).__name__,
                            message=str(exc), attempt=n, will_retry=True))
            events.append(e(NodeStart, step, node=node, task_id=tid, attempt=n + 1))
        for channel, value in out.custom:
            events.append(e(CustomEvent, step, node=node, task_id=tid, channel=channel,
                            value=value))
        kind = out.kind
        if kind == "done":
            patch = out.patch
            events.append(e(NodeEnd, step, node=node, task_id=tid,
                            patch=jcopy(patch) if patch and self.record_events else patch,
                            replayed=out.replayed, attempt=out.attempt,
                            started_at=out.started_at, finished_at=out.finished_at,
                            goto=out.goto))
        elif kind == "interrupt":
            assert out.interrupt is not None
            pending = out.interrupt
            events.append(e(InterruptEvent, step, node=node, task_id=tid, interrupts=[
                pending.model_copy(update={"payload": jcopy(pending.payload)})]))
        elif kind == "error":
            err = out.error
            events.append(e(ErrorEvent, step, node=node, task_id=tid,
                            error_type=type(err).__name__, message=str(err),
                            attempt=out.attempt, routed_to=out.routed_to))
        else:  # cancelled
            events.append(e(ErrorEvent, step, node=node, task_id=tid, error_type="Cancelled",
                            message=f"task {tid} was cancelled", attempt=out.attempt))

    def _edges(self, out: Outcome, step: int, events: list[Any]) -> None:
        """Edge events of a completed task in a halted batch (its routes, expansion, joins)."""
        node = out.record.node
        tid = out.record.task_id
        for target in out.targets:
            events.append(self._e(EdgeTransition, step, node=node, task_id=tid,
                                  source=node, target=target))
        if out.expand is not None:
            events.append(self._e(EdgeTransition, step, node=node, task_id=tid, source=node,
                                  target=out.expand["node"]))
        elif out.goto is None:
            for join in self.graph.joins_from.get(node, ()):
                events.append(self._e(EdgeTransition, step, node=node, task_id=tid,
                                      source=node, target=join.target))

    def _output(self, out: Outcome, keep: bool = False) -> TaskOutput:
        return make(TaskOutput,
            task_id=out.record.task_id, node=out.record.node, patch=out.patch, goto=out.goto,
            expand=out.expand, keep=keep, started_at=out.started_at,
            finished_at=out.finished_at,
        )

    async def _finish(self, status: str, error: BaseException | None) -> None:
        self.done = True
        self.status = status
        if error is not None and self.error is None:
            self.error = error
        self.ended_at = self.clock.now()
        record = self.record
        if record is not None:
            record.status = status
            record.updated_at = self.ended_at
            if self.error is not None:
                record.error = {"error_type": type(self.error).__name__,
                                "message": str(self.error)}
        on_done, self._on_done = self._on_done, None
        if on_done is not None:
            on_done()
        release, self._release = self._release, None
        if release is not None:
            with anyio.CancelScope(shield=True):
                # A store that fails here keeps the claim; it expires on its own. A simulated
                # process death still propagates: the caller must not see a clean end.
                try:
                    await release()
                except SimulatedCrash:
                    raise
                except Exception:
                    pass

    async def _save(
        self,
        cid: str,
        *,
        step: int,
        next_step: int,
        tasks: list[TaskRecord],
        node_ids: list[str],
        status: str,
        completed: dict[str, TaskOutput] | None = None,
        interrupts: list[Interrupt] | None = None,
        error: dict[str, Any] | None = None,
        state: dict[str, Any] | None = None,
        visited: Visited | tuple[str, ...] | None = None,
        arrivals: dict[str, list[str]] | None = None,
    ) -> None:
        fields = {
            "id": cid, "run_id": self.run_id, "thread_id": self.thread_id,
            "graph_id": self.graph.graph_id, "revision": self.graph.revision,
            "node_id": node_ids[-1] if node_ids else None, "node_ids": node_ids, "step": step,
            "parent_id": self.parent_id, "timestamp": self.clock.now(),
            "state": self.state if state is None else state, "format_version": 1,
            "status": status, "next_step": next_step, "tasks": tasks,
            "completed": {} if completed is None else completed,
            "interrupts": [] if interrupts is None else interrupts,
            "answers": jcopy(self.answers) if self.answers else {},
            "visited": self.visited if visited is None else visited,
            "arrivals": self.arrivals if arrivals is None else arrivals,
            "next_seq": self.seq, "error": error, "tenant_id": self.tenant_id,
            "metadata": {"cp_counter": self.cp_counter, "task_counter": self.task_counter},
        }
        if self._adopt is not None:
            # The in-memory store keeps the fields and builds the model when it is read;
            # the visited nodes stay a lazy snapshot until then.
            self._adopt(fields)
        else:
            vis = fields["visited"]
            if not isinstance(vis, tuple):
                fields["visited"] = vis.as_tuple()
            await self.store.save(make(Checkpoint, **fields))
        self.parent_id = cid
        self.checkpoint_id = cid
