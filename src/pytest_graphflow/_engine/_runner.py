"""The run loop: supersteps, halts, checkpoints and events (SPEC §1–§4, invariants C1–C10).

A :class:`Runner` is an explicit state machine, not an async generator: ``advance()`` runs
the next piece of the run (its start, one superstep, or its end) and returns that piece's
events, already in their final order. Nothing is left suspended between calls, so a consumer
may stop reading at any event without leaving a generator for the garbage collector.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import anyio
from pydantic import BaseModel

from .._graph._builder import END, REPLAYED_EFFECTS, CompiledGraph, Join
from .._graph._node import EdgeContext, Visited
from .._records._checkpoint import TaskOutput, TaskRecord
from .._records._events import (
    CheckpointSaved,
    EdgeTransition,
    Interrupt,
    RunEnd,
    RunStart,
)
from .._stores._memory import InMemoryCheckpointStore
from .._stores._protocol import CheckpointStore
from .._time._clock import Clock, VirtualClock
from ..errors import (
    GraphflowError,
    JoinStarved,
    SuperstepLimit,
)
from ._batch import BatchRunner
from ._halts import HaltRunner
from ._merge import merge_patches, validate_state
from ._runner_base import StepState
from ._task import Outcome

__all__ = ["Runner", "StepState"]


class Runner(BatchRunner, HaltRunner):
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
        self.leg: Any = None
        self._durable = bool(getattr(store, "records_events", False))
        self.record_events = record_events or self._durable
        self._adopt = store._adopt_fields if type(store) is InMemoryCheckpointStore else None
        self._batch: list[Outcome] | None = None
        self.thread_explicit = False
        self.start_order: list[str] = []

    def cancel(self) -> None:
        """Ask the run to stop: the current batch is cancelled and joined."""
        self.cancel_requested = True
        if self._scope is not None:
            self._scope.cancel()

    async def advance(self) -> list[Any]:
        """Run the next piece of the run and return its events (and step markers)."""
        if self.done:
            return []
        leg = self.leg
        if leg is None:
            return await self._advance()
        try:
            items = await self._advance()
        except BaseException as exc:
            leg.error = exc
            raise
        finally:
            leg.visited = list(self.visited)
        leg.events.extend(i for i in items if type(i) is not StepState)
        return items

    async def _advance(self) -> list[Any]:
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
        from .._graph._builder import START

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
        if not self.completed and len(tasks) == 1:
            spec = graph.nodes[tasks[0].node]
            if not spec.is_async and spec.retry is None:
                # The common step: one sync node, run inline.
                out = await self._run_inline(tasks[0], spec)
                if out.kind == "done" and out.expand is None and not self.record_events:
                    return await self._commit_one(out)  # invoke(): no events wanted
                return await self._after_batch([out], False)
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

    async def _commit_one(self, out: Outcome) -> list[Any]:
        """``_commit`` for one completed task when no events are recorded (hot path).

        It keeps exactly the numbering of the general path: ``seq`` advances by the events
        that path would have built.
        """
        graph, step = self.graph, self.step
        record = out.record
        node = record.node
        patch = out.patch
        codec = graph.codec
        model: BaseModel | None = None
        if not patch:
            new_state = self.state
        elif out.merged is not None:
            new_state = out.merged  # merged and checked already, to decide its branches
        elif codec.plain and not graph.reducers.keys() & patch.keys():
            # Plain writes, each already checked as the node wrote it: nothing left to do.
            new_state = {**self.state, **patch}
        else:
            patches = [(node, patch)]
            try:
                new_state = merge_patches(graph, self.state, patches, parallel=False)
                new_state, model = codec.validate(new_state, patches)
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

    async def _commit(self, outcomes: list[Outcome]) -> list[Any]:
        assert self.tasks is not None
        graph, step = self.graph, self.step
        tasks = self.tasks
        if len(outcomes) == 1:
            done = outcomes if outcomes[0].kind == "done" else []
        else:
            done = [o for o in outcomes if o.kind == "done"]
        patches = [(o.record.node, o.patch) for o in done]
        model: BaseModel | None = None
        if len(tasks) == 1 and done and done[0].merged is not None:
            new_state = done[0].merged  # merged and checked already, to decide its branches
        else:
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
