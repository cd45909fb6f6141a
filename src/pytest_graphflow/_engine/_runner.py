"""The run loop: supersteps, halts, checkpoints and events (SPEC §1–§4, invariants C1–C10).

A :class:`Runner` is an explicit state machine, not an async generator: ``advance()`` runs
the next piece of the run (its start, one superstep, or its end) and returns that piece's
events, already in their final order. Nothing is left suspended between calls, so a consumer
may stop reading at any event without leaving a generator for the garbage collector.

The leg's state is one :class:`~._run_state.RunState`, handed to the parts that act on it:
a :class:`~._batch.BatchRunner` runs a batch's tasks, a :class:`~._commit.Committer` turns a
finished batch into the next position, a :class:`~._halts.HaltHandler` ends a leg early, and
a :class:`~._writer.CheckpointWriter` / :class:`~._writer.LegEnd` save checkpoints and end
the leg.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from .._graph._builder import END, START, Expand
from .._graph._node import EdgeContext
from .._records._events import (
    CheckpointSaved,
    Interrupt,
    InterruptExpired,
    NodeStart,
    RunStart,
)
from .._records._json import DumpedEvents
from .._time._clock import VirtualClock
from ..errors import (
    GraphExecutionError,
    GraphflowError,
    JoinStarved,
    SimulatedCrash,
    SuperstepLimit,
    UnknownRoute,
)
from ._batch import BatchRunner
from ._commit import Committer
from ._fault import unexpected
from ._halts import HaltHandler
from ._merge import merge_patches
from ._run_state import RunState, StepState
from ._task import Outcome, route_expand
from ._writer import CheckpointWriter, LegEnd

__all__ = ["Runner", "StepState"]


class Runner:
    """One leg of a run: from its start (or a resume) to its end or its next halt."""

    def __init__(
        self,
        run: RunState,
        *,
        release: Callable[[], Awaitable[None]] | None,
        on_done: Callable[[], None] | None,
    ) -> None:
        self.run = run
        self.writer = CheckpointWriter(run)
        self.end = LegEnd(run, release, on_done)
        self.batches = BatchRunner(run)
        self.halts = HaltHandler(run, self.writer, self.end)
        self.committer = Committer(run, self.writer, self.end, self.halts)
        self._committed_record: dict[str, Any] | None = None
        """The run record this leg's last commit wrote (a step that does not change it does
        not send it again)."""

    # What the stream and the runtime read of a leg.
    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.run.run_id

    @property
    def done(self) -> bool:
        """Whether the leg has ended."""
        return self.run.done

    @property
    def interrupts(self) -> list[Interrupt]:
        """The interrupts the leg paused at."""
        return self.run.interrupts

    def cancel(self) -> None:
        """Ask the run to stop: the current batch is cancelled and joined."""
        run = self.run
        run.cancel_requested = True
        if run.scope is not None:
            run.scope.cancel()

    async def advance(self) -> list[Any]:
        """Run the next piece of the run and return its events (and step markers)."""
        run = self.run
        if run.done:
            return []
        leg = run.leg
        if leg is None:
            return await self._advance()
        try:
            items = await self._advance()
        except BaseException as exc:
            leg.error = exc
            raise
        finally:
            leg.visited = list(run.visited)
        leg.events.extend([i for i in items if type(i) is not StepState])
        return items

    async def _advance(self) -> list[Any]:
        run = self.run
        try:
            claim = run.claim
            if claim is not None and claim.due():  # no coroutine per piece when not due
                await claim.renew_if_due()
            if not run.started:
                items = await self._begin()
            else:
                items = await self._superstep()
            if run.durable:
                await self._persist(items)
            if run.done:
                await self.end.release()
            return items
        except anyio.get_cancelled_exc_class():
            # The consumer's scope was cancelled: stop the run as RunHandle.cancel() does,
            # keeping every task that finished (C9), then let the cancellation go on.
            batch, run.batch = run.batch, None
            with anyio.CancelScope(shield=True):
                await self._stop_cancelled(batch)
                await self._after_error(None)
            raise
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt) and run.stepping:
                run.batch = None  # seed 004: interrupting the thread driving a step
                with anyio.CancelScope(shield=True):
                    await self._stop_cancelled(None)
                    await self._after_error(None)
                raise
            fault = unexpected(exc, run.clock, run.run_id, run.thread_id, admitted=True)
            if fault is not None:  # seed 004: ended where it was, nothing more written
                run.pending = []
                self.end.fault(fault)
                await self.end.release()
                raise fault from exc
            if not run.done:
                await self.end.finish("failed", exc)
            with anyio.CancelScope(shield=True):
                await self._after_error(exc)
            raise

    async def _stop_cancelled(self, batch: list[Outcome] | None) -> None:
        """End a cancelled leg: the tasks that finished keep their results (C9); a step keeps
        nothing of its cancelled superstep (seed 004), not even its events."""
        run = self.run
        if run.done or run.tasks is None:
            return
        if run.stepping:
            batch = []
        if batch is not None:
            run.cancel_requested = True
            items = await self.halts.stop(batch, timed_out=False)
            if run.durable:
                await self._persist(items)

    async def _after_error(self, exc: BaseException | None) -> None:
        """A piece ended in an exception: on a durable store, commit what the leg still holds
        (the checkpoint a halt saved before an edge function threw, C7) with its run record,
        then release the claim. A commit that fails here changes nothing more."""
        run = self.run
        if run.deferred and not isinstance(exc, SimulatedCrash):
            with contextlib.suppress(Exception):
                await self._persist([])
        if run.done:
            try:
                await self.end.release()
            except SimulatedCrash:
                if not isinstance(exc, SimulatedCrash):
                    raise

    async def close(self) -> None:
        """Stop a run whose consumer left early; it stays resumable from its last checkpoint."""
        if not self.run.done:
            await self.end.finish("cancelled", None)
            await self.end.release()

    def abandon(self) -> None:
        """Synchronous last resort for a stream collected without being closed."""
        self.end.abandon()

    async def _persist(self, items: list[Any]) -> None:
        """Durable stores keep the run's events and its run record (seed 002).

        With a claim the store checks (SQLite), the piece's checkpoints, events and run
        record go in one ``commit`` under the claim's token: all of them or none, and none
        once another process took the thread over (``StaleClaim``).
        """
        run = self.run
        store: Any = run.store
        events = DumpedEvents(e.model_dump(mode="json") for e in items
                              if type(e) is not StepState)
        record = run.record is not None and (
            not run.started or run.done or run.pending
            or (events and events[0]["type"] == "run_start"))
        if not run.deferred:
            if events:
                await store.record_events(run.run_id, events)
            if record:
                await store.record_run(run.record.as_dict())
            return
        data = run.record.as_dict() if record else None
        if data is not None and data == self._committed_record:
            data = None  # the leg committed this record already
        if not (run.pending or events or data):
            return
        checkpoints, run.pending = run.pending, []
        try:
            await store.commit(run.thread_id, run.claim.token, run_id=run.run_id,
                               checkpoints=checkpoints, events=events, run=data)
        except Exception as exc:
            if run.done:
                self.end.refused(exc)
            raise
        if data is not None:
            self._committed_record = data

    async def _begin(self) -> list[Any]:
        run = self.run
        run.started = True
        run.started_at = run.clock.now()
        limit = _deadline(run)
        if limit is not None:
            if isinstance(run.clock, VirtualClock):
                run.deadline_ns = run.clock.elapsed_ns + round(limit * 1e9)
            else:
                run.deadline = run.clock.monotonic() + limit
        events: list[Any] = [run.event(
            RunStart, run.step, graph_id=run.graph.graph_id, revision=run.graph.revision,
            thread_id=run.thread_id, resumed_from=run.resumed_from,
        )]
        for question, action, routed_to, answer in run.expired:
            events.append(run.event(
                InterruptExpired, run.step, node=question.node, task_id=question.task_id,
                key=question.key, deadline=question.deadline, action=action,
                routed_to=routed_to, answer=answer))
        if run.tasks is None:  # a fresh run: schedule the entry
            run.tasks = []
            await self._schedule_entry()
            # A run whose entry schedules nothing (START routes straight to END) is complete
            # at once: its checkpoint says so, or the thread would look mid-execution.
            empty = not run.tasks
            if run.graph.every_step or (empty and run.thread_explicit):
                cid = run.next_checkpoint_id()
                events.append(run.event(CheckpointSaved, run.step, checkpoint_id=cid))
                await self.writer.save(cid, step=-1, next_step=run.step, tasks=run.tasks,
                                       node_ids=[], status="completed" if empty else "running")
        return run.stamp(events)

    async def _schedule_entry(self) -> None:
        run = self.run
        assert run.tasks is not None
        graph = run.graph
        targets = list(graph.edges.get(START, ()))
        expansions: list[dict[str, Any]] = []
        for branch in graph.branches.get(START, ()):
            view = run.model or graph.codec.model_of(run.state)
            picked = branch.route(view) if branch.arity == 1 else branch.route(
                view, EdgeContext(START, (), run.step))
            if hasattr(picked, "__await__"):
                picked = await picked
            picks = list(picked) if isinstance(picked, (list, tuple)) else [picked]
            for p in picks:
                if isinstance(p, Expand):  # an expansion from START: one task per item
                    expansions.append(route_expand(START, p, branch.targets))
                elif branch.mapping is not None:
                    if p not in branch.mapping:
                        raise UnknownRoute.from_branch(
                            START, p, [str(k) for k in branch.mapping], key=True)
                    targets.append(branch.mapping[p])
                elif p in branch.targets or p == END:
                    targets.append(p)
                else:  # raised where the edge is evaluated, as a throwing route's error (C7)
                    raise UnknownRoute.from_branch(START, p, branch.targets)
        order = graph.nodes
        for node in sorted(dict.fromkeys(t for t in targets if t != END),
                           key=lambda n: order[n].index):
            run.tasks.append(run.new_task(node))
        for expansion in expansions:
            for item in expansion["items"]:
                run.tasks.append(run.new_task(expansion["node"], None, item, True))
        run.tasks.sort(key=lambda t: order[t.node].index)

    async def _superstep(self) -> list[Any]:
        run = self.run
        assert run.tasks is not None
        graph = run.graph
        if not run.tasks:
            if run.arrivals:
                join, arrived = next(iter(run.arrivals.items()))
                j = next(j for j in graph.joins if j.key == join)
                missing = [s for s in j.sources if s not in arrived]
                return await self.halts.fail_run(JoinStarved(j.target, missing, arrived))
            return await self.halts.complete()
        if run.max_supersteps is not None and run.supersteps >= run.max_supersteps:
            return await self.halts.fail_run(
                SuperstepLimit(run.max_supersteps, [t.node for t in run.tasks])
            )
        if (run.deadline_ns is not None or run.deadline is not None) \
                and self._timed_out_now():
            return await self._after_batch([], True)
        if run.cancel_requested:
            return await self.halts.stop([], timed_out=False)
        tasks = run.tasks
        if run.break_before:
            stopping = [t.node for t in tasks
                        if t.node in run.break_before and t.task_id not in run.passed]
            if stopping:
                return await self.halts.pause_before(list(dict.fromkeys(stopping)))
        run.supersteps += 1
        if run.durable:
            await self._record_in_flight(tasks)
        if not run.completed and len(tasks) == 1:
            spec = graph.nodes[tasks[0].node]
            if run.runs_inline(spec):
                # The common step: one sync node, run inline.
                out = await self.batches.run_inline(tasks[0], spec)
                if out.artifacts:
                    await self._store_artifacts([out])
                if out.kind == "done" and out.expand is None and not run.record_events \
                        and not run.break_after:
                    return await self.committer.commit_one(out)  # invoke(): no events wanted
                return await self._after_batch([out], False)
        outcomes, timed_out = await self.batches.run_batch()
        if any(o.artifacts for o in outcomes):
            await self._store_artifacts(outcomes)
        return await self._after_batch(outcomes, timed_out)

    async def _record_in_flight(self, tasks: list[Any]) -> None:
        """Seed 002: "When a side-effect outcome is unknown, inspect Events before resuming."

        Before a batch runs, a durable store records a ``node_start`` for each of its
        ``external`` tasks that will really run, at the numbers the batch's own events take
        next. The batch's events overwrite them; if the batch never reports (the process died,
        a checkpoint save was refused), the log ends with the external node started and never
        ended: its outcome is unknown.
        """
        run = self.run
        graph = run.graph
        flying = [t for t in tasks if graph.nodes[t.node].effect == "external"
                  and t.task_id not in run.completed]
        if not flying:
            return
        now = run.clock.now()
        events = [NodeStart(seq=run.seq + i, run_id=run.run_id, step=run.step, time=now,
                            node=t.node, task_id=t.task_id).model_dump(mode="json")
                  for i, t in enumerate(flying)]
        store: Any = run.store
        await store.record_events(run.run_id, events)

    async def _store_artifacts(self, outcomes: list[Outcome]) -> None:
        """Store what the batch's nodes attached (in declared order), whatever their outcome."""
        run = self.run
        store: Any = run.store
        for out in outcomes:
            for name, data, media_type in out.artifacts:
                if not run.features.artifacts:
                    raise GraphExecutionError(
                        f"node {out.record.node!r} attached artifact {name!r}, but the store "
                        f"{type(run.store).__name__} keeps no artifacts (its features say "
                        "artifacts=False); use a store that does, such as "
                        "InMemoryCheckpointStore or SQLiteCheckpointStore")
                await store.put_artifact(run.run_id, name, data, media_type)
            out.artifacts = []

    async def _after_batch(self, outcomes: list[Outcome], timed_out: bool) -> list[Any]:
        if timed_out and _cancels(self.run):  # the deadline was cancel_after's
            self.run.cancel_requested = True
            timed_out = False
        if timed_out or self.run.cancel_requested:
            return await self.halts.stop(outcomes, timed_out=timed_out)
        halting = [o for o in outcomes if o.kind == "interrupt"
                   or (o.kind == "error" and (o.spec.on_error is None or o.fatal))]
        edge_error = next((o for o in outcomes if o.kind == "edge_error"), None)
        if edge_error is not None:
            # C7: the edge function's own exception ends the run, and no event of the batch
            # is yielded. C6: errors come in declared order — a halting node declared before
            # it asks for its checkpoint first (a rejected save raises instead).
            assert edge_error.error is not None
            if halting and outcomes.index(halting[0]) < outcomes.index(edge_error):
                await self.halts.halt(outcomes, halting)
            raise edge_error.error
        if halting:
            if all(o.kind == "interrupt" for o in halting):
                # Seed 002: parallel writes merge "only when their writes are disjoint or use
                # a registered reducer". Writes that cannot merge fail the run now, not after
                # a human answered the interrupt of the same batch.
                conflict = self._merge_error(outcomes)
                if conflict is not None:
                    return await self.halts.halt(outcomes, halting, batch_error=conflict)
            return await self.halts.halt(outcomes, halting)
        return await self.committer.commit(outcomes)

    def _merge_error(self, outcomes: list[Outcome]) -> GraphflowError | None:
        """The error merging the completed tasks' patches would raise, if any."""
        run = self.run
        patches = [(o.record.node, o.patch) for o in outcomes if o.kind == "done" and o.patch]
        if len(patches) < 2:
            return None
        try:
            merged = merge_patches(run.graph, run.state, patches, parallel=True)
            run.graph.codec.validate(dict(merged), patches)
        except GraphflowError as exc:
            return exc
        return None

    def _timed_out_now(self) -> bool:
        run = self.run
        if run.deadline_ns is not None:
            assert isinstance(run.clock, VirtualClock)
            return run.clock.elapsed_ns >= run.deadline_ns
        if run.deadline is not None:
            return run.clock.monotonic() >= run.deadline
        return False


def _deadline(run: RunState) -> float | None:
    """Seconds into the leg at which it stops: its ``timeout`` or its ``cancel_after``,
    whichever comes first."""
    timeout = run.timeout if run.timeout != float("inf") else None
    if _cancels(run):
        return run.cancel_after
    return timeout


def _cancels(run: RunState) -> bool:
    """Whether the leg's deadline is its ``cancel_after`` (a cancel), not its timeout."""
    return run.cancel_after is not None and (
        run.timeout is None or run.cancel_after < run.timeout)
