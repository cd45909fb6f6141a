"""Running a superstep's tasks: inline for sync nodes, or as tasks under the scheduler."""

from __future__ import annotations

import contextvars
import operator
import random
from collections.abc import Callable, Coroutine, Generator, Sequence
from datetime import datetime
from typing import Any

import anyio
from pydantic import BaseModel

from .._graph._builder import REPLAYED_EFFECTS, CompiledGraph, NodeSpec
from .._graph._middleware import is_coroutine_function
from .._graph._node import CURRENT_TASK, NodeContext
from .._records._checkpoint import TaskRecord
from .._records._fast import _new, _set_dict, _set_extra, _set_fields_set, _set_private
from .._time._clock import VirtualClock
from .._time._entropy import ENTROPY
from .._time._rng import ScheduleRng
from .._time._sched import NODE_SLEEPER, Backend, BatchScheduler, backend
from .._time._vloop import LOOP_OWNED, loop_clock, loop_deadline_ns, stall_handlers
from .._time._wallclock import NODE_CLOCK
from ..errors import (
    GraphflowError,
    VirtualDeadlock,
)
from ._lean import LeanSteps, _outcome
from ._merge import normalize_patch
from ._outcome import Outcome
from ._run_state import RunState
from ._task import decide_edges, execute, failed, finish_inline, in_task_scope

__all__ = ["BatchRunner", "PlainBatch"]

_RENEWER = -1
"""The batch scheduler's key of the claim renewal (task keys are 0, 1, ...)."""


class _InContext:
    """Await a coroutine with each of its steps run in a copy of the current context: what a
    task of its own gives it (its context variables stay its own), without the task."""

    __slots__ = ("_coro", "_ctx")

    def __init__(self, coro: Coroutine[Any, Any, None]) -> None:
        self._coro = coro
        self._ctx = contextvars.copy_context()

    def __await__(self) -> Generator[Any, Any, None]:
        coro, run = self._coro, self._ctx.run
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = run(coro.send, value) if error is None else run(coro.throw, error)
            except StopIteration:
                return
            try:
                value, error = (yield step), None
            except BaseException as exc:  # thrown in by the loop: a cancellation, say
                value, error = None, exc


class PlainBatch:
    """A batch of sync nodes every task of which returned a plain patch (a dict or
    ``None``, nothing emitted or attached), kept as lists in declared order instead of an
    :class:`Outcome` per task: what the committer's ``commit_plain`` needs.

    ``outcomes()`` gives the outcomes the general path would have had, field for field
    (``LeanSteps.task``'s), for whatever leaves the lean commit (a conflict, a cancel).
    """

    __slots__ = ("finished", "merged", "names", "patches", "specs", "started", "targets",
                 "tasks")

    def __init__(self, tasks: list[TaskRecord], names: list[str], specs: list[NodeSpec]
                 ) -> None:
        n = len(tasks)
        self.tasks = tasks
        self.names = names
        """Each task's node (read once: a record's attributes are a model's, slow to read)."""
        self.specs = specs
        self.patches: list[dict[str, Any] | None] = [None] * n
        self.targets: list[Sequence[str]] = [()] * n
        self.started: list[datetime | None] = [None] * n
        self.finished: list[datetime | None] = [None] * n
        self.merged: dict[int, dict[str, Any]] = {}
        """The state with a task's own patch merged, for a task whose routes needed it."""

    def outcome(self, i: int) -> Outcome:
        """The outcome of the batch's task ``i`` (it ran and returned a plain patch)."""
        return Outcome(self.tasks[i], self.specs[i], "done", self.patches[i],
                       targets=self.targets[i], started_at=self.started[i],
                       finished_at=self.finished[i], merged=self.merged.get(i))

    def outcomes(self) -> list[Outcome]:
        """Every task's outcome, in declared order."""
        return [self.outcome(i) for i in range(len(self.tasks))]


