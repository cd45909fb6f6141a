"""Writing a leg's checkpoints, and ending the leg (its status, claim and patches)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from .._graph._node import Visited
from .._records._checkpoint import Checkpoint, TaskOutput, TaskRecord
from .._records._events import Interrupt
from .._records._fast import make
from .._records._json import jcopy
from .._stores._memory import InMemoryCheckpointStore
from ..errors import SimulatedCrash
from ._run_state import RunState

__all__ = ["CheckpointWriter", "LegEnd"]


class CheckpointWriter:
    """Saves a leg's checkpoints to its store; the run's position comes from its state."""

    def __init__(self, run: RunState) -> None:
        self.run = run
        store = run.store
        # The in-memory store keeps the fields and builds the model when it is read.
        self._adopt = store._adopt_fields if type(store) is InMemoryCheckpointStore else None

    async def save(
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
        """Save checkpoint ``cid``; the leg's state fills in what is not given."""
        run = self.run
        fields = {
            "id": cid, "run_id": run.run_id, "thread_id": run.thread_id,
            "graph_id": run.graph.graph_id, "revision": run.graph.revision,
            "node_id": node_ids[-1] if node_ids else None, "node_ids": node_ids, "step": step,
            "parent_id": run.parent_id, "timestamp": run.clock.now(),
            "state": run.state if state is None else state, "format_version": 1,
            "status": status, "next_step": next_step, "tasks": tasks,
            "completed": {} if completed is None else completed,
            "interrupts": [] if interrupts is None else interrupts,
            "answers": jcopy(run.answers) if run.answers else {},
            "visited": run.visited if visited is None else visited,
            "arrivals": run.arrivals if arrivals is None else arrivals,
            "next_seq": run.seq, "error": error, "tenant_id": run.tenant_id,
            "metadata": {"cp_counter": run.cp_counter, "task_counter": run.task_counter},
        }
        if run.passed:
            # Tasks that passed their before-breakpoint do not pause again on a resume.
            passed = sorted(t.task_id for t in tasks if t.task_id in run.passed)
            if passed:
                fields["metadata"]["breakpoint_passed"] = passed
        if self._adopt is not None:
            # The visited nodes stay a lazy snapshot until the checkpoint is read.
            self._adopt(fields)
        else:
            vis = fields["visited"]
            if not isinstance(vis, tuple):
                fields["visited"] = vis.as_tuple()
            await run.store.save(make(Checkpoint, **fields))
        run.parent_id = cid
        run.checkpoint_id = cid


class LegEnd:
    """Ends a leg: records its status, undoes its patches and releases the thread's claim."""

    def __init__(
        self,
        run: RunState,
        release: Callable[[], Awaitable[None]] | None,
        on_done: Callable[[], None] | None,
    ) -> None:
        self.run = run
        self._release = release
        self._on_done = on_done

    async def finish(self, status: str, error: BaseException | None) -> None:
        """The leg ended with ``status`` (and ``error``, the first one wins)."""
        run = self.run
        run.done = True
        run.status = status
        if error is not None and run.error is None:
            run.error = error
        run.ended_at = run.clock.now()
        record = run.record
        if record is not None:
            record.status = status
            record.updated_at = run.ended_at
            if run.error is not None:
                record.error = {"error_type": type(run.error).__name__,
                                "message": str(run.error)}
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

    def abandon(self) -> None:
        """Synchronous last resort (a stream left without closing it, then collected): undo
        process-wide patches and release the thread's claim where that needs no event loop
        (in-memory and SQLite stores); the run stays resumable from its last checkpoint."""
        run = self.run
        if not run.done:
            run.done = True
            run.status = "cancelled"
            if run.record is not None:
                run.record.status = "cancelled"
        on_done, self._on_done = self._on_done, None
        if on_done is not None:
            on_done()
        release, self._release = self._release, None
        if release is not None:
            coro: Any = release()
            try:
                coro.send(None)
            except StopIteration:
                pass
            except BaseException:
                pass
            else:  # it needs the loop: give up, the claim expires after its ttl
                coro.close()
