"""Halts: interrupts, failures, timeouts and cancellation, each saved before its events (C5).
"""

from __future__ import annotations

from typing import Any

from .._graph._builder import REPLAYED_EFFECTS
from .._records._checkpoint import TaskOutput
from .._records._events import (
    Breakpoint,
    CheckpointSaved,
    ErrorEvent,
    Interrupt,
    RunEnd,
    error_message,
)
from ..errors import (
    Cancelled,
    GraphflowError,
    NodeFailed,
    RunTimedOut,
)
from ._outcome import Outcome
from ._report import edge_events, task_event_count, task_events, task_output
from ._run_state import LegStatus, RunState
from ._writer import CheckpointWriter, LegEnd, attach_run_error

__all__ = ["HaltHandler", "pause_one"]


class HaltHandler:
    """Ends a leg early and saves what a resume needs, before the events that report it."""

    def __init__(self, run: RunState, writer: CheckpointWriter, end: LegEnd) -> None:
        self.run = run
        self.writer = writer
        self.end = end

    async def complete(self) -> list[Any]:
        """End a leg that resumed onto an empty batch (e.g. from a final checkpoint)."""
        run = self.run
        pos = run.pos
        events = [run.numbers.event(RunEnd, max(pos.step - 1, 0), status="completed",
                                    state=run.copy_state(pos.state))]
        await self.end.finish("completed", None)
        return run.stamp(events)

    async def halt(
        self,
        outcomes: list[Outcome],
        halting: list[Outcome],
        batch_error: GraphflowError | None = None,
    ) -> list[Any]:
        """Interrupts and failures: save the resumable checkpoint, then the batch's events."""
        run = self.run
        step = run.pos.step
        events: list[Any] = []
        halting_ids = {id(o) for o in halting}
        completed: dict[str, TaskOutput] = {}
        # A hook that threw (seed 004: "recover re-runs only that task"): every task that
        # finished keeps its result, whatever its effect class, as after a timeout.
        keep = any(o.fatal for o in halting)
        for out in outcomes:
            if id(out) in halting_ids:
                continue
            task_events(run, out, step, events)
            if out.kind == "done":
                edge_events(run, out, step, events)
                if keep or out.spec.effect in REPLAYED_EFFECTS:
                    completed[out.record.task_id] = task_output(out, keep=keep)
            elif out.kind == "error":
                events[-1].__dict__["routed_to"] = out.spec.on_error
        for out in halting:
            task_events(run, out, step, events)
        failures = [o for o in halting if o.kind == "error"]
        interrupts = [i for o in halting if o.kind == "interrupt" and o.interrupt
                      for i in (o.interrupt, *o.more)]
        error: BaseException | None
        breakpoint: Breakpoint | None = None
        status: LegStatus
        if batch_error is not None:
            error = batch_error
            node = getattr(batch_error, "node", None)
            events.append(run.numbers.event(ErrorEvent, step, node=node,
                                    error_type=type(batch_error).__name__,
                                    message=error_message(batch_error)))
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
            error = None
            status = "interrupted"
            paused = [o.breakpoint for o in halting if o.breakpoint is not None]
            if paused and not interrupts:  # only subgraph children paused at breakpoints
                breakpoint = Breakpoint(when=paused[0].when, nodes=[
                    n for bp in paused for n in bp.nodes])
        error_info: dict[str, Any] | None = None
        if error is not None:
            error_info = {"error_type": type(error).__name__, "message": error_message(error),
                          "node": getattr(error, "node", None)}
        return await self._save_halt(events, status, error, error_info, interrupts, completed,
                                     breakpoint)

    async def stop(self, outcomes: list[Outcome], *, timed_out: bool) -> list[Any]:
        """Timeouts and cancellation: every task that finished keeps its result (C9)."""
        run = self.run
        step = run.pos.step
        events: list[Any] = []
        # What the leg resumed with stays (a cancelled step reports no outcome at all).
        completed: dict[str, TaskOutput] = dict(run.pos.completed)
        for out in outcomes:  # C4: the completed tasks first ...
            if out.kind == "done":
                task_events(run, out, step, events)
                edge_events(run, out, step, events)
                completed[out.record.task_id] = task_output(out, keep=True)
        for out in outcomes:  # ... then those that failed, interrupted or were stopped
            if out.kind != "done" and (out.started_at is not None or out.kind != "cancelled"):
                task_events(run, out, step, events)
        error: BaseException
        status: LegStatus
        if timed_out:
            error = RunTimedOut(run.run_id, run.spec.timeout or 0.0)
            status = "failed"
        else:
            error = Cancelled(run.run_id)
            status = "cancelled"
        events.append(run.numbers.event(ErrorEvent, step, error_type=type(error).__name__,
                                        message=error_message(error)))
        info = {"error_type": type(error).__name__, "message": error_message(error), "node": None}
        return await self._save_halt(events, status, error, info, [], completed)

    async def pause_before(self, stopping: list[str]) -> list[Any]:
        """Pause before the current batch runs: a breakpoint before ``stopping`` nodes."""
        pos = self.run.pos
        pos.passed.update(t.task_id for t in pos.tasks if t.node in stopping)
        return await self._save_halt([], "interrupted", None, None, [], dict(pos.completed),
                                     Breakpoint(when="before", nodes=stopping))

    async def fail_run(self, error: GraphflowError) -> list[Any]:
        """A run-level failure between supersteps (budgets, starved joins)."""
        run = self.run
        events = [run.numbers.event(ErrorEvent, run.pos.step, error_type=type(error).__name__,
                                    message=error_message(error))]
        info = {"error_type": type(error).__name__, "message": error_message(error), "node": None}
        return await self._save_halt(events, "failed", error, info, [], {})

    async def _save_halt(
        self,
        events: list[Any],
        status: LegStatus,
        error: BaseException | None,
        error_info: dict[str, Any] | None,
        interrupts: list[Interrupt],
        completed: dict[str, TaskOutput],
        breakpoint: Breakpoint | None = None,
    ) -> list[Any]:
        run = self.run
        pos, numbers = run.pos, run.numbers
        step = pos.step
        tasks = pos.tasks
        cid = numbers.next_checkpoint_id()
        events.append(numbers.event(CheckpointSaved, step, checkpoint_id=cid))
        events.append(numbers.event(
            RunEnd, step, status=status, state=run.copy_state(pos.state),
            error_type=None if error is None else type(error).__name__, breakpoint=breakpoint))
        # C5: the checkpoint is saved before any event reporting the halt is yielded.
        try:
            await self.writer.save(cid, step=step, next_step=step, tasks=list(tasks),
                                   completed=completed, node_ids=[t.node for t in tasks],
                                   status=status, interrupts=interrupts, error=error_info)
        except Exception as exc:
            attach_run_error(exc, error)  # the store's error is raised; the failure is kept
            raise
        await self.end.finish(status, error, interrupts=interrupts, breakpoint=breakpoint)
        return run.stamp(events)