class BatchRunner:
    """Runs a superstep's tasks — inline, or concurrently under the seeded scheduler — and
    collects their outcomes; it decides nothing about what the outcomes mean. The owner of
    the leg's :class:`~._run_state.Flight`."""

    def __init__(self, run: RunState) -> None:
        self.run = run
        spec = run.spec
        # A deterministic run owns its nodes' entropy (uuid, random): see _time/_entropy.
        self.owns_entropy = spec.seed is not None and isinstance(spec.clock, VirtualClock)
        self.lean: LeanSteps | None = None
        """Runs the tasks of a batch of sync nodes when the leg takes lean steps."""
        self._kinds: Backend | None = None
        """The running backend's makers, asked for once a leg (a leg runs on one backend):
        where trio is imported, asking is a sniffio look-up."""

    def _context(self, record: TaskRecord) -> NodeContext:
        """What the task of ``record`` sees as ``ctx`` in the current superstep."""
        run = self.run
        pos = run.pos
        return NodeContext(run, record, pos.step, pos.visited)

    async def run_inline(self, record: TaskRecord, spec: NodeSpec) -> Outcome:
        """Run one sync task inline (nothing can interleave with it)."""
        run = self.run
        leg, pos = run.spec, run.pos
        clock = leg.clock
        ctx = NodeContext(run, record, pos.step, pos.visited)
        model = pos.take_model()
        if model is None:
            model = leg.graph.codec.model_of(pos.state)
        out = await in_task_scope(ctx, clock, leg.wall_clock, self.owns_entropy, execute(
            leg.graph, spec, record, lambda: model, ctx, clock, clock.sleep, pos.state,
            run.hooks_of(spec.name)))
        run.flight.start_order.append(record.node)
        return out

    def _hostable(self, spec: NodeSpec) -> bool:
        """Whether a task of ``spec`` never gives the baton back before it ends: it could run
        inline (a sync node, no retries, no async hook) and its routes are sync."""
        if not self.run.runs_inline(spec):
            return False
        branches = self.run.spec.graph.branches.get(spec.name, ())
        return not any(is_coroutine_function(b.route) for b in branches)

    def _input_factory(self, parallel: bool) -> Callable[[], BaseModel]:
        run = self.run
        graph, state = run.spec.graph, run.pos.state
        model = run.pos.take_model()  # taken either way: the batch changes the state
        cached = [None if parallel else model]
        model_of = graph.codec.model_of

        def make_input() -> BaseModel:
            model = cached[0]
            if model is not None:
                cached[0] = None
                return model
            return model_of(state)

        return make_input

    async def run_plain(self) -> PlainBatch | list[Outcome] | None:
        """Run the current batch the lean way, if it is a batch of sync nodes that nothing
        replays (``invoke``'s lean leg, no events built): each task without a coroutine or
        an :class:`Outcome`, in the seeded start order. ``None``: not such a batch (nothing
        ran; ``run_batch`` runs it). A :class:`PlainBatch`: every task returned a plain
        patch. A list of outcomes (declared order): a task did not (it raised, asked, returned
        a ``Command``, ``Expand`` or awaitable, emitted...), and every task from it on ran as
        ``run_batch`` runs them — the general path takes the batch from there.
        """
        run = self.run
        pos = run.pos
        lean = self.lean
        if lean is None or pos.completed or run.spec.record_events:
            return None
        tasks = pos.tasks
        nodes = run.spec.graph.nodes
        names = list(map(_NODE, tasks))
        # run.runs_inline on a lean leg (no hooks), per node: one look for the batch
        if not _inline_nodes(run.spec.graph).issuperset(names):
            return None
        specs = list(map(nodes.__getitem__, names))
        order = list(range(len(tasks)))
        seed = run.spec.seed
        if seed is not None:
            ScheduleRng(seed, run.run_id, pos.step).shuffle(order)  # type: ignore[arg-type]
        batch = PlainBatch(tasks, names, specs)
        left = await self._plain_tasks(batch, order)
        if left is None:
            return batch
        # Task ``order[k]`` left the lean way with its outcome: the tasks before it keep
        # theirs, the ones after it run as run_batch runs them.
        k, out = left
        outcomes: list[Outcome] = [None] * len(tasks)  # type: ignore[list-item]
        for i in order[:k]:
            outcomes[i] = batch.outcome(i)
        outcomes[order[k]] = out
        model_of = run.spec.graph.codec.model_of
        for i in order[k + 1:]:
            outcomes[i] = await lean.task(tasks[i], specs[i], model_of(pos.state))
        return outcomes

    async def _plain_tasks(self, batch: PlainBatch, order: list[int]
                           ) -> tuple[int, Outcome] | None:
        """Run the tasks of ``batch`` in ``order`` while each returns a plain patch, filling
        ``batch`` in; ``(k, outcome)`` when task ``order[k]`` does not (its outcome, as
        ``LeanSteps.call`` makes it). The context each task sees is the one ``run_inline``
        gives it; the variables are set once per task and reset once per batch (a task's
        value replaces the one before it: nothing runs between them), the entropy once
        per batch (its source reads the running task's context, which the current task's
        variable holds).

        What a task of the general path gets from calls is done inline here: its input
        model (what ``StateCodec.model_of`` builds for a whole plain state), the check of
        a patch of JSON scalars and lists of them (what ``normalize_patch`` gives back for
        it; any other patch is handed to ``normalize_patch``), and a virtual clock's
        reading."""
        run = self.run
        lean = self.lean
        assert lean is not None
        pos, leg = run.pos, run.spec
        graph, clock = leg.graph, leg.clock
        now = clock.now
        # A virtual clock's reading is the one it gave last while its time has not moved
        # (what its now() checks): read without a call a task.
        virtual = clock if type(clock) is VirtualClock else None
        codec = graph.codec
        model_of = codec.model_of
        state, step, visited = pos.state, pos.step, pos.visited
        branches = graph.branches
        facts = _facts(graph)
        tasks, names, specs = batch.tasks, batch.names, batch.specs
        patches, targets = batch.patches, batch.targets
        started, finished = batch.started, batch.finished
        # ENTROPY is set once a batch, to a source reading the running task's context
        # (as the lean loop's steps: _lean._StepEntropy); a task whose node routes runs
        # through LeanSteps.call, which holds its own context there.
        source = lean.source
        # The batch's tasks all start from its state: a whole state of a plain schema gets
        # each task's model built here (as StateCodec.model_of and _fast.adopt build it: a
        # fresh copy each), written out as the lean step writes it: the call would be one of
        # a task's eight (measured: 8.0 -> 9.04 calls a task at 10,000 wide, over
        # test_lean_batch's ceiling of 9).
        parts = codec.parts
        whole = parts is not None and len(state) == parts[2]
        cls, copiers, _, every = parts if parts is not None else (BaseModel, (), 0, set())
        model = pos.take_model()  # the first task's input, if the state's model is cached
        # The end of the task before, read just now: the next task starts at it (only its
        # input is built in between, which moves no clock).
        last: datetime | None = None
        t_task: Any = None
        t_entropy: Any = None
        t_clock = NODE_CLOCK.set(clock) if leg.wall_clock else None  # type: ignore[arg-type]
        try:
            for k, i in enumerate(order):
                record = tasks[i]
                spec = specs[i]
                name = names[i]
                if model is None:
                    if whole:
                        data = dict(state)
                        for key, copy in copiers:
                            value = data[key]
                            if value is not None:
                                data[key] = copy(value)
                        model = _new(cls)
                        _set_dict(model, data)
                        _set_fields_set(model, every)
                        _set_extra(model, None)
                        _set_private(model, None)
                    else:
                        model = model_of(state)
                started_at = now() if last is None else last
                last = None
                if name in branches:  # its routes run after it: LeanSteps.call decides them
                    res = lean.call(record, spec, model, started_at)
                    model = None
                    if type(res) is not tuple:
                        return k, res if type(res) is Outcome else await res
                    patches[i], targets[i], merged, done_at = res
                    if merged is not None:
                        batch.merged[i] = merged
                    started[i] = started_at
                    finished[i] = now() if done_at is None else done_at
                    continue
                # NodeContext(run, record, step, visited), inline: its slots set as its
                # __init__ sets them, without the class call's __init__ frame (as the lean
                # step makes it).
                ctx = _new(NodeContext)
                ctx._leg = run
                ctx._record = record
                ctx.step = step
                ctx.attempt = 1
                ctx._visited = visited
                ctx._used = None
                ctx._custom = []
                ctx._rng = None
                ctx._erng = None
                ctx._artifacts = []
                ctx._tool = None
                token: Any = CURRENT_TASK.set(ctx)
                if t_task is None:
                    t_task = token
                if source is not None:  # ENTROPY holds it from the first task on
                    source.task = ctx
                    if t_entropy is None:
                        t_entropy = ENTROPY.set(source)
                used, model = model, None
                try:
                    fn = spec.fn
                    result = fn(used, ctx) if spec.arity == 2 else fn(used)
                except BaseException as exc:
                    out = _outcome(record, spec, ctx, started_at)
                    if not failed(graph, spec, out, ctx, exc, 1, clock, used):
                        raise
                    return k, out
                if (result is not None and type(result) is not dict) or ctx._custom \
                        or ctx._artifacts or ctx._tool is not None:
                    out = _outcome(record, spec, ctx, started_at)
                    return k, await finish_inline(graph, spec, out, result, ctx, clock, state,
                                                  used)
                scalars, lists, static = facts[name]
                patch: dict[str, Any] | None = None
                if result is not None:
                    # What normalize_patch gives back for a patch of JSON scalars each
                    # key's validator passes as they are, and lists of them (copied).
                    patch = {}
                    for key in result:
                        value = result[key]
                        kind = type(value)
                        if kind is not list:  # (a list is never one of the scalars)
                            if key in scalars and kind in scalars[key] \
                                    and (kind is not str or value.isascii()):
                                patch[key] = value
                                continue
                        elif key in lists:
                            passes = lists[key]
                            for item in value:
                                kind = type(item)
                                if kind not in passes or (kind is str and not item.isascii()):
                                    break
                            else:
                                patch[key] = value[:]
                                continue
                        try:  # anything else: normalize_patch checks (converts) the patch
                            patch = normalize_patch(graph, name, result)
                        except GraphflowError as exc:
                            out = _outcome(record, spec, ctx, started_at, now())
                            out.kind = "error"
                            out.error = exc
                            return k, out
                        break
                patches[i] = patch
                targets[i] = static
                started[i] = started_at
                finished[i] = last = virtual._now if virtual is not None \
                    and virtual._now_ns == virtual._ns else now()
            return None
        finally:
            if t_entropy is not None:
                ENTROPY.reset(t_entropy)
            if t_clock is not None:
                NODE_CLOCK.reset(t_clock)
            if t_task is not None:
                CURRENT_TASK.reset(t_task)

    async def run_batch(self) -> tuple[list[Outcome], bool]:
        """Run the current batch; its outcomes in declared order, and whether it timed out."""
        run = self.run
        pos, flight = run.pos, run.flight
        graph, step = run.spec.graph, pos.step
        seed = run.spec.seed
        tasks = pos.tasks
        visited = pos.visited
        nodes = graph.nodes
        specs = [nodes[record.node] for record in tasks]
        # Each task's outcome; a task that runs gets its own when it ran.
        outcomes: list[Outcome] = [None] * len(tasks)  # type: ignore[list-item]
        to_run: list[int] = []
        completed = pos.completed
        for i, record in enumerate(tasks):
            spec = specs[i]
            done = completed.get(record.task_id) if completed else None
            if done is not None and (done.keep or spec.effect in REPLAYED_EFFECTS):
                outcomes[i] = Outcome(record, spec, kind="done", patch=done.patch,
                                      goto=done.goto, expand=done.expand, replayed=True,
                                      started_at=done.started_at, finished_at=done.finished_at)
            else:
                to_run.append(i)
        timed_out = False
        runs_inline = run.runs_inline
        if to_run and all(runs_inline(specs[i]) for i in to_run):
            # Sync tasks cannot interleave: they run inline, one after the other, in the
            # seeded start order.
            order = to_run
            if len(order) > 1 and seed is not None:
                order = list(order)
                ScheduleRng(seed, run.run_id, step).shuffle(order)  # type: ignore[arg-type]
            lean = self.lean
            if lean is not None:  # invoke(): no coroutine per task, one outcome each
                model_of = graph.codec.model_of
                state = pos.state
                first = True
                for i in order:
                    model = pos.take_model() if first else None
                    first = False
                    outcomes[i] = await lean.task(tasks[i], specs[i],
                                                  model_of(state) if model is None else model)
            else:
                for i in order:
                    outcomes[i] = await self.run_inline(tasks[i], specs[i])
        elif to_run:
            for i in to_run:
                outcomes[i] = Outcome(tasks[i], specs[i])
            make_input = self._input_factory(len(tasks) > 1)
            flight.batch = outcomes
            timed_out = await self._run_concurrently(tasks, outcomes, to_run, make_input,
                                                     self._context)
            flight.batch = None
        for out in outcomes:
            if out.replayed:
                await decide_edges(graph, out.spec, out, pos.state, visited, step)
        return outcomes, timed_out

    async def _run_concurrently(
        self,
        tasks: list[TaskRecord],
        outcomes: list[Outcome],
        to_run: list[int],
        make_input: Callable[[], BaseModel],
        context: Callable[[TaskRecord], NodeContext],
    ) -> bool:
        run = self.run
        leg, progress, flight = run.spec, run.progress, run.flight
        graph, clock = leg.graph, leg.clock
        state = run.pos.state
        start_order = flight.start_order
        rng: Any
        if leg.seed is not None:
            rng = ScheduleRng(leg.seed, run.run_id, run.pos.step)
        else:
            rng = None if len(to_run) == 1 else random.Random()
        stalled: list[list[int]] = []
        sched: BatchScheduler | None = None
        kinds = self._kinds  # anyio's makers, without a backend look-up per object
        if kinds is None:
            kinds = self._kinds = backend()
        if isinstance(clock, VirtualClock):
            owned = LOOP_OWNED.get() is clock or loop_clock() is clock

            def stall(keys: list[int]) -> None:
                stalled.append(keys)
                scope.cancel()

            sched = BatchScheduler(
                clock, rng, progress.deadline_ns, on_deadline=lambda: scope.cancel(),
                on_stall=stall,
                loop_deadline=(lambda: loop_deadline_ns(clock)) if owned else None,
                kinds=kinds,
            )
        # Under the scheduler, tasks that can never give the baton back before they end (sync
        # nodes without retries, async hooks or async routes: what would run inline) take no
        # task of their own: one coroutine in the task group's body runs each when the
        # scheduler hands it the baton, in the order the seeded scheduler picks them.
        hosted = [i for i in to_run if self._hostable(outcomes[i].spec)] \
            if sched is not None and len(to_run) > 1 else []
        events: dict[int, Any] = {}
        if sched is not None:
            gone = set(hosted)
            for i in to_run:
                if i in gone:
                    sched.register_hosted(i)
                else:
                    events[i] = sched.register(i)
            if hosted:
                sched.host_event = kinds.event()  # the first turn may come at the start
        wall = leg.wall_clock and sched is not None
        claim = leg.claim
        renewing = claim is not None and claim.renewable
        renew_scope = kinds.cancel_scope()
        running = [len(to_run)]
        owns_entropy = self.owns_entropy
        take_turn = kinds.take_turn
        spawn = kinds.spawn

        async def renew() -> None:
            # SPEC §5: the claim is renewed while the run is live, on the runtime's clock.
            # Under the scheduler this task starts at the daemon's first turn, a third of the
            # ttl in, so its first renewal is due at once.
            assert claim is not None  # only a leg holding a claim renews it
            with renew_scope:
                if sched is None:
                    await claim.keep_alive(clock.sleep)
                    return
                try:
                    await claim.keep_alive(sched.sleeper(_RENEWER), sched.daemon_delay, due=True)
                except BaseException:
                    sched.drop_daemon(_RENEWER)
                    raise
                sched.finished(_RENEWER)  # the claim was lost: hand the turn on

        def leave(i: int) -> None:
            if sched is not None:
                sched.finished(i)
            running[0] -= 1
            if running[0] == 0 and (sched is None or _RENEWER in sched.spawned):
                renew_scope.cancel()  # (cancel formats the task's repr: only if it runs)

        async def run_hosted(i: int) -> None:
            # A hosted task, in a copy of the context (its own, as in a task), holding the
            # baton from its start to its end.
            assert sched is not None
            record = tasks[i]
            ctx = context(record)
            CURRENT_TASK.set(ctx)
            if owns_entropy:
                ENTROPY.set(ctx)
            NODE_SLEEPER.set(None)
            if wall:
                NODE_CLOCK.set(clock)  # type: ignore[arg-type]
            start_order.append(record.node)
            spec = outcomes[i].spec
            outcomes[i] = await execute(graph, spec, record, make_input, ctx, clock, clock.sleep,
                                        state, run.hooks_of(spec.name))

        async def host_all() -> None:
            # Runs the hosted tasks as the scheduler hands each the baton. The next turn's
            # event is made before a task ends: its end passes the baton on at once.
            assert sched is not None
            left = list(hosted)
            try:
                while left:
                    turn = sched.host_event
                    assert turn is not None
                    await take_turn(turn)
                    i = sched.host_key
                    assert i is not None
                    left.remove(i)
                    try:
                        await _InContext(run_hosted(i))
                    finally:
                        if left:
                            sched.host_event = kinds.event()
                        leave(i)
            finally:
                for i in left:  # cancelled before their turn
                    leave(i)

        async def run_one(i: int) -> None:
            record = tasks[i]
            ctx = context(record)
            CURRENT_TASK.set(ctx)
            if owns_entropy:
                ENTROPY.set(ctx)
            try:
                if sched is not None:
                    await take_turn(events[i])
                    start_order.append(record.node)
                    sleep = sched.sleeper(i)
                    NODE_SLEEPER.set(sleep)
                    if wall:
                        NODE_CLOCK.set(clock)  # type: ignore[arg-type]
                else:
                    start_order.append(record.node)
                    sleep = clock.sleep
                spec = outcomes[i].spec
                outcomes[i] = await execute(graph, spec, record, make_input, ctx, clock, sleep,
                                            state, run.hooks_of(spec.name))
            finally:
                if sched is not None:
                    # The sleeper holds this task (its owner) and the task's context holds
                    # the sleeper: a reference cycle left to the collector otherwise.
                    NODE_SLEEPER.set(None)
                leave(i)

        # Under the scheduler, the first task of the batch runs in this task, in the task
        # group's body and in a copy of the context (as its own task would): a task costs more
        # than a small node does. The others get tasks; the scheduler's baton decides who runs,
        # whichever task they are in. (The group stays for the others, and for the renewal
        # and the keeper should they start.)
        host = (None if hosted else to_run[0]) if sched is not None else None

        events_hosted = set(hosted)
        order = list(to_run)
        if sched is None and rng is not None:
            rng.shuffle(order)
        deadline = None if progress.deadline is None else progress.deadline - clock.monotonic()
        # The loop's own list: a stall of another loop (another thread) never fails this batch.
        handlers = stall_handlers() if sched is not None and sched.loop_deadline is not None \
            else None
        if handlers is not None:
            assert sched is not None
            handlers.append(sched.stall)
        # The batch's cancel scope is its task group's own (one scope entered, not two): the
        # run's deadline, a stall and a cancel request cancel it, and its cancelled_caught
        # tells a timeout apart, as an enclosing scope's did.
        try:
            # A lone exception leaves the task group as itself, as a sync node's would
            # (the except below; no context manager of its own: a generator a batch).
            async with kinds.task_group() as tg:
                scope = tg.cancel_scope  # (trio's task group makes it on entering)
                if deadline is not None:
                    scope.deadline = anyio.current_time() + max(0.0, deadline)
                flight.scope = scope
                if flight.cancel_requested:
                    scope.cancel()
                if renewing and sched is None:
                    spawn(tg, renew)
                for i in order:
                    if i != host and i not in events_hosted:
                        spawn(tg, run_one, i)
                if sched is not None:
                    # The renewal and the keeper take no task until they have work.
                    if renewing:
                        assert claim is not None
                        sched.daemon(_RENEWER, renew_scope, claim.ttl / 3,
                                     lambda: spawn(tg, renew))
                    if sched.loop_deadline is not None:
                        sched.start_keeper = lambda: spawn(tg, sched.keeper)
                    sched.start()
                if host is not None:
                    await _InContext(run_one(host))
                elif hosted:
                    await host_all()
        except BaseExceptionGroup as group_error:
            if len(group_error.exceptions) == 1:
                raise group_error.exceptions[0] from None
            raise
        finally:
            flight.scope = None
            if sched is not None:
                # Its lambda holds the scheduler: a cycle left to the collector otherwise.
                sched.start_keeper = None
            if handlers is not None:
                assert sched is not None
                handlers.remove(sched.stall)
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
        if scope.cancelled_caught and not flight.cancel_requested:
            return True
        return sched is not None and sched.timed_out


