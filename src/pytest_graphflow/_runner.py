"""The run loop: supersteps, halts, checkpoints and events (SPEC §1–§4, invariants C1–C10).

A :class:`Runner` is an explicit state machine, not an async generator: ``advance()`` runs
the next piece of the run (its start, one superstep, or its end) and returns that piece's
events, already in their final order. Nothing is left suspended between calls, so a consumer
may stop reading at any event without leaving a generator for the garbage collector.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any

import anyio
from pydantic import BaseModel

from ._checkpoint import Checkpoint, TaskOutput, TaskRecord
from ._clock import Clock, VirtualClock
from ._events import (
    CheckpointSaved,
    CustomEvent,
    EdgeTransition,
    ErrorEvent,
    EventBase,
    Interrupt,
    InterruptEvent,
    NodeEnd,
    NodeStart,
    RunEnd,
    RunStart,
)
from ._fast import make
from ._graph import END, REPLAYED_EFFECTS, CompiledGraph, Join, NodeSpec
from ._json import jcopy
from ._merge import merge_patches, validate_state
from ._node import CURRENT_TASK, EdgeContext, NodeContext, Visited
from ._rng import ScheduleRng
from ._sched import NODE_SLEEPER, BatchScheduler
from ._stores._memory import InMemoryCheckpointStore
from ._stores._protocol import CheckpointStore
from ._task import Outcome, decide_edges, execute
from ._vloop import LOOP_OWNED, STALL_HANDLERS, loop_clock, loop_deadline_ns
from ._wallclock import NODE_CLOCK
from .errors import (
    Cancelled,
    GraphflowError,
    JoinStarved,
    NodeFailed,
    RunTimedOut,
    SuperstepLimit,
    VirtualDeadlock,
)

__all__ = ["Runner"]



def _ev(cls: type[EventBase], **fields: Any) -> Any:
    """Build an event without validation (hot path); ``time`` is stamped when yielded."""
    return make(cls, time=None, **fields)


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


class Runner:
    """One leg of a run: from its start (or a resume) to its end or its next halt."""

    def __init__(
        self,
        *,
        graph: CompiledGraph,
        store: CheckpointStore,
        clock: Clock,
        seed: int | None,
        run_id: str,
        thread_id: str,
        tenant_id: str | None,
        state: dict[str, Any],
        step: int,
        tasks: list[TaskRecord] | None,
        completed: dict[str, TaskOutput],
        answers: dict[str, Any],
        visited: list[str] | tuple[str, ...],
        arrivals: dict[str, list[str]],
        seq: int,
        parent_id: str | None,
        resumed_from: str | None,
        cp_counter: int,
        task_counter: int,
        max_supersteps: int | None,
        timeout: float | None,
        on_interrupt: Callable[[Interrupt], Any] | None,
        release: Callable[[], Awaitable[None]] | None,
        on_done: Callable[[], None] | None,
        wall_clock: bool,
        record_events: bool = True,
    ) -> None:
        self.graph = graph
        self.store = store
        self.clock = clock
        self.seed = seed
        self.run_id = run_id
        self.thread_id = thread_id
        self.tenant_id = tenant_id
        self.state = state
        self.model: BaseModel | None = None
        self.step = step
        self.tasks = tasks
        self.completed = completed
        self.answers = answers
        self.visited = Visited(list(visited))
        self.arrivals = arrivals
        self.seq = seq
        self.parent_id = parent_id
        self.resumed_from = resumed_from
        self.cp_counter = cp_counter
        self.task_counter = task_counter
        self.max_supersteps = max_supersteps
        self.timeout = timeout
        self.on_interrupt = on_interrupt
        self._release = release
        self._on_done = on_done
        self.wall_clock = wall_clock
        self._hex = run_id[4:] if run_id.startswith("run-") else run_id
        self.started = False
        self.done = False
        self.status: str | None = None
        self.error: BaseException | None = None
        self.interrupts: list[Interrupt] = []
        self.checkpoint_id: str | None = None
        self.supersteps = 0
        self.cancel_requested = False
        self._scope: anyio.CancelScope | None = None
        self._deadline: float | None = None
        self._deadline_ns: int | None = None
        self.started_at: datetime | None = None
        self.ended_at: datetime | None = None
        self.record: Any = None
        self._durable = bool(getattr(store, "records_events", False))
        self.record_events = record_events or self._durable
        self._adopt = store._adopt_fields if type(store) is InMemoryCheckpointStore else None
        self._batch: list[Outcome] | None = None
        self.thread_explicit = False
        self.start_order: list[str] = []

    # ------------------------------------------------------------------ ids and events

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

    # ------------------------------------------------------------------ public driving

    def cancel(self) -> None:
        """Ask the run to stop: the current batch is cancelled and joined."""
        self.cancel_requested = True
        if self._scope is not None:
            self._scope.cancel()

    async def advance(self) -> list[Any]:
        """Run the next piece of the run and return its events (and step markers)."""
        if self.done:
            return []
        try:
            if not self.started:
                items = await self._begin()
            else:
                items = await self._superstep()
            if self._durable:
                await self._persist(items)
            return items
        except anyio.get_cancelled_exc_class():
            # The consumer's scope was cancelled: stop the run as RunHandle.cancel() does,
            # keeping every task that finished (C9), then let the cancellation go on.
            batch, self._batch = self._batch, None
            if not self.done and batch is not None:
                self.cancel_requested = True
                with anyio.CancelScope(shield=True):
                    await self._halt_stop(batch, timed_out=False)
            raise
        except BaseException as exc:
            if not self.done:
                await self._finish("failed", exc)
            raise

    async def close(self) -> None:
        """Stop a run whose consumer left early; it stays resumable from its last checkpoint."""
        if not self.done:
            await self._finish("cancelled", None)

    async def _persist(self, items: list[Any]) -> None:
        """Durable stores keep the run's events and its run record (seed 002)."""
        store: Any = self.store
        events = [e.model_dump(mode="json") for e in items if type(e) is not StepState]
        if events:
            await store.record_events(self.run_id, events)
        if self.record is not None and (not self.started or self.done or (events
                                        and events[0]["type"] == "run_start")):
            await store.record_run(self.record.as_dict())

    def abandon(self) -> None:
        """Synchronous last resort (a stream left without closing it, then collected): undo
        process-wide patches and release the thread's claim where that needs no event loop
        (in-memory and SQLite stores); the run stays resumable from its last checkpoint."""
        if not self.done:
            self.done = True
            self.status = "cancelled"
            if self.record is not None:
                self.record.status = "cancelled"
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
                # A dead store keeps the claim; it expires on its own.
                with contextlib.suppress(BaseException):
                    await release()

    # ------------------------------------------------------------------ phases

    async def _begin(self) -> list[Any]:
        self.started = True
        self.started_at = self.clock.now()
        if self.timeout is not None and self.timeout != float("inf"):
            if isinstance(self.clock, VirtualClock):
                self._deadline_ns = self.clock.elapsed_ns + round(self.timeout * 1e9)
            else:
                self._deadline = self.clock.monotonic() + self.timeout
        events: list[Any] = [self._e(
            RunStart, self.step, graph_id=self.graph.graph_id, revision=self.graph.revision,
            thread_id=self.thread_id, resumed_from=self.resumed_from,
        )]
        if self.tasks is None:  # a fresh run: schedule the entry
            self.tasks = []
            await self._schedule_entry()
            if self.graph.every_step:
                cid = self._next_cp_id()
                events.append(self._e(CheckpointSaved, self.step, checkpoint_id=cid))
                await self._save(cid, step=-1, next_step=self.step, tasks=self.tasks,
                                 node_ids=[], status="running")
        return self._stamp(events)

    async def _schedule_entry(self) -> None:
        from ._graph import START

        assert self.tasks is not None
        graph = self.graph
        targets = list(graph.edges.get(START, ()))
        for branch in graph.branches.get(START, ()):
            view = self.model or validate_state(graph, self.state)
            picked = branch.route(view) if branch.arity == 1 else branch.route(
                view, EdgeContext(START, (), self.step))
            if hasattr(picked, "__await__"):
                picked = await picked
            picks = list(picked) if isinstance(picked, (list, tuple)) else [picked]
            targets.extend(branch.mapping[p] if branch.mapping is not None else p for p in picks)
        order = graph.nodes
        for node in sorted(dict.fromkeys(t for t in targets if t != END),
                           key=lambda n: order[n].index):
            self.tasks.append(self._task(node))

    async def _superstep(self) -> list[Any]:
        assert self.tasks is not None
        graph = self.graph
        if not self.tasks:
            if self.arrivals:
                join, arrived = next(iter(self.arrivals.items()))
                j = next(j for j in graph.joins if j.key == join)
                missing = [s for s in j.sources if s not in arrived]
                return await self._fail_run(JoinStarved(j.target, missing, arrived))
            return await self._complete()
        if self.max_supersteps is not None and self.supersteps >= self.max_supersteps:
            return await self._fail_run(
                SuperstepLimit(self.max_supersteps, [t.node for t in self.tasks])
            )
        if (self._deadline_ns is not None or self._deadline is not None) \
                and self._timed_out_now():
            return await self._halt_stop([], timed_out=True)
        if self.cancel_requested:
            return await self._halt_stop([], timed_out=False)
        self.supersteps += 1
        tasks = self.tasks
        if not self.completed and not self.record_events:
            if len(tasks) == 1:
                spec = graph.nodes[tasks[0].node]
                if not spec.is_async and spec.retry is None:
                    # The common step of invoke(): no events wanted, one sync node.
                    out = await self._run_inline(tasks[0], spec)
                    if out.kind == "done" and out.expand is None:
                        return await self._commit_one(out)
                    return await self._after_batch([out], False)
            specs = [graph.nodes[t.node] for t in tasks]
            if all(not s.is_async and s.retry is None for s in specs):
                # Sync nodes cannot interleave: they run inline, in the seeded start order.
                order = list(range(len(tasks)))
                if self.seed is not None:
                    ScheduleRng(self.seed, self.run_id, self.step).shuffle(order)  # type: ignore[arg-type]
                outcomes: list[Outcome] = [None] * len(tasks)  # type: ignore[list-item]
                for i in order:
                    outcomes[i] = await self._run_inline(tasks[i], specs[i])
                return await self._after_batch(outcomes, False)
        outcomes, timed_out = await self._run_batch()
        return await self._after_batch(outcomes, timed_out)

    async def _after_batch(self, outcomes: list[Outcome], timed_out: bool) -> list[Any]:
        if timed_out or self.cancel_requested:
            return await self._halt_stop(outcomes, timed_out=timed_out)
        halting = [o for o in outcomes if o.kind == "interrupt"
                   or (o.kind == "error" and o.spec.on_error is None)]
        edge_error = next((o for o in outcomes if o.kind == "edge_error"), None)
        if edge_error is not None:
            # C7: the edge function's own exception ends the run, and no event of the batch
            # is yielded. C6: errors come in declared order — a halting node declared before
            # it asks for its checkpoint first (a rejected save raises instead).
            assert edge_error.error is not None
            if halting and outcomes.index(halting[0]) < outcomes.index(edge_error):
                await self._halt(outcomes, halting)
            raise edge_error.error
        if halting:
            return await self._halt(outcomes, halting)
        return await self._commit(outcomes)

    def _timed_out_now(self) -> bool:
        if self._deadline_ns is not None:
            assert isinstance(self.clock, VirtualClock)
            return self.clock.elapsed_ns >= self._deadline_ns
        if self._deadline is not None:
            return self.clock.monotonic() >= self._deadline
        return False

    # ------------------------------------------------------------------ running a batch

    def _context(self, record: TaskRecord) -> NodeContext:
        """What the task of ``record`` sees as ``ctx`` in the current superstep."""
        return NodeContext(
            node=record.node, task_id=record.task_id, run_id=self.run_id,
            thread_id=self.thread_id, step=self.step, item=record.item,
            checkpoint_id_before=record.checkpoint_id_before, visited=self.visited,
            failure=record.failure, clock=self.clock, answers=self.answers,
            hook=self.on_interrupt,
        )

    async def _run_inline(self, record: TaskRecord, spec: NodeSpec) -> Outcome:
        """Run one sync task inline (nothing can interleave with it)."""
        clock = self.clock
        ctx = self._context(record)
        model = self.model
        self.model = None
        if model is None:
            model = self.graph.codec.model_of(self.state)
        t1 = CURRENT_TASK.set(ctx)
        t2 = NODE_CLOCK.set(clock) if self.wall_clock else None  # type: ignore[arg-type]
        try:
            out = await execute(self.graph, spec, record, lambda: model, ctx, clock, clock.sleep,
                                self.state)
        finally:
            if t2 is not None:
                NODE_CLOCK.reset(t2)
            CURRENT_TASK.reset(t1)
        self.start_order.append(record.node)
        return out

    async def _commit_one(self, out: Outcome) -> list[Any]:
        """``_commit`` for one completed task when no events are recorded (hot path).

        It keeps exactly the numbering of the general path: ``seq`` advances by the events
        that path would have built.
        """
        graph, step = self.graph, self.step
        record = out.record
        node = record.node
        patch = out.patch
        patches = [(node, patch)]
        try:
            new_state = merge_patches(graph, self.state, patches, parallel=False)
            new_state, model = graph.codec.validate(new_state, patches)
        except GraphflowError as exc:
            return await self._halt([out], [], batch_error=exc)
        seq = 2 + len(out.custom) + len(out.targets)  # node_start, custom..., node_end, edges
        arrivals = self.arrivals
        joins = graph.joins
        scheduled: list[str] = []
        if joins:
            arrivals = {k: list(v) for k, v in arrivals.items()}
            touched = graph.joins_from.get(node, ()) if out.goto is None else ()
            for join in touched:
                got = arrivals.setdefault(join.key, [])
                if node not in got:
                    got.append(node)
                seq += 1
            # Only a join that got an arrival now can have become complete.
            for join in touched:
                arrived = arrivals.get(join.key)
                if arrived is not None and all(s in arrived for s in join.sources):
                    del arrivals[join.key]
                    if join.target != END:
                        scheduled.append(join.target)
        for target in out.targets:
            if target != END:
                scheduled.append(target)
        if len(scheduled) > 1:
            order = graph.nodes
            scheduled = sorted(dict.fromkeys(scheduled), key=lambda n: order[n].index)
        next_tasks = [self._task(name) for name in scheduled]
        self.visited = visited = self.visited.extend((node,))
        finished = not next_tasks and not arrivals
        cid: str | None = None
        if graph.every_step or out.spec.checkpoint or (
                finished and (self.parent_id is not None or self.thread_explicit)):
            cid = self._next_cp_id()
            seq += 1
        if finished:
            seq += 1
        self.seq += seq
        self.state = new_state
        self.model = model
        self.arrivals = arrivals
        self.tasks = next_tasks
        self.step = step + 1
        if cid is not None:
            await self._save(cid, step=step, next_step=step + 1, tasks=next_tasks,
                             node_ids=[node], status="completed" if finished else "running",
                             state=new_state, visited=visited, arrivals=arrivals)
        if finished:
            await self._finish("completed", None)
        return []

    def _input_factory(self, parallel: bool) -> Callable[[], BaseModel]:
        graph, state = self.graph, self.state
        cached = [None if parallel else self.model]
        model_of = graph.codec.model_of

        def make_input() -> BaseModel:
            model = cached[0]
            if model is not None:
                cached[0] = None
                return model
            return model_of(state)

        return make_input

    async def _run_batch(self) -> tuple[list[Outcome], bool]:
        assert self.tasks is not None
        graph, clock, step = self.graph, self.clock, self.step
        tasks = self.tasks
        visited = self.visited
        outcomes: list[Outcome] = []
        to_run: list[int] = []
        for i, record in enumerate(tasks):
            spec = graph.nodes[record.node]
            done = self.completed.get(record.task_id)
            if done is not None and (done.keep or spec.effect in REPLAYED_EFFECTS):
                out = Outcome(record, spec, kind="done", patch=done.patch, goto=done.goto,
                              expand=done.expand, replayed=True,
                              started_at=done.started_at, finished_at=done.finished_at)
                outcomes.append(out)
            else:
                outcomes.append(Outcome(record, spec))
                to_run.append(i)
        parallel = len(tasks) > 1
        make_input = self._input_factory(parallel)
        self.model = None
        virtual = isinstance(clock, VirtualClock)
        timed_out = False

        context = self._context

        if len(to_run) == 1 and len(tasks) == 1:
            spec = outcomes[0].spec
            if not spec.is_async and spec.retry is None:
                record = tasks[0]
                t1 = CURRENT_TASK.set(context(record))
                t2 = NODE_CLOCK.set(clock) if virtual and self.wall_clock else None  # type: ignore[arg-type]
                try:
                    outcomes[0] = await execute(graph, spec, record, make_input,
                                                CURRENT_TASK.get(), clock, clock.sleep,  # type: ignore[arg-type]
                                                self.state)
                finally:
                    if t2 is not None:
                        NODE_CLOCK.reset(t2)
                    CURRENT_TASK.reset(t1)
                self.start_order.append(record.node)
                return outcomes, False
        if to_run and all(not outcomes[i].spec.is_async and outcomes[i].spec.retry is None
                          for i in to_run):
            # Fast path: sync tasks cannot interleave, so they run inline, one after the
            # other, in the seeded start order.
            order = to_run
            if len(order) > 1 and self.seed is not None:
                order = list(order)
                ScheduleRng(self.seed, self.run_id, step).shuffle(order)  # type: ignore[arg-type]
            t2 = NODE_CLOCK.set(clock if virtual and self.wall_clock else None)  # type: ignore[arg-type]
            try:
                for i in order:
                    record = tasks[i]
                    ctx = context(record)
                    t1 = CURRENT_TASK.set(ctx)
                    try:
                        outcomes[i] = await execute(graph, outcomes[i].spec, record, make_input,
                                                    ctx, clock, clock.sleep, self.state)
                    finally:
                        CURRENT_TASK.reset(t1)
                    self.start_order.append(record.node)
            finally:
                NODE_CLOCK.reset(t2)
        elif to_run:
            self._batch = outcomes
            timed_out = await self._run_concurrently(tasks, outcomes, to_run, make_input, context)
            self._batch = None
        for out in outcomes:
            if out.replayed:
                await decide_edges(graph, out.spec, out, self.state, visited, step)
        return outcomes, timed_out

    async def _run_concurrently(
        self,
        tasks: list[TaskRecord],
        outcomes: list[Outcome],
        to_run: list[int],
        make_input: Callable[[], BaseModel],
        context: Callable[[TaskRecord], NodeContext],
    ) -> bool:
        graph, clock = self.graph, self.clock
        rng: Any
        if self.seed is not None:
            rng = ScheduleRng(self.seed, self.run_id, self.step)
        else:
            rng = None if len(to_run) == 1 else random.Random()
        stalled: list[list[int]] = []
        sched: BatchScheduler | None = None
        if isinstance(clock, VirtualClock):
            owned = LOOP_OWNED.get() is clock or loop_clock() is clock

            def stall(keys: list[int]) -> None:
                stalled.append(keys)
                scope.cancel()

            sched = BatchScheduler(
                clock, rng, self._deadline_ns, on_deadline=lambda: scope.cancel(),
                on_stall=stall,
                loop_deadline=(lambda: loop_deadline_ns(clock)) if owned else None,
            )
        events = {i: sched.register(i) for i in to_run} if sched is not None else {}
        wall = self.wall_clock and sched is not None

        async def run_one(i: int) -> None:
            record = tasks[i]
            ctx = context(record)
            CURRENT_TASK.set(ctx)
            try:
                if sched is not None:
                    await events[i].wait()
                    self.start_order.append(record.node)
                    sleep = sched.sleeper(i)
                    NODE_SLEEPER.set(sleep)
                    if wall:
                        NODE_CLOCK.set(clock)  # type: ignore[arg-type]
                else:
                    self.start_order.append(record.node)
                    sleep = clock.sleep
                outcomes[i] = await execute(graph, outcomes[i].spec, record, make_input, ctx,
                                            clock, sleep, self.state)
            finally:
                if sched is not None:
                    sched.finished(i)

        order = list(to_run)
        if sched is None and rng is not None:
            rng.shuffle(order)
        deadline = None if self._deadline is None else self._deadline - clock.monotonic()
        handler = sched.stall if sched is not None and sched.kick is not None else None
        if handler is not None:
            STALL_HANDLERS.append(handler)
        with anyio.CancelScope() as scope:
            if deadline is not None:
                scope.deadline = anyio.current_time() + max(0.0, deadline)
            self._scope = scope
            if self.cancel_requested:
                scope.cancel()
            try:
                async with _unwrapped(), anyio.create_task_group() as tg:
                    for i in order:
                        tg.start_soon(run_one, i)
                    if sched is not None:
                        if sched.kick is not None:
                            tg.start_soon(sched.keeper)
                        sched.start()
            finally:
                self._scope = None
                if handler is not None:
                    STALL_HANDLERS.remove(handler)
        if stalled:
            names = [tasks[i].node for i in stalled[0]]
            for i in stalled[0]:
                outcomes[i].kind = "error"
                outcomes[i].error = VirtualDeadlock(
                    f"nodes {names} wait forever: every task of the batch waits (an infinite "
                    "sleep, or an event, lock or queue nothing will set) and no timer, thread "
                    "or I/O is pending, so virtual time cannot wake them. Do not make the "
                    "tasks of one batch wait for each other; pass data through the state"
                )
            return False
        if scope.cancelled_caught and not self.cancel_requested:
            return True
        return sched is not None and sched.timed_out

    # ------------------------------------------------------------------ outcomes to events

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

    # ------------------------------------------------------------------ committing a batch

    async def _commit(self, outcomes: list[Outcome]) -> list[Any]:
        assert self.tasks is not None
        graph, step = self.graph, self.step
        tasks = self.tasks
        if len(outcomes) == 1:
            done = outcomes if outcomes[0].kind == "done" else []
        else:
            done = [o for o in outcomes if o.kind == "done"]
        patches = [(o.record.node, o.patch) for o in done]
        try:
            new_state = merge_patches(graph, self.state, patches, parallel=len(tasks) > 1)
            new_state, model = graph.codec.validate(new_state, patches)
        except GraphflowError as exc:
            return await self._halt(outcomes, [], batch_error=exc)

        events: list[Any] = []
        e = self._e
        joins = graph.joins
        arrivals = {k: list(v) for k, v in self.arrivals.items()} if self.arrivals else {}
        scheduled: dict[str, dict[str, Any] | None] = {}
        touched: dict[Join, None] = {}
        expansions: list[Outcome] = []
        for out in outcomes:
            self._task_events(out, step, events)
            record = out.record
            node = record.node
            if out.kind == "error":  # routed failure (C2: error, then the route's edge)
                target = out.spec.on_error
                assert target is not None
                out.routed_to = target
                events[-1].__dict__["routed_to"] = target
                events.append(e(EdgeTransition, step, node=node, task_id=record.task_id,
                                source=node, target=target))
                scheduled[target] = {"node": node, "error_type": type(out.error).__name__,
                                     "message": str(out.error)}
                continue
            for target in out.targets:
                events.append(e(EdgeTransition, step, node=node, task_id=record.task_id,
                                source=node, target=target))
                if target != END and target not in scheduled:
                    scheduled[target] = None
            if out.expand is not None:
                expansions.append(out)
                events.append(e(EdgeTransition, step, node=node, task_id=record.task_id,
                                source=node, target=out.expand["node"]))
            elif joins and out.goto is None:
                for join in graph.joins_from.get(node, ()):
                    got = arrivals.setdefault(join.key, [])
                    if node not in got:
                        got.append(node)
                    touched[join] = None
                    events.append(e(EdgeTransition, step, node=node, task_id=record.task_id,
                                    source=node, target=join.target))
        # Only a join that got an arrival in this batch can have become complete.
        for join in touched:
            arrived = arrivals.get(join.key)
            if arrived is not None and all(s in arrived for s in join.sources):
                del arrivals[join.key]
                if join.target != END:
                    scheduled.setdefault(join.target, None)

        node_ids = [t.node for t in tasks]
        saves: list[tuple[str, dict[str, Any]]] = []
        before_id: str | None = None
        if expansions:
            # C7: saved before the expansion's tasks run; the expanding node is not completed.
            before_id = self._next_cp_id()
            expanding = {o.record.task_id for o in expansions}
            kept = {o.record.task_id: self._output(o) for o in done
                    if o.record.task_id not in expanding and o.spec.effect in REPLAYED_EFFECTS}
            saves.append((before_id, {
                "step": step, "next_step": step, "tasks": list(tasks), "completed": kept,
                "node_ids": node_ids, "status": "running", "state": self.state,
                "visited": self.visited, "arrivals": self.arrivals,
            }))
        order = graph.nodes
        if len(scheduled) > 1:
            names: Any = sorted(scheduled, key=lambda n: order[n].index)
        else:
            names = scheduled
        next_tasks = [self._task(node, scheduled[node]) for node in names]
        if expansions:
            for out in expansions:
                assert out.expand is not None
                target = out.expand["node"]
                for item in out.expand["items"]:
                    next_tasks.append(self._task(target, None, item, True, before_id))
            next_tasks.sort(key=lambda t: order[t.node].index)

        if done:
            self.visited = visited = self.visited.extend([o.record.node for o in done])
        else:
            visited = self.visited
        finished = not next_tasks and not arrivals
        want = graph.every_step or (finished and (self.parent_id is not None
                                                  or self.thread_explicit)) or any(
            o.spec.checkpoint for o in done)
        step_cp: str | None = None
        if want:
            step_cp = self._next_cp_id()
            saves.append((step_cp, {
                "step": step, "next_step": step + 1, "tasks": next_tasks, "completed": {},
                "node_ids": node_ids, "status": "completed" if finished else "running",
                "state": new_state, "visited": visited, "arrivals": arrivals,
            }))
        for cid, _ in saves:
            events.append(e(CheckpointSaved, step, checkpoint_id=cid))
        self.state = new_state
        self.model = model
        self.arrivals = arrivals
        self.tasks = next_tasks
        self.completed = {}
        self.step = step + 1
        events.append(StepState(step, new_state, step_cp))
        if finished:
            events.append(e(RunEnd, step, status="completed", state=self._copy(new_state)))
        for cid, fields in saves:
            await self._save(cid, **fields)
        if finished:
            await self._finish("completed", None)
        return self._stamp(events)

    def _output(self, out: Outcome, keep: bool = False) -> TaskOutput:
        return make(TaskOutput,
            task_id=out.record.task_id, node=out.record.node, patch=out.patch, goto=out.goto,
            expand=out.expand, keep=keep, started_at=out.started_at,
            finished_at=out.finished_at,
        )

    async def _complete(self) -> list[Any]:
        # Reached only when a run resumes onto an empty batch (e.g. from a final checkpoint).
        events = [self._e(RunEnd, max(self.step - 1, 0), status="completed",
                          state=self._copy(self.state))]
        await self._finish("completed", None)
        return self._stamp(events)

    # ------------------------------------------------------------------ halts

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

    # ------------------------------------------------------------------ checkpoints

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