async def pause_one(run: RunState, writer: CheckpointWriter, end: LegEnd, out: Outcome
                    ) -> list[Any]:
    """What :meth:`HaltHandler.halt` does for a batch of one task that asked (``out``, its
    ``interrupt`` set) when the leg builds no event (``invoke``), or only the unbuilt
    ``LazyEvent`` entries of its recording (``invoke`` on the testing runtime): the task's
    events (as ``task_events`` makes or numbers them), ``checkpoint_saved`` and ``run_end``,
    and the same checkpoint saved before the leg ends (C5)."""
    pos, numbers = run.pos, run.numbers
    step = pos.step
    tasks = pos.tasks
    assert out.interrupt is not None
    interrupts = [out.interrupt, *out.more] if out.more else [out.interrupt]
    events: list[Any] = []
    recording = numbers.record_events
    if recording:  # the events halt() reports, unbuilt (a recording leg's, see _lazy)
        task_events(run, out, step, events)
        cid = numbers.next_checkpoint_id()
        events.append(numbers.event(CheckpointSaved, step, checkpoint_id=cid))
        events.append(numbers.event(RunEnd, step, status="interrupted",
                                    state=run.copy_state(pos.state), error_type=None,
                                    breakpoint=None))
    else:
        # the task's events (node_start, interrupt and what it emitted or retried), then
        # checkpoint_saved and run_end
        numbers.skip((task_event_count(out) if out.failed_attempts or out.custom else 2) + 2)
        cid = numbers.next_checkpoint_id()
    nodes: list[str] = []
    for task in tasks:
        nodes += (task.node,)  # (not a comprehension: no call)
    await writer.save(cid, step=step, next_step=step, tasks=list(tasks), completed={},
                      node_ids=nodes, status="interrupted",
                      interrupts=interrupts, error=None)
    await end.finish("interrupted", None, interrupts=interrupts)
    return run.stamp(events) if recording else events
