"""Halts: interrupts, failures, timeouts and cancellation, each saved before its events (C5).
"""

from __future__ import annotations

from typing import Any

from .._graph._builder import REPLAYED_EFFECTS
from .._records._checkpoint import TaskOutput
from .._records._events import (
    CheckpointSaved,
    ErrorEvent,
    Interrupt,
    RunEnd,
)
from ..errors import (
    Cancelled,
    GraphflowError,
    NodeFailed,
    RunTimedOut,
)
from ._runner_base import RunnerState
from ._task import Outcome

__all__ = ["HaltRunner"]


class HaltRunner(RunnerState):
    """The part of the run loop that ends a leg early and saves what a resume needs."""

    async def _complete(self) -> list[Any]:
        # Reached only when a run resumes onto an empty batch (e.g. from a final checkpoint).
        events = [self._e(RunEnd, max(self.step - 1, 0), status="completed",
                          state=self._copy(self.state))]
        await self._finish("completed", None)
        return self._stamp(events)

    async def _halt(
        self,
        outcomes: list[Outcome],
        halting: list[Outcome],
        batch_error: GraphflowError | None = None,
    ) -> list[Any]:
        """Interrupts and failures: save the resumable checkpoint, then the batch's events."""
        assert self.tasks is not None
        step = self.step
        events: list[Any] = []
        halting_ids = {id(o) for o in halting}
        completed: dict[str, TaskOutput] = {}
        for out in outcomes:
            if id(out) in halting_ids:
                continue
            self._task_events(out, step, events)
            if out.kind == "done":
                self._edges(out, step, events)
                if out.spec.effect in REPLAYED_EFFECTS:
                    completed[out.record.task_id] = self._output(out)
            elif out.kind == "error":
                events[-1].__dict__["routed_to"] = out.spec.on_error
        for out in halting:
            self._task_events(out, step, events)
        failures = [o for o in halting if o.kind == "error"]
        interrupts = [o.interrupt for o in halting if o.kind == "interrupt" and o.interrupt]
        error_info: dict[str, Any] | None = None
        if batch_error is not None:
            error: BaseException = batch_error
            node = getattr(batch_error, "node", None)
            events.append(self._e(ErrorEvent, step, node=node,
                                  error_type=type(batch_error).__name__,
                                  message=str(batch_error)))
            status = "failed"
            interrupts = []
        elif failures:
            first = failures[0]
            assert first.error is not None
            if first.user_error:
                error = NodeFailed(first.record.node, first.record.task_id, first.error)
                error.__cause__ = first.error
            else:
                error = first.error
            status = "failed"
            interrupts = []
        else:
            error = None  # type: ignore[assignment]
            status = "interrupted"
        if error is not None:
            error_info = {"error_type": type(error).__name__, "message": str(error),
                          "node": getattr(error, "node", None)}
        return await self._save_halt(events, status, error, error_info, interrupts, completed,
                                     node_ids=[t.node for t in self.tasks])

    async def _halt_stop(self, outcomes: list[Outcome], *, timed_out: bool) -> list[Any]:
        """Timeouts and cancellation: every task that finished keeps its result (C9)."""
        assert self.tasks is not None
        step = self.step
        events: list[Any] = []
        completed: dict[str, TaskOutput] = {}
        for out in outcomes:  # C4: the completed tasks first ...
            if out.kind == "done":
                self._task_events(out, step, events)
                self._edges(out, step, events)
                completed[out.record.task_id] = self._output(out, keep=True)
        for out in outcomes:  # ... then those that failed, interrupted or were stopped
            if out.kind != "done" and (out.started_at is not None or out.kind != "cancelled"):
                self._task_events(out, step, events)
        if timed_out:
            error: BaseException = RunTimedOut(self.run_id, self.timeout or 0.0)
            status = "failed"
        else:
            error = Cancelled(self.run_id)
            status = "cancelled"
        events.append(self._e(ErrorEvent, step, error_type=type(error).__name__,
                              message=str(error)))
        info = {"error_type": type(error).__name__, "message": str(error), "node": None}
        return await self._save_halt(events, status, error, info, [], completed,
                                     node_ids=[t.node for t in self.tasks])

    async def _fail_run(self, error: GraphflowError) -> list[Any]:
        """A run-level failure between supersteps (budgets, starved joins)."""
        assert self.tasks is not None
        events = [self._e(ErrorEvent, self.step, error_type=type(error).__name__,
                          message=str(error))]
        info = {"error_type": type(error).__name__, "message": str(error), "node": None}
        return await self._save_halt(events, "failed", error, info, [], {},
                                     node_ids=[t.node for t in self.tasks])

    async def _save_halt(
        self,
        events: list[Any],
        status: str,
        error: BaseException | None,
        error_info: dict[str, Any] | None,
        interrupts: list[Interrupt],
        completed: dict[str, TaskOutput],
        node_ids: list[str],
    ) -> list[Any]:
        assert self.tasks is not None
        step = self.step
        cid = self._next_cp_id()
        events.append(self._e(CheckpointSaved, step, checkpoint_id=cid))
        events.append(self._e(RunEnd, step, status=status, state=self._copy(self.state),
                              error_type=None if error is None else type(error).__name__))
        # C5: the checkpoint is saved before any event reporting the halt is yielded.
        await self._save(cid, step=step, next_step=step, tasks=list(self.tasks),
                         completed=completed, node_ids=node_ids, status=status,
                         interrupts=interrupts, error=error_info)
        self.interrupts = interrupts
        await self._finish(status, error)
        return self._stamp(events)
