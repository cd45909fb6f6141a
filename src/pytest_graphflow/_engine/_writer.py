"""Writing a leg's checkpoints, and ending the leg (its status, claim and patches)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from .._graph._node import Visited
from .._graph._subgraph import Subgraph
from .._records._checkpoint import Checkpoint, TaskOutput, TaskRecord
from .._records._events import Breakpoint, Interrupt, error_message
from .._records._fast import make
from .._records._json import jcopy, to_json_value
from .._time._shield import shielded
from ..errors import SimulatedCrash
from ._run_state import LegOutcome, LegStatus, RunState, leg_outcome

__all__ = ["CheckpointWriter", "LegEnd"]


def attach_run_error(store_error: BaseException, run_error: BaseException | None) -> None:
    """Keep the run's own failure on the store error that refused its checkpoint (seed 000:
    the store's error is raised; seed 004: ``runError`` is the run's own failure)."""
    if run_error is None or run_error is store_error:
        return
    with contextlib.suppress(AttributeError):  # an exception type with __slots__
        store_error.run_error = run_error  # type: ignore[attr-defined]


class CheckpointWriter:
    """Saves a leg's checkpoints to its store; the run's position comes from its state.

    Every save carries the leg's claim (its fencing token) on a store that checks it. On a
    durable store with ``commit`` (SQLite), the piece's checkpoints are held in
    ``run.progress.pending`` and the runner commits them with the piece's events and run
    record in one transaction (:meth:`Runner._persist`).
    """

    def __init__(self, run: RunState) -> None:
        self.run = run
        spec = run.spec
        store: Any = spec.store
        claim = spec.claim
        # claim.fence, read without the property's call
        self.fence = (claim.thread_id, claim.token) if claim is not None and claim.fenced \
            and claim.token is not None else None
        """The leg's claim as ``(thread_id, token)`` on a store that checks it."""
        features = spec.features
        # A store with the fast save (the in-memory store, and a FaultyStore over one while
        # no rule is set) keeps the fields and builds the model when it is read;
        # ``adopt_fields`` says if it took them.
        self.adopt: Callable[..., bool] | None = (
            store.adopt_fields if features.fields_save else None)
        """The store's fast save (``adopt_fields(fields, fence)``), if it has one."""
        # SQLite writes a path from the run's log itself (``StoreFeatures.visited_snapshots``,
        # declared by that class alone: a subclass may read ``visited``).
        self._snapshots = features.visited_snapshots
        # A leg that travelled in time (or branches off an earlier checkpoint) may record
        # subgraph threads or a branch mark: its checkpoints always take the full path.
        self.plain_leg = not (spec.time_travel or spec.branch)
        """Not a leg that travelled in time or branches off an earlier checkpoint."""

    async def save(
        self,
        cid: str,
        *,
        step: int,
        next_step: int,
        tasks: list[TaskRecord],
        node_ids: list[str],
        status: str,
        node_id: str | None = None,
        completed: dict[str, TaskOutput] | None = None,
        interrupts: list[Interrupt] | None = None,
        error: dict[str, Any] | None = None,
        state: dict[str, Any] | None = None,
        visited: Visited | tuple[str, ...] | None = None,
        arrivals: dict[str, list[str]] | None = None,
    ) -> None:
        """Save checkpoint ``cid``; the leg's state fills in what is not given. ``node_id``
        labels a per-node checkpoint (by default, the last of ``node_ids``)."""
        run = self.run
        spec, pos, numbers = run.spec, run.pos, run.numbers
        graph = spec.graph
        fields = {
            "id": cid, "run_id": spec.run_id, "thread_id": spec.thread_id,
            "graph_id": graph.graph_id, "revision": graph.revision,
            "node_id": node_id if node_id is not None else node_ids[-1] if node_ids else None,
            "node_ids": node_ids, "step": step,
            "parent_id": numbers.parent_id, "timestamp": spec.clock.now(),
            "state": pos.state if state is None else state, "format_version": 1,
            "status": status, "next_step": next_step, "tasks": tasks,
            "completed": {} if completed is None else completed,
            "interrupts": [] if interrupts is None else interrupts,
            "answers": jcopy(run.answers) if run.answers else {},
            "visited": pos.visited if visited is None else visited,
            "arrivals": pos.arrivals if arrivals is None else arrivals,
            "next_seq": numbers.seq, "error": error, "tenant_id": spec.tenant_id,
            "metadata": {"cp_counter": numbers.cp_counter,
                         "task_counter": numbers.task_counter},
        }
        if run.tool_calls:
            # The recorded tool calls of the tasks a resume from here may run again.
            pending = {t.task_id for t in tasks}
            calls = {k: v for k, v in run.tool_calls.items()
                     if k.rpartition(":")[0] in pending}
            if calls:
                fields["metadata"]["tool_calls"] = jcopy(calls)
        if pos.passed:
            # Tasks that passed their before-breakpoint do not pause again on a resume.
            passed = sorted(t.task_id for t in tasks if t.task_id in pos.passed)
            if passed:
                fields["metadata"]["breakpoint_passed"] = passed
        if run.child_threads or spec.time_travel:
            # A resume finds the child run of each pending subgraph task (see _subgraph); in
            # a leg that travelled back in time, "" marks a task whose child must be fresh.
            threads = {t.task_id: run.child_threads.get(t.task_id, "") for t in tasks
                       if t.task_id in run.child_threads
                       or (spec.time_travel and isinstance(graph.nodes[t.node].fn, Subgraph))}
            if threads:
                fields["metadata"]["subgraph_threads"] = threads
                # Where each paused child stood: going back to this checkpoint continues a
                # child from there, not from wherever it went since.
                at = {t: run.child_checkpoints[t] for t in threads if t in run.child_checkpoints}
                if at:
                    fields["metadata"]["subgraph_checkpoints"] = at
        if spec.branch and numbers.checkpoint_id is None:
            # Time travel: the leg's first checkpoint's parent is not the thread's latest, on
            # purpose.
            fields["metadata"]["branch"] = True
        if run.parent_command is not None:
            command = run.parent_command  # a child run ended by Command(graph=PARENT)
            fields["metadata"]["parent_command"] = {
                "update": to_json_value(command.update), "goto": command.goto}
        # The visited nodes stay a lazy snapshot until the checkpoint is read.
        if self.adopt is None or not self.adopt(fields, self.fence):
            await self.put(fields)
        numbers.saved(cid)

    def plain_fields(
        self,
        cid: str,
        step: int,
        tasks: list[TaskRecord],
        node: str,
        status: str,
        state: dict[str, Any],
        visited: Visited,
        arrivals: dict[str, list[str]],
        timestamp: datetime | None = None,
    ) -> dict[str, Any] | None:
        """The fields :meth:`save` gives the checkpoint after a superstep of one task of
        ``node`` (``next_step`` is ``step + 1``) at ``timestamp`` (the leg's clock's
        ``now()`` if the caller read it), built at once; ``None`` when the leg's
        ledgers put more in it (recorded tool calls, passed breakpoints, subgraph threads, a
        parent command, time travel): then :meth:`save` builds them."""
        run = self.run
        if run.tool_calls or run.pos.passed or run.child_threads \
                or run.parent_command is not None or not self.plain_leg:
            return None
        spec, numbers = run.spec, run.numbers
        graph = spec.graph
        return {
            "id": cid, "run_id": spec.run_id, "thread_id": spec.thread_id,
            "graph_id": graph.graph_id, "revision": graph.revision,
            "node_id": node, "node_ids": [node], "step": step,
            "parent_id": numbers.parent_id,
            "timestamp": spec.clock.now() if timestamp is None else timestamp,
            "state": state, "format_version": 1,
            "status": status, "next_step": step + 1, "tasks": tasks,
            "completed": {}, "interrupts": [],
            "answers": jcopy(run.answers) if run.answers else {},
            "visited": visited, "arrivals": arrivals,
            "next_seq": numbers.seq, "error": None, "tenant_id": spec.tenant_id,
            "metadata": {"cp_counter": numbers.cp_counter,
                         "task_counter": numbers.task_counter},
        }

    async def put(self, fields: dict[str, Any]) -> None:
        """Store a checkpoint given as its fields through the store's ``save`` (or, on a
        durable store that commits, with the piece's events)."""
        run = self.run
        spec = run.spec
        vis = fields["visited"]
        if not isinstance(vis, tuple) and not self._snapshots:
            fields["visited"] = vis.as_tuple()
        cp = make(Checkpoint, **fields)
        fence = self.fence
        if spec.deferred:
            run.progress.pending.append(cp)  # committed with the piece's events
        elif fence is not None:
            await spec.store.save(cp, fence=fence)  # type: ignore[call-arg]
        else:
            await spec.store.save(cp)


