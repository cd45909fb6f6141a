"""The run loop: supersteps, halts, checkpoints and events (SPEC §1–§4, invariants C1–C10).

A :class:`Runner` is an explicit state machine, not an async generator: ``advance()`` runs
the next piece of the run (its start, one superstep, or its end) and returns that piece's
events, already in their final order. Nothing is left suspended between calls, so a consumer
may stop reading at any event without leaving a generator for the garbage collector.

The leg's state is one :class:`~._run_state.RunState`, handed to the parts that act on it:
a :class:`~._batch.BatchRunner` runs a batch's tasks (it owns the ``Flight``), a
:class:`~._commit.Committer` turns a finished batch into the next ``Position``, a
:class:`~._halts.HaltHandler` ends a leg early, and a :class:`~._writer.CheckpointWriter` /
:class:`~._writer.LegEnd` save checkpoints and end the leg (``LegEnd`` makes its
``LegOutcome``). The runner itself owns the leg's ``Progress``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Generic, TypeVar, overload

import anyio

from .._graph._builder import END, START, Expand
from .._graph._node import EdgeContext
from .._records._checkpoint import TaskRecord
from .._records._events import (
    CheckpointSaved,
    Interrupt,
    InterruptExpired,
    NodeStart,
    RunStart,
)
from .._records._json import DumpedEvents, jcopy
from .._time._clock import VirtualClock
from ..errors import (
    GraphExecutionError,
    GraphflowError,
    JoinStarved,
    SimulatedCrash,
    SuperstepLimit,
    UnknownRoute,
)
from ._batch import BatchRunner, PlainBatch
from ._commit import Committer
from ._fault import unexpected
from ._halts import HaltHandler, pause_one
from ._lean import LeanSteps, lean_leg
from ._merge import merge_patches
from ._outcome import Outcome
from ._results import LazyEvent, RunRecord, StepState
from ._run_state import LegSpec, RunState
from ._task import route_expand
from ._writer import CheckpointWriter, LegEnd

__all__ = ["Runner"]

PartT = TypeVar("PartT")


class _Part(Generic[PartT]):
    """A part of a :class:`Runner` made when first read, then kept in the runner's
    ``__dict__`` (a non-data descriptor: the kept one wins from then on).

    Not ``Runner.__getattr__``: a class with one reads every attribute through its slow
    slot, no attribute read of it specialises (~290 instructions each, ~45 a round trip of
    invoke and resume), and each method call makes a bound method.
    """

    def __init__(self, make: Callable[[Runner], PartT]) -> None:
        self.make = make
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, runner: None, owner: type) -> _Part[PartT]: ...

    @overload
    def __get__(self, runner: Runner, owner: type) -> PartT: ...

    def __get__(self, runner: Runner | None, owner: type) -> PartT | _Part[PartT]:
        if runner is None:
            return self
        part = runner.__dict__[self.name] = self.make(runner)
        return part


def _batches(runner: Runner) -> BatchRunner:
    part = BatchRunner(runner.run)
    part.lean = runner.lean
    return part


def _halts(runner: Runner) -> HaltHandler:
    return HaltHandler(runner.run, runner.writer, runner.end)


def _committer(runner: Runner) -> Committer:
    return Committer(runner.run, runner.writer, runner.end, runner.halts)


class Runner:
    """One leg of a run: from its start (or a resume) to its end or its next halt."""

    batches = _Part(_batches)
    """Runs the batches (made when first used, as are :attr:`halts` and :attr:`committer`:
    a leg of lean steps may need none of them)."""
    halts = _Part(_halts)
    committer = _Part(_committer)
    run: RunState
    writer: CheckpointWriter
    end: LegEnd
    lean: LeanSteps | None

    def __init__(
        self,
        run: RunState,
        release: Callable[[], Awaitable[None]] | None,
        on_done: Callable[[], None] | None,
    ) -> None:
        self.run = run
        self.writer = CheckpointWriter(run)
        self.end = LegEnd(run, release, on_done)
        self.lean = LeanSteps(
            run, self.writer, self.end, self._persist,
            self._send_step if run.spec.features.sent_commits else None) \
            if lean_leg(run) else None
        """Runs the leg's plain one-task supersteps (``invoke`` on the in-memory store)."""
        self._quiet_since: datetime | None = None
        """When the leg began on a virtual clock, if nothing that could move it ran since
        (set by :meth:`_begin` for the lean step's start)."""
        self._committed_record: dict[str, Any] | None = None
        """The run record this leg's last commit wrote (a step that does not change it does
        not send it again)."""
        self._committed_from: tuple[Any, ...] | None = None
        """The :class:`RunRecord`'s fields :attr:`_committed_record` was made of: while
        they are the same objects, the record is not made again to be compared."""

    # What the stream and the runtime read of a leg.
    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.run.run_id

    @property
    def done(self) -> bool:
        """Whether the leg has ended."""
        return self.run.outcome is not None

    @property
    def interrupts(self) -> tuple[Interrupt, ...]:
        """The interrupts the leg paused at."""
        outcome = self.run.outcome
        return () if outcome is None else outcome.interrupts

    @property
    def status(self) -> str | None:
        """How the leg ended (``None`` while it runs)."""
        outcome = self.run.outcome
        return None if outcome is None else outcome.status

    def cancel(self) -> None:
        """Ask the run to stop: the current batch is cancelled and joined."""
        self.run.flight.cancel()

    async def advance(self) -> list[Any]:
        """Run the next piece of the run and return its events (and step markers)."""
        run = self.run
        if run.outcome is not None:
            return []
        leg = run.spec.leg
        if leg is None:
            return await self._advance()
        try:
            items = await self._advance()
        except BaseException as exc:
            lean = self.lean
            if lean is not None and lean.recorded:  # plain steps committed before it raised
                leg._note(lean.take_recorded(), run.pos.visited)
            leg.error = exc
            leg._reached(run.pos.visited)
            raise
        leg._note(items, run.pos.visited)
        return items

    async def _advance(self) -> list[Any]:
        run = self.run
        spec = run.spec
        try:
            claim = spec.claim
            if claim is not None and claim.due():  # no coroutine per piece when not due
                await claim.renew_if_due()
            if not run.progress.started:
                items = await self._begin()
                if not items and self.lean is not None and not spec.record_events \
                        and not spec.stepping and run.outcome is None:
                    # invoke(): nothing to hand out, no time passed (no node ran): the first
                    # superstep is the same piece, at the time the leg started (a virtual
                    # clock moved by nothing since)
                    items = await self._superstep(self._quiet_since)
            else:
                items = await self._superstep()
            if spec.durable:
                await self._persist(items)
            if run.outcome is not None:
                if claim is None or not claim.released:  # (a quick claim went as it ended)
                    await self.end.release()
            elif spec.cancel_at is not None:
                self._cancel_at(items)
            return items
        except anyio.get_cancelled_exc_class():
            # The consumer's scope was cancelled: stop the run as RunHandle.cancel() does,
            # keeping every task that finished (C9), then let the cancellation go on.
            batch = run.flight.take()
            with anyio.CancelScope(shield=True):
                await self._stop_cancelled(batch)
                await self._after_error(None)
            raise
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt) and spec.stepping:
                run.flight.take()  # seed 004: interrupting the thread driving a step
                with anyio.CancelScope(shield=True):
                    await self._stop_cancelled(None)
                    await self._after_error(None)
                raise
            fault = unexpected(exc, run.clock, run.run_id, run.thread_id, admitted=True)
            if fault is not None:  # seed 004: ended where it was, nothing more written
                run.progress.pending = []
                self.end.fault(fault)
                await self.end.release()
                raise fault from exc
            if run.outcome is None:
                await self.end.finish("failed", exc)
            with anyio.CancelScope(shield=True):
                await self._after_error(exc)
            raise

    def _cancel_at(self, items: list[Any]) -> None:
        """``cancel_at=``: once the leg has made an event that matches, it is cancelled as
        ``RunHandle.cancel()`` would cancel it from the code reading that event. A piece's
        events are made together (a step's once its batch ran and its checkpoint is saved,
        C4/C5), so the rest of the piece is still delivered; the next step does not start
        (``_superstep`` stops the leg: status ``cancelled``, resumable, C9)."""
        test = self.run.spec.cancel_at
        assert test is not None
        # A recording leg's events may be unbuilt (``LazyEvent``): tested as the events they
        # stand for (``invoke(cancel_at=...)`` on the testing runtime ran to the end before).
        if any(type(item) is not StepState
               and test(item.build() if type(item) is LazyEvent else item) for item in items):
            self.run.flight.cancel()

    async def _stop_cancelled(self, batch: list[Outcome] | None) -> None:
        """End a cancelled leg: the tasks that finished keep their results (C9); a step keeps
        nothing of its cancelled superstep (seed 004), not even its events."""
        run = self.run
        if run.outcome is not None or not run.progress.started:
            return
        if run.spec.stepping:
            batch = []
        if batch is not None:
            run.flight.cancel()
            items = await self.halts.stop(batch, timed_out=False)
            if run.spec.durable:
                await self._persist(items)

    async def _after_error(self, exc: BaseException | None) -> None:
        """A piece ended in an exception: on a durable store, commit what the leg still holds
        (the checkpoint a halt saved before an edge function threw, C7) with its run record,
        then release the claim. A commit that fails here changes nothing more."""
        run = self.run
        if run.spec.deferred and not isinstance(exc, SimulatedCrash):
            with contextlib.suppress(Exception):
                await self._persist([])
        if run.outcome is not None:
            try:
                await self.end.release()
            except SimulatedCrash:
                if not isinstance(exc, SimulatedCrash):
                    raise

    async def close(self) -> None:
        """Stop a run whose consumer left early; it stays resumable from its last checkpoint."""
        if self.run.outcome is None:
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
        spec, progress = run.spec, run.progress
        store: Any = spec.store
        # A lean step's events come unbuilt (``LegSpec.store_only``): built to be dumped;
        # or dumped already, when the lean step commits its step itself (see _stored).
        events = items if type(items) is DumpedEvents else DumpedEvents(
            (e.build() if type(e) is LazyEvent else e).model_dump(mode="json")
            for e in items if type(e) is not StepState)
        run_record = spec.record
        record = run_record is not None and (
            not progress.started or run.outcome is not None or progress.pending
            or (events and events[0]["type"] == "run_start"))
        if not spec.deferred:
            if events:
                await store.record_events(run.run_id, events)
            if record:
                assert run_record is not None
                await store.record_run(run_record.as_dict())
            return
        data = source = None
        if record and run_record is not None:
            data, source = self._record_change(run_record)
        if not (progress.pending or events or data):
            return
        checkpoints, progress.pending = progress.pending, []
        claim = spec.claim
        assert claim is not None  # a deferred leg holds a fenced claim
        try:
            if run.outcome is not None and spec.features.folded_claims \
                    and not claim.released:
                await self._commit_releasing(checkpoints, events, data)
            else:
                await store.commit(run.thread_id, claim.token, run_id=run.run_id,
                                   checkpoints=checkpoints, events=events, run=data)
        except Exception as exc:
            if run.outcome is not None:
                self.end.refused(exc)
            raise
        if data is not None:
            self._committed_record = data
            self._committed_from = source

    def _record_change(self, r: RunRecord) -> tuple[dict[str, Any] | None, tuple[Any, ...]]:
        """The run record ``r`` as a commit writes it, ``None`` when the leg committed this
        record already, and the fields it was made of (see :attr:`_committed_from`)."""
        source = (r.run_id, r.thread_id, r.graph_id, r.revision, r.status, r.started_at,
                  r.updated_at, r.tenant_id, r.error, r.legs)
        known = self._committed_from
        # Equal fields, the same datetimes: the same record (no as_dict(), no isoformat).
        if known is not None and source == known and source[5] is known[5] \
                and source[6] is known[6]:
            return None, source
        data = r.as_dict()
        if data == self._committed_record:
            self._committed_from = source
            return None, source  # the leg committed this record already
        return data, source

    def _send_step(self, events: DumpedEvents) -> Any:
        """:meth:`_persist` of a lean step's ``events`` (with its pending checkpoint) on a
        store that sends a plain step's commit without waiting for its answer
        (``StoreFeatures.sent_commits``): the store's commit, made ready (its ``send()``
        sends it, its ``settled()`` finishes it; the lean loop calls both, and empties the
        pending checkpoints once sent); ``None`` when it is not such a commit (the run
        record changed, or the store declined): :meth:`_persist` it."""
        run = self.run
        spec, progress = run.spec, run.progress
        run_record = spec.record
        if run.outcome is not None or not spec.deferred or len(progress.pending) != 1 or (
                run_record is not None and self._record_change(run_record)[0] is not None):
            return None
        claim = spec.claim
        assert claim is not None  # a deferred leg holds a fenced claim
        store: Any = spec.store  # declares sent_commits
        return store.commit_sent(run.thread_id, claim.token, run_id=run.run_id,
                                 checkpoints=progress.pending, events=events)

    async def _commit_releasing(self, checkpoints: list[Any], events: Any,
                                data: dict[str, Any] | None) -> None:
        """The ended leg's last commit, which also releases its claim
        (``StoreFeatures.folded_claims``): once it wrote, the claim is released and the leg's
        release does nothing; a commit that raised released nothing (the leg's release, or
        :meth:`_after_error`'s, does)."""
        run = self.run
        claim = run.spec.claim
        assert claim is not None
        store: Any = run.spec.store
        await store.commit(run.thread_id, claim.token, run_id=run.run_id,
                           checkpoints=checkpoints, events=events, run=data, release=True)
        claim.released = True
        self.end.released()

    async def _begin(self) -> list[Any]:
        run = self.run
        spec, progress, pos, numbers = run.spec, run.progress, run.pos, run.numbers
        clock, graph = spec.clock, spec.graph
        timeout = None if spec.timeout is None and spec.cancel_after is None \
            else _deadline(spec)
        progress.started = True
        progress.started_at = clock.now()
        if timeout is not None:
            if isinstance(clock, VirtualClock):
                progress.deadline_ns = clock.elapsed_ns + round(timeout * 1e9)
            else:
                progress.deadline = clock.monotonic() + timeout
        entry = graph.entry
        if entry is not None and not spec.record_events and spec.resumed_from is None \
                and not spec.expired:
            # invoke()'s fresh run from static entry edges: numbered as below (run_start, the
            # entry's tasks, then the checkpoint and its checkpoint_saved when it saves),
            # nothing built but the tasks and the checkpoint.
            empty = not entry
            saves = graph.every_step or (empty and spec.thread_explicit)
            tasks, cid, pairs = numbers.plain_step(2 if saves else 1, entry, saves)
            pos.tasks.extend(tasks)
            if cid is not None:
                lean = self.lean
                sink = None if lean is None else lean.sink()
                sunk = False
                if sink is not None:  # the in-memory store's save of a lean step's checkpoint
                    log, n = pos.visited.snapshot()
                    answers = run.answers
                    virtual = type(clock) is VirtualClock  # (nothing moved it since)
                    # NotImplemented: the sink declined (a FaultyStore given a rule since it
                    # was fetched): the general save below.
                    sunk = sink(cid, None, -1, numbers.parent_id,
                                progress.started_at if virtual else clock.now(), pos.state,
                                "completed" if empty else "running", pairs, log, n,
                                pos.arrivals, jcopy(answers) if answers else None,
                                numbers.seq, numbers.cp_counter, numbers.task_counter) \
                        is not NotImplemented
                    if sunk:
                        numbers.saved(cid)
                        if virtual:
                            self._quiet_since = progress.started_at
                if not sunk:
                    await self.writer.save(cid, step=-1, next_step=pos.step, tasks=pos.tasks,
                                           node_ids=[],
                                           status="completed" if empty else "running")
            elif type(clock) is VirtualClock:
                self._quiet_since = progress.started_at
            return []
        if not spec.record_events and spec.resumed_from is not None and not spec.expired:
            numbers.skip(1)  # invoke()'s resumed leg: run_start numbered, not built
            if type(clock) is VirtualClock:
                self._quiet_since = progress.started_at
            return []
        events: list[Any] = [numbers.event(
            RunStart, pos.step, graph_id=graph.graph_id, revision=graph.revision,
            thread_id=run.thread_id, resumed_from=spec.resumed_from,
        )]
        for question, action, routed_to, answer in spec.expired:
            events.append(numbers.event(
                InterruptExpired, pos.step, node=question.node, task_id=question.task_id,
                key=question.key, deadline=question.deadline, action=action,
                routed_to=routed_to, answer=answer))
        if spec.resumed_from is None:  # a fresh run: schedule the entry
            await self._schedule_entry()
            # A run whose entry schedules nothing (START routes straight to END) is complete
            # at once: its checkpoint says so, or the thread would look mid-execution.
            empty = not pos.tasks
            if graph.every_step or (empty and spec.thread_explicit):
                cid = numbers.next_checkpoint_id()
                events.append(numbers.event(CheckpointSaved, pos.step, checkpoint_id=cid))
                await self.writer.save(cid, step=-1, next_step=pos.step, tasks=pos.tasks,
                                       node_ids=[], status="completed" if empty else "running")
        return run.stamp(events)

    async def _schedule_entry(self) -> None:
        """Schedule a fresh run's first tasks (into its empty ``Position.tasks``)."""
        run = self.run
        pos, numbers = run.pos, run.numbers
        tasks = pos.tasks
        graph = run.spec.graph
        targets = list(graph.edges.get(START, ()))
        expansions: list[dict[str, Any]] = []
        for branch in graph.branches.get(START, ()):
            view = pos.model or graph.codec.model_of(pos.state)
            picked = branch.route(view) if branch.arity == 1 else branch.route(
                view, EdgeContext(START, (), pos.step))
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
            tasks.append(numbers.new_task(node))
        for expansion in expansions:
            for item in expansion["items"]:
                tasks.append(numbers.new_task(expansion["node"], None, item, True))
        tasks.sort(key=lambda t: order[t.node].index)

    async def _superstep(self, at: datetime | None = None) -> list[Any]:
        """The next superstep; ``at``: the leg's virtual clock's time, read with nothing run
        since (the lean step's start)."""
        run = self.run
        spec, pos, progress = run.spec, run.pos, run.progress
        graph = spec.graph
        tasks = pos.tasks
        if not tasks:
            if pos.arrivals:
                join, arrived = next(iter(pos.arrivals.items()))
                j = next(j for j in graph.joins if j.key == join)
                missing = [s for s in j.sources if s not in arrived]
                return await self.halts.fail_run(JoinStarved(j.target, missing, arrived))
            return await self.halts.complete()
        budget = spec.max_supersteps
        if budget is not None and progress.supersteps >= budget:
            return await self.halts.fail_run(
                SuperstepLimit(budget, [t.node for t in tasks])
            )
        if (progress.deadline_ns is not None or progress.deadline is not None) \
                and self._timed_out_now():
            return await self._after_batch([], True)
        if run.flight.cancel_requested:
            return await self.halts.stop([], timed_out=False)
        before = spec.break_before
        if before:
            stopping = [t.node for t in tasks
                        if t.node in before and t.task_id not in pos.passed]
            if stopping:
                return await self.halts.pause_before(list(dict.fromkeys(stopping)))
        progress.supersteps += 1
        if spec.durable:
            await self._record_in_flight(tasks)
        if not pos.completed and len(tasks) == 1:
            node = graph.nodes[tasks[0].node]
            # run.runs_inline(node), without its call when the leg has no hooks
            if (not node.is_async and node.retry is None) if spec.hooks is None \
                    else run.runs_inline(node):
                # The common step: one sync node, run inline.
                if self.lean is not None:  # invoke(): it and the plain steps after it
                    lean = await self.lean.run_from(tasks[0], node,
                                                    None if spec.durable else at)
                    if lean is None:
                        return self.lean.take_recorded() if self.lean.recorded else []
                    out = lean
                else:
                    out = await self.batches.run_inline(tasks[0], node)
                if out.artifacts:
                    await self._store_artifacts([out])
                if out.kind == "done" and out.expand is None and not spec.record_events \
                        and not spec.break_after:
                    items = await self.committer.commit_one(out)  # invoke(): no events wanted
                else:
                    items = await self._after_batch([out], False)
                steps = self.lean
                if steps is not None and steps.recorded:
                    # A recording leg's plain steps run before this one: their events first.
                    return steps.take_recorded() + items
                return items
        if self.lean is not None:  # invoke(): a batch of sync nodes, the lean way if plain
            ran = await self.batches.run_plain()
            if type(ran) is PlainBatch and not run.flight.cancel_requested:
                return await self.committer.commit_plain(ran)
            if ran is not None:
                outcomes = ran.outcomes() if isinstance(ran, PlainBatch) else ran
                if any(o.artifacts for o in outcomes):
                    await self._store_artifacts(outcomes)
                return await self._after_batch(outcomes, False)
        outcomes, timed_out = await self.batches.run_batch()
        if any(o.artifacts for o in outcomes):
            await self._store_artifacts(outcomes)
        return await self._after_batch(outcomes, timed_out)

    async def _record_in_flight(self, tasks: list[TaskRecord]) -> None:
        """Seed 002: "When a side-effect outcome is unknown, inspect Events before resuming."

        Before a batch runs, a durable store records a ``node_start`` for each of its
        ``external`` tasks that will really run, at the numbers the batch's own events take
        next. The batch's events overwrite them; if the batch never reports (the process died,
        a checkpoint save was refused), the log ends with the external node started and never
        ended: its outcome is unknown.
        """
        run = self.run
        graph = run.spec.graph
        completed = run.pos.completed
        flying = [t for t in tasks if graph.nodes[t.node].effect == "external"
                  and t.task_id not in completed]
        if not flying:
            return
        now = run.clock.now()
        seq, step = run.numbers.seq, run.pos.step
        events = [NodeStart(seq=seq + i, run_id=run.run_id, step=step, time=now,
                            node=t.node, task_id=t.task_id).model_dump(mode="json")
                  for i, t in enumerate(flying)]
        store: Any = run.spec.store
        await store.record_events(run.run_id, events)

    async def _store_artifacts(self, outcomes: list[Outcome]) -> None:
        """Store what the batch's nodes attached (in declared order), whatever their outcome."""
        run = self.run
        store: Any = run.spec.store
        for out in outcomes:
            for name, data, media_type in out.artifacts:
                if not run.spec.features.artifacts:
                    raise GraphExecutionError(
                        f"node {out.record.node!r} attached artifact {name!r}, but the store "
                        f"{type(store).__name__} keeps no artifacts (its features say "
                        "artifacts=False); use a store that does, such as "
                        "InMemoryCheckpointStore or SQLiteCheckpointStore")
                await store.put_artifact(run.run_id, name, data, media_type)
            out.artifacts = []

    async def _after_batch(self, outcomes: list[Outcome], timed_out: bool) -> list[Any]:
        if timed_out and _cancels(self.run.spec):  # the deadline was cancel_after's
            return await self.halts.stop(outcomes, timed_out=False)
        if timed_out or self.run.flight.cancel_requested:
            return await self.halts.stop(outcomes, timed_out=timed_out)
        if len(outcomes) == 1 and outcomes[0].kind == "interrupt":
            # one task asking: nothing to merge, no edge error (what follows decides so)
            only = outcomes[0]
            numbers = self.run.numbers
            if (not numbers.record_events or numbers.lazy) and only.interrupt is not None:
                # invoke(), on a bare or a recording runtime
                return await pause_one(self.run, self.writer, self.end, only)
            return await self.halts.halt(outcomes, outcomes)
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
        graph = self.run.spec.graph
        patches = [(o.record.node, o.patch) for o in outcomes if o.kind == "done" and o.patch]
        if len(patches) < 2:
            return None
        try:
            merged = merge_patches(graph, self.run.pos.state, patches, parallel=True)
            graph.codec.validate(dict(merged), patches)
        except GraphflowError as exc:
            return exc
        return None

    def _timed_out_now(self) -> bool:
        progress, clock = self.run.progress, self.run.clock
        if progress.deadline_ns is not None:
            assert isinstance(clock, VirtualClock)
            return clock.elapsed_ns >= progress.deadline_ns
        if progress.deadline is not None:
            return clock.monotonic() >= progress.deadline
        return False


def _deadline(spec: LegSpec) -> float | None:
    """Seconds into the leg at which it stops: its ``timeout`` or its ``cancel_after``,
    whichever comes first (``None``: neither)."""
    if _cancels(spec):
        return spec.cancel_after
    return spec.timeout if spec.timeout != float("inf") else None


def _cancels(spec: LegSpec) -> bool:
    """Whether the leg's deadline is its ``cancel_after`` (a cancel), not its timeout."""
    return spec.cancel_after is not None and (
        spec.timeout is None or spec.cancel_after < spec.timeout)