_NODE = operator.attrgetter("node")
"""A task record's node (``map`` reads a batch's at C speed)."""

_SCALARS: frozenset[type] = frozenset((int, bool, str, type(None)))
"""JSON scalars that are their own JSON form (a string only if ASCII: checked apart)."""

_Facts = tuple[dict[str, frozenset[type]], dict[str, frozenset[type]], Sequence[str]]


def _facts(graph: CompiledGraph) -> dict[str, _Facts]:
    """What ``BatchRunner._plain_tasks`` reads of each node of ``graph``, worked out once per
    graph: ``(scalars, lists, targets)`` — for each key the node may write, the scalar types
    ``normalize_patch`` keeps as they are (``scalars``) and the item types of a list it
    copies as it is (``lists``; not for a key holding a set, whose items it orders); and its
    static targets."""
    found: dict[str, _Facts] | None = graph.__dict__.get("_batch_facts")
    if found is None:
        found = graph.__dict__["_batch_facts"] = {
            name: _node_facts(graph, name) for name in graph.nodes}
    return found


def _inline_nodes(graph: CompiledGraph) -> frozenset[str]:
    """The nodes of ``graph`` a lean leg (no hooks) runs inline: sync, without retries
    (``RunState.runs_inline``'s answer there), worked out once per graph."""
    found: frozenset[str] | None = graph.__dict__.get("_batch_inline")
    if found is None:
        found = graph.__dict__["_batch_inline"] = frozenset(
            name for name, spec in graph.nodes.items()
            if not spec.is_async and spec.retry is None)
    return found


def _node_facts(graph: CompiledGraph, name: str) -> _Facts:
    """One node's entry of :func:`_facts` (``normalize_patch``'s rules: a value a checked
    key's validator would not give back unchanged, or a set's items, take its own path)."""
    codec = graph.codec
    writes = graph.nodes[name].writes
    scalars: dict[str, frozenset[type]] = {}
    lists: dict[str, frozenset[type]] = {}
    for key in graph.keys:
        if writes is not None and key not in writes:
            continue
        checked = codec.plain and key in codec.checked_on_write
        scalars[key] = _SCALARS & codec.passes[key] if checked else _SCALARS
        if key not in codec.set_keys:
            lists[key] = _SCALARS & codec.item_passes.get(key, frozenset()) if checked \
                else _SCALARS
    return scalars, lists, graph.edges.get(name, ())