class LegEnd:
    """Ends a leg: makes its :class:`LegOutcome` (the one owner of ``run.outcome``), undoes
    its patches and releases the thread's claim."""

    def __init__(
        self,
        run: RunState,
        release: Callable[[], Awaitable[None]] | None,
        on_done: Callable[[], None] | None,
    ) -> None:
        self.run = run
        self._release = release
        self._on_done = on_done

    async def finish(self, status: LegStatus, error: BaseException | None, *,
                     interrupts: Sequence[Interrupt] = (),
                     breakpoint: Breakpoint | None = None,
                     at: datetime | None = None) -> None:
        """The leg ended with ``status`` (and ``error``, the first one wins), paused at
        ``interrupts`` or a ``breakpoint``; ``at``: the time it ended, when the caller read
        the clock then (else it is read here).

        The claim is released here, unless the leg's last piece is still to be committed
        (a durable store's commit carries the claim's token): then by :meth:`release`.
        """
        run = self.run
        ended_at = run.clock.now() if at is None else at
        prior = run.outcome
        if prior is not None and prior.error is not None:
            error = prior.error
        run.outcome = leg_outcome(status, error, tuple(interrupts), breakpoint,
                                  run.numbers.checkpoint_id, ended_at)
        record = run.spec.record
        if record is not None and error is None:  # update_record(), for an end without error
            record.status = status
            record.updated_at = ended_at
        else:
            self.update_record()
        on_done, self._on_done = self._on_done, None
        if on_done is not None:
            on_done()
        spec = run.spec
        if not spec.deferred:
            claim = spec.claim
            if claim is not None and claim.quick and self._release is not None \
                    and claim.release_now():
                self._release = None  # released at once
            else:
                await self.release()

    def fault(self, error: BaseException) -> None:
        """The leg ended where it was on an unexpected throwable (seed 004): it failed with
        ``error``, its patches are undone, and its clock is not asked again (it threw). The
        caller releases the claim; nothing more is written."""
        run = self.run
        prior = run.outcome
        if prior is None:
            run.outcome = LegOutcome("failed", error, checkpoint_id=run.numbers.checkpoint_id)
        else:
            run.outcome = replace(prior, status="failed", error=error)
        self.update_record()
        on_done, self._on_done = self._on_done, None
        if on_done is not None:
            on_done()

    def update_record(self) -> None:
        """Bring the runtime's run record up to the leg's outcome."""
        run = self.run
        record = run.spec.record
        outcome = run.outcome
        if record is None or outcome is None:
            return
        record.status = outcome.status
        if outcome.ended_at is not None:
            record.updated_at = outcome.ended_at
        if outcome.error is not None:
            error = outcome.error
            record.error = {"error_type": type(error).__name__,
                            "message": error_message(error)}
            own = getattr(error, "run_error", None)
            if isinstance(own, BaseException):
                # The store refused the failure's checkpoint: the failure itself is kept.
                record.error["run_error"] = {"error_type": type(own).__name__,
                                             "message": error_message(own)}

    def refused(self, store_error: BaseException) -> None:
        """The store refused the ended leg's last commit: the leg failed with the store's
        error, and the run's own failure (if it had one) is kept on it. (The piece that
        ended the leg raises it: no caller has seen the outcome it replaces.)"""
        run = self.run
        prior = run.outcome
        assert prior is not None  # only an ended leg's commit is refused here
        if prior.error is not store_error:
            attach_run_error(store_error, prior.error)
        run.outcome = replace(prior, status="failed", error=store_error)
        self.update_record()

    def released(self) -> None:
        """The claim was released with the leg's last commit: :meth:`release` does nothing."""
        self._release = None

    async def release(self) -> None:
        """Release the thread's claim (once)."""
        release, self._release = self._release, None
        if release is not None:
            claim = self.run.spec.claim
            if claim is not None and claim.quick and claim.release_now():
                return  # the in-memory store's: nothing to await
            # A store that fails here keeps the claim; it expires on its own. A simulated
            # process death still propagates: the caller must not see a clean end.
            try:
                await shielded(release())
            except SimulatedCrash:
                raise
            except Exception:
                pass

    def abandon(self) -> None:
        """Synchronous last resort (a stream left without closing it, then collected): undo
        process-wide patches and release the thread's claim where that needs no event loop
        (in-memory and SQLite stores); the run stays resumable from its last checkpoint."""
        run = self.run
        if run.outcome is None:
            run.outcome = LegOutcome("cancelled", checkpoint_id=run.numbers.checkpoint_id)
            record = run.spec.record
            if record is not None:
                record.status = "cancelled"
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
