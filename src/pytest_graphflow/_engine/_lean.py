"""The lean step: the default path's common superstep, one sync task, run and committed
at once (``invoke``, no events wanted, no breakpoint after, no hooks).

A chain of such steps runs in one call, without the per-step objects only the rare cases
need: no :class:`~._outcome.Outcome`, no coroutine per task, the patch merged and the
checkpoint's fields handed to the store in place. Whatever is not the plain case — the node
raised or returned something other than a dict (a ``Command``, an ``Expand``, an exception,
an awaitable), emitted, attached, used a tool, a patch that needs a reducer or the schema's
validators, a join, a route that expands — leaves the lean step with the task's
:class:`Outcome`, built then, and the general path (``Runner._superstep``'s tail: the
committer or the halt handler) takes it from exactly where the general ``execute`` would
have been. Between steps the loop checks what ``Runner._advance`` and ``_superstep`` check
before a superstep (the claim's renewal, the superstep budget, a deadline, a cancel, a
breakpoint before, the shape of the next batch) and hands the next step back to them when
any is not plain.

``tests/runtime/test_lean_step.py`` holds the lean step to the general one: the same
results, checkpoints and numbering on graphs that leave it at every point.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from .._graph._builder import END, Branch, CompiledGraph, NodeSpec
from .._graph._node import CURRENT_TASK, EdgeContext, NodeContext, Visited
from .._records._checkpoint import Checkpoint, TaskRecord
from .._records._fast import (
    _new,
    _set_dict,
    _set_extra,
    _set_fields_set,
    _set_private,
    every_field,
)
from .._records._json import jcopy
from .._time._clock import _REAL, RealClock, VirtualClock
from .._time._entropy import ENTROPY
from .._time._rng import EntropyStream
from .._time._wallclock import NODE_CLOCK
from ..errors import GraphflowError
from ._lazy import lean_step_events
from ._merge import merge_patches, normalize_patch
from ._outcome import Outcome
from ._run_state import _TASK_FIELDS, RunState
from ._stored import StepTimes, stored_step_events
from ._task import _pick, failed, finish_inline, in_task_scope
from ._writer import CheckpointWriter, LegEnd

__all__ = ["LeanSteps", "lean_leg"]

_UNASKED: Any = object()
"""``LeanSteps.sink`` not asked of the store yet."""

_ROUTE_KEYS = (str, int, bool)
"""Types of a route's pick looked up in a branch's mapping without ``_pick``."""

_TASK_TEMPLATE: dict[str, Any] = {"task_id": None, "node": None, "item": None,
                                  "has_item": False, "checkpoint_id_before": None,
                                  "failure": None}
"""A plain task's fields (``Numbering.new_task``'s, in its order): the lean step copies it
and sets the id and the node."""


class _PlainTask:
    """The next step's task as the lean loop holds it while the in-memory store's sink
    saves its steps (the store takes the tasks as ``(task_id, node)`` pairs): a plain task,
    its id and node, the other fields of :class:`TaskRecord` the class's (a plain task's
    values), read as the record's are read (the node's context reads them, ``ctx.task_id``,
    ``ctx.item``...). Without the pydantic model's four slot writes and its fields' dict,
    about a tenth of a chain step's instructions.

    It never leaves the loop: a task that goes on to the general path, the leg's tasks when
    the loop ends (whatever ends it), and the tasks of a save the sink did not take are made
    the :class:`TaskRecord` the loop would have made (:func:`_task_record`, :func:`_settled`,
    :func:`_settle`); ``tests/runtime/test_lean_plain_task.py`` holds each exit to the
    general path."""

    __slots__ = ("node", "task_id")
    node: str
    task_id: str
    item: Any = None
    has_item: bool = False
    checkpoint_id_before: str | None = None
    failure: dict[str, Any] | None = None


class _StepEntropy:
    """What :data:`ENTROPY` holds while a lean loop runs its plain steps (set once a loop,
    not once a step): an :class:`~.._time._entropy.EntropySource` whose stream is the
    running task's, read from :data:`CURRENT_TASK` (which the loop sets each step anyway).
    A context a node copies (``contextvars.copy_context``, ``loop.call_soon``, a thread or
    a task started with its context) copies both variables, so the copy keeps drawing from
    its own task's stream, whenever it runs: as when :data:`ENTROPY` held the task's context.

    ``task`` (written each step) answers when :data:`CURRENT_TASK` holds no task of this
    loop's leg: a runtime that does not own entropy run inside a node (its tasks draw from
    the outer node's stream, as before). A step whose node has routes holds its own context
    in :data:`ENTROPY` instead (its edge functions run with :data:`CURRENT_TASK` unset and
    draw from the task's stream)."""

    __slots__ = ("clock", "run", "task")

    def __init__(self, run: RunState) -> None:
        self.run = run
        self.clock = run.clock
        self.task: Any = None  # the running task's context (the loop sets it first)

    def entropy_rng(self) -> EntropyStream:
        """The running task's owned stream."""
        task = CURRENT_TASK.get()
        if task is None or task._leg is not self.run:
            task = self.task
        return task.entropy_rng()


def _task_record(task_id: str, node: str) -> TaskRecord:
    """A plain task's record, as ``Numbering.new_task`` makes it (its fields copied from
    :data:`_TASK_TEMPLATE`, in its order)."""
    task = _new(TaskRecord)
    data = dict(_TASK_TEMPLATE)
    data["task_id"] = task_id
    data["node"] = node
    _set_dict(task, data)
    _set_fields_set(task, _TASK_FIELDS)
    _set_extra(task, None)
    _set_private(task, None)
    return task


def _settle(pos: Any) -> None:
    """The leg's tasks (``pos.tasks``) as :class:`TaskRecord` objects, each
    :class:`_PlainTask` among them made one (a step's tasks are all one or the other: the
    callers look at the first)."""
    pos.tasks = [_task_record(t.task_id, t.node) if type(t) is _PlainTask else t
                 for t in pos.tasks]


def _settled(run: Any, record: Any) -> TaskRecord:
    """``record``, the running step's task, as a :class:`TaskRecord` (made from it when it
    is a :class:`_PlainTask`, and put in its place among the leg's tasks): for an outcome
    the general path takes."""
    if type(record) is not _PlainTask:
        return record  # type: ignore[no-any-return]
    pos = run.pos
    made = _task_record(record.task_id, record.node)
    tasks = pos.tasks
    if tasks[0] is record and tasks[-1] is record:  # the step's lone task (as ever)
        pos.tasks = [made]
    else:
        pos.tasks = [made if t is record else t for t in tasks]
        _settle(pos)
    return made


def lean_leg(run: RunState) -> bool:
    """Whether the leg's single-task supersteps may take the lean step: nobody reads its
    events (``invoke``), no breakpoint after a node, no middleware or guardrails, and a
    store with the fast save (the in-memory store) — or a store that commits each step's
    checkpoint with its events (SQLite: one step a piece, its events unbuilt until the
    runner dumps them for the commit)."""
    spec = run.spec
    return ((not spec.record_events or run.numbers.lazy) and not spec.break_after
            and spec.hooks is None and spec.features.fields_save) or (
                spec.store_only and not spec.break_after and spec.hooks is None)


class LeanSteps:
    """Runs a leg's plain single-task supersteps one after the other, and the tasks of its
    batches of sync nodes (see the module)."""

    def __init__(self, run: RunState, writer: CheckpointWriter, end: LegEnd,
                 persist: Callable[[list[Any]], Awaitable[None]] | None = None,
                 send: Callable[[Any], Any] | None = None) -> None:
        self.run = run
        self.writer = writer
        self.end = end
        spec = run.spec
        clock = spec.clock
        self.owns_entropy = spec.seed is not None and (
            type(clock) is VirtualClock or isinstance(clock, VirtualClock))
        self.source: _StepEntropy | None = None
        """What :data:`ENTROPY` holds while the leg's lean loops and batches run (when the
        leg owns entropy): one a leg."""
        if self.owns_entropy:
            self.source = _StepEntropy(run)
        self.recorded: list[Any] | None = [] if run.numbers.lazy or spec.store_only else None
        """A recording leg's unbuilt events of the plain steps run in this piece (the runner
        hands them to the recording with the piece's own, first, or when the piece raises);
        on a store that commits a step's events with its checkpoint (SQLite) under a
        recording leg, the events of the step just run (one step a piece)."""
        self.persist = persist if spec.store_only and spec.leg is None else None
        """On a store that commits a step's events with its checkpoint, when nobody else
        reads them (no recording leg): the runner's commit of a piece
        (``Runner._persist``), which each lean step calls with its dumped events
        (:mod:`._stored`) before it goes on to the next."""
        self.send = send if self.persist is not None else None
        """On a store that sends a plain step's commit without waiting for its answer
        (``StoreFeatures.sent_commits``): the runner's send of a step
        (``Runner._send_step``), used when the next step's node is ``pure``: that node runs
        while the commit is on the wire, and its step is undone if the commit fails."""
        self._sink_fn: Any = _UNASKED
        """The store's save of a lean step's checkpoint, once asked (:meth:`sink`)."""

    def take_recorded(self) -> list[Any]:
        """The unbuilt events of the steps run since the last call (none unless recorded)."""
        recorded = self.recorded
        if not recorded:
            return []
        self.recorded = []
        return recorded

    def call(self, record: TaskRecord, spec: NodeSpec, model: BaseModel,
             started_at: datetime) -> Any:
        """Run the task of ``record`` (a sync node without retries; the run's position is
        its batch's) on ``model``, started at ``started_at``, with its context set as
        ``BatchRunner.run_inline`` sets it.

        Returns ``(patch, targets, merged, done_at)`` for a plain result: its checked patch,
        its unique targets, the state with the patch merged when a route needed it, and the
        node's end when the routes ran after it (else ``None``: nothing ran since). Else the
        task's :class:`Outcome` as ``execute`` makes it, or a coroutine that gives it (the
        rest of the task awaits something).
        """
        run = self.run
        pos = run.pos
        leg = run.spec
        clock = leg.clock
        step, visited = pos.step, pos.visited
        ctx = NodeContext(run, record, step, visited)
        t1 = CURRENT_TASK.set(ctx)
        t2 = NODE_CLOCK.set(clock) if leg.wall_clock else None  # type: ignore[arg-type]
        t3 = ENTROPY.set(ctx) if self.owns_entropy else None
        try:
            try:
                fn = spec.fn
                result = fn(model, ctx) if spec.arity == 2 else fn(model)
            except BaseException as exc:
                out = _outcome(record, spec, ctx, started_at)
                if not failed(leg.graph, spec, out, ctx, exc, 1, clock, model):
                    raise
                return out
            return self._after(record, spec, ctx, started_at, result, model, pos.state, step,
                               visited)
        finally:
            if t3 is not None:
                ENTROPY.reset(t3)
            if t2 is not None:
                NODE_CLOCK.reset(t2)
            CURRENT_TASK.reset(t1)

    def _after(self, record: TaskRecord, spec: NodeSpec, ctx: NodeContext, started_at: datetime,
               result: Any, model: BaseModel, state: dict[str, Any], step: int,
               visited: Visited) -> Any:
        """The rest of :meth:`call` once the node returned ``result`` (its context still
        set), with the same answers."""
        graph = self.run.spec.graph
        clock = self.run.spec.clock
        name = record.node
        if (result is not None and type(result) is not dict) or ctx._custom \
                or ctx._artifacts or ctx._tool is not None:
            out = _outcome(record, spec, ctx, started_at)
            return self._in_scope(ctx, finish_inline(graph, spec, out, result, ctx, clock,
                                                     state, model))
        try:
            patch = None if result is None else normalize_patch(graph, name, result)
        except GraphflowError as exc:
            out = _outcome(record, spec, ctx, started_at, clock.now())
            out.kind = "error"
            out.error = exc
            return out
        targets: Any = graph.edges.get(name, ())  # unique already
        branches = graph.branches.get(name)
        if not branches:
            return (patch, targets, None, None)
        return self._route(record, spec, ctx, started_at, patch, state, step, visited,
                           targets, branches)

    def _route(self, record: TaskRecord, spec: NodeSpec, ctx: NodeContext,
               started_at: datetime, patch: dict[str, Any] | None, state: dict[str, Any],
               step: int, visited: Visited, targets: Sequence[str],
               branches: Sequence[Branch], whole: bool = False, checked: bool = False
               ) -> Any:
        """What ``decide_edges`` does after a node of ``branches`` returned ``patch``, with an
        :class:`Outcome` only when needed; answers as :meth:`call` (``whole``: ``state``
        has every field of a plain schema; ``checked``: the caller checked ``patch`` inline,
        plain writes of keys without a reducer, on a plain schema). Leaves the current task
        unset (``None``): edge functions run outside the node (the caller restores it)."""
        leg = self.run.spec
        graph, clock = leg.graph, leg.clock
        # The node's end, before its routes run (a virtual clock's kept instant, inline).
        done_at = clock._now if type(clock) is VirtualClock and clock._now_ns == clock._ns \
            else clock.now()
        codec = graph.codec
        name = record.node
        try:
            plain = patch and codec.plain
            if plain and not checked:
                reducers = graph.reducers
                for key in patch:  # type: ignore[union-attr]
                    if key in reducers:
                        plain = False
                        break
            if plain:
                merged = {**state, **patch}  # type: ignore[dict-item]  # checked as written
                view: Any
                if whole:  # StateCodec.model_of of a whole state, inline (fewer calls a step)
                    model_cls, copies, _count, fields_set = codec.parts  # type: ignore[misc]
                    data = dict(merged)
                    for key, copy in copies:
                        value = data[key]
                        if value is not None:
                            data[key] = copy(value)
                    view = _new(model_cls)
                    _set_dict(view, data)
                    _set_fields_set(view, fields_set)
                    _set_extra(view, None)
                    _set_private(view, None)
                else:
                    view = codec.model_of(merged)
            else:
                blame = [(name, patch)]
                merged = merge_patches(graph, state, blame, parallel=False)
                merged, view = codec.validate(merged, blame)
                if view is None:
                    view = codec.model_of(merged)
        except GraphflowError as exc:
            out = _outcome(record, spec, ctx, started_at, done_at, patch)
            out.kind = "error"
            out.error = exc
            return out
        picks = list(targets) if targets else []
        ectx = None  # made for the first route that takes it
        CURRENT_TASK.set(None)  # edge functions run outside the node
        for i, branch in enumerate(branches):
            try:
                route = branch.route
                if branch.arity == 2:
                    if ectx is None:
                        ectx = EdgeContext(name, visited, step)
                    picked = route(view, ectx)
                else:
                    picked = route(view)
            except Exception as exc:
                out = _outcome(record, spec, ctx, started_at, done_at, patch)
                out.merged = merged
                out.kind = "edge_error"
                out.error = exc
                return out
            mapping = branch.mapping
            if mapping is None and type(picked) is str \
                    and (picked in branch.targets or picked == END):
                picks += (picked,)  # not append: one call fewer
            elif mapping is not None and type(picked) in _ROUTE_KEYS \
                    and picked in mapping:
                picks += (mapping[picked],)
            else:  # an Expand, a list, an unknown route, an awaitable: as decide_edges
                out = _outcome(record, spec, ctx, started_at, done_at, patch)
                out.kind = "done"
                out.merged = merged
                if ectx is None:
                    ectx = EdgeContext(name, visited, step)
                return self._in_scope(ctx, _routes(graph, out, picked, branches[i:], picks,
                                                   view, ectx))
        if targets or i:  # more than one pick: unique ones, in order
            picks = list(dict.fromkeys(picks))
        return (patch, picks, merged, done_at)

    def _in_scope(self, ctx: NodeContext, rest: Awaitable[Outcome]) -> Awaitable[Outcome]:
        """Await the rest of a task with its context set again (as ``run_inline`` keeps it
        set for the whole of ``execute``)."""
        leg = self.run.spec
        return in_task_scope(ctx, leg.clock, leg.wall_clock, self.owns_entropy, rest)

    async def task(self, record: TaskRecord, spec: NodeSpec, model: BaseModel) -> Outcome:
        """One task of a batch of sync nodes, as ``BatchRunner.run_inline`` runs it."""
        clock = self.run.spec.clock
        started_at = clock.now()
        res = self.call(record, spec, model, started_at)
        if type(res) is tuple:
            patch, targets, merged, done_at = res
            out = Outcome(record, spec, "done", patch, targets=targets, started_at=started_at,
                          finished_at=clock.now() if done_at is None else done_at,
                          merged=merged)
            return out
        if type(res) is Outcome:
            return res
        return await res  # type: ignore[no-any-return]

    async def run_from(self, record: TaskRecord, spec: NodeSpec, at: datetime | None = None
                       ) -> Outcome | None:
        """Run the superstep of ``record`` (the only task of the leg's next batch, a sync
        node without retries, its checks before a superstep passed), then the plain steps
        after it. ``None``: every step it ran is committed (the caller's piece ends there);
        an :class:`Outcome`: the last step's task needs the general path. ``at``: the
        leg's virtual clock's time, read by the caller with nothing run since that could
        move it.

        The task's context (current task, wall clock, entropy) is set once and stays set
        from one step to the next (each step sets the task's own current task; the
        entropy is the loop's :class:`_StepEntropy`, which reads it, except at a step whose
        node routes), reset before anything but the in-memory store's own save runs and
        when the loop ends.

        On a store that commits each step's checkpoint with its events (``persist``), each
        step is committed here, through the runner's ``_persist``, with its events dumped
        at once (:mod:`._stored`), and the loop goes on as on the in-memory store; a task
        of an ``external`` node is left to the runner, which records its start first.
        There, on the real clock, a step reads the time twice (inline): the node's start
        and its end, the end also the checkpoint's ``timestamp`` and the step's events'
        ``time`` (the checkpoint is only pended for the commit in between: the general
        path's separate reads would differ by the microseconds that takes); its checkpoint
        is built as :meth:`CheckpointWriter.put` builds it, inline, and it is numbered as
        :meth:`Numbering.plain_step` numbers it, inline (on every store).
        """
        run = self.run
        leg = run.spec
        pos, numbers, progress, flight = run.pos, run.numbers, run.progress, run.flight
        graph = leg.graph
        facts = graph.__dict__.get("_lean_facts") or _facts(graph)
        codec, nodes, reducers = graph.codec, graph.nodes, graph.reducers
        joins = graph.joins
        plain, every_step = codec.plain, graph.every_step
        model_of = codec.model_of
        parts = codec.parts
        clock = leg.clock
        claim, budget, before = leg.claim, leg.max_supersteps, leg.break_before
        writer = self.writer
        adopt_fields, fence = writer.adopt, writer.fence
        # A deferred leg's checkpoint made as CheckpointWriter.put makes it, inline, once
        # the first step found plain_fields gives every field (None: not asked yet).
        inline_put: bool | None = None
        snapshots = writer._snapshots
        cp_count, cp_names = every_field(Checkpoint)
        sink = self._sink_fn
        if sink is _UNASKED:
            sink = self.sink()
        persist = self.persist
        times = StepTimes() if persist is not None else None
        run_id = leg.run_id
        # The ids' constant heads: a task's id and a checkpoint's are the head and the
        # counter (what ``f"task-{hex}-{counter}"`` gives, one part fewer to format).
        task_head, cp_head = f"task-{numbers.hex}-", f"cp-{numbers.hex}-"
        task_fields = _TASK_FIELDS
        wall, owns = leg.wall_clock, self.owns_entropy
        # A virtual clock's time moves only when something moves it (never between a
        # step's save and the next node's start): one read serves both, and the claim's
        # renewal cannot have come due while ``now()`` gives the same instant back.
        virtual = type(clock) is VirtualClock
        kept: Any = clock  # when virtual: its kept instant is read inline (no call)
        # The real clock's read (RealClock.now), inline: two calls, not three. On a store
        # that commits each step, the step's end is also its checkpoint's time and its
        # events' (nothing but the pending checkpoint's making runs between the reads the
        # general path makes): two reads a step, not four.
        real = type(clock) is RealClock
        real_now, mono_ns = _REAL[0], _REAL[1]
        from_ts = _REAL[2].fromtimestamp
        reuse_end = real and persist is not None
        claim_real = claim is not None and type(claim.clock) is RealClock
        now = (clock.now() if at is None else at) if virtual else None
        seen = now
        log, n = pos.visited.snapshot()
        owned = n == len(log)  # the leg's log ends at its snapshot: steps append to it
        whole = parts is not None and len(pos.state) == parts[2]
        if parts is not None:
            model_cls, copies, _count, fields_set = parts
        tokens: tuple[Any, Any, Any] | None = None
        # The leg's entropy source (when it owns entropy) and whether ENTROPY holds a
        # step's own context instead of it (a step with routes).
        source: Any = self.source
        direct = False
        copied: Any = None  # the copy of the leg's answers the last step saved, and their
        copied_count = 0    # number then
        # The steps' commits sent without their answers read (``send``), oldest first, each
        # with the run as it was then (restored if that commit fails) and whether its node
        # is pure (only such a step's commit has another sent behind it).
        send = self.send
        pending: list[tuple[Any, tuple[Any, ...], bool]] = []
        try:
            name = record.node  # the step's node and its facts (the next step's: set
            fact = facts[name]  # where the loop decides to go on)
            while True:
                state = pos.state
                model = pos.model
                if model is not None:
                    pos.model = None
                elif whole:  # StateCodec.model_of of a whole state, inline (fewer calls a step)
                    data = dict(state)
                    for key, copy in copies:
                        value = data[key]
                        if value is not None:
                            data[key] = copy(value)
                    model = _new(model_cls)
                    _set_dict(model, data)
                    _set_fields_set(model, fields_set)
                    _set_extra(model, None)
                    _set_private(model, None)
                else:
                    model = model_of(state)
                started_at = now if now is not None else from_ts(real_now() / 1e9, UTC) \
                    if real else clock.now()
                step, visited = pos.step, pos.visited
                # NodeContext(run, record, step, visited), inline: its slots set as its
                # __init__ sets them, without the class call's __init__ frame.
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
                # ENTROPY holds the loop's _StepEntropy (set once, it reads CURRENT_TASK),
                # or, for a step with routes, the task's context itself (``direct``).
                if tokens is None:
                    if owns:
                        source.task = ctx
                        direct = fact[1] is not None
                    tokens = (CURRENT_TASK.set(ctx),
                              NODE_CLOCK.set(clock) if wall else None,  # type: ignore[arg-type]
                              (ENTROPY.set(ctx if direct else source) if owns else None))
                else:
                    CURRENT_TASK.set(ctx)
                    if owns:
                        source.task = ctx
                        if fact[1] is not None:
                            ENTROPY.set(ctx)
                            direct = True
                        elif direct:
                            ENTROPY.set(source)
                            direct = False
                try:
                    fn = spec.fn
                    result = fn(model, ctx) if spec.arity == 2 else fn(model)
                except BaseException as exc:
                    out = _outcome(record, spec, ctx, started_at)
                    if not failed(graph, spec, out, ctx, exc, 1, clock, model):
                        raise
                    return out
                # The plain patch, checked inline: each key the node may write without a
                # reducer, holding a JSON scalar its validator gives back as it is (else
                # normalize_patch, in _after, checks it and says what is wrong).
                fast = fact[4]
                patch: Any = None
                if type(result) is dict and fast is not None and not ctx._custom \
                        and not ctx._artifacts and ctx._tool is None:
                    patch = {}
                    for key in result:
                        value = result[key]
                        kind = type(value)
                        if key in fast and kind in fast[key] \
                                and (kind is not str or value.isascii()):
                            patch[key] = value
                        else:
                            patch = None
                            break
                if patch is not None and fact[1] is None:  # static edges only
                    targets: Any = fact[0]
                    merged, done_at = None, None
                    new_state = {**state, **patch} if patch else state
                else:  # a route to run (the plain patch checked), or the patch to check
                    routed = patch is not None
                    res = self._route(record, spec, ctx, started_at, patch, state, step,
                                      visited, fact[0], fact[1], whole, True) \
                        if routed else self._after(
                            record, spec, ctx, started_at, result, model, state, step,
                            visited)
                    if type(res) is not tuple:
                        if type(res) is Outcome:
                            return res
                        if pending:  # the commits first: the rest may write
                            _unset(tokens)
                            tokens = None
                            await self._answered(pending, len(pending))
                        return await res  # type: ignore[no-any-return]
                    patch, targets, merged, done_at = res
                    # Commit: what Committer.commit_one does for this task.
                    if not patch:
                        new_state = state
                    elif merged is not None:
                        new_state = merged
                    else:
                        mixed = not plain
                        for key in patch:
                            if key in reducers:
                                mixed = True
                                break
                        if mixed:  # a reducer, or the schema's validators: the committer merges
                            return _done(_settled(run, record), spec, started_at,
                                         done_at or clock.now(), patch, targets)
                        new_state = {**state, **patch}  # plain writes, each checked as written
                    if not routed:  # (a plain patch's merge keeps every key: still whole)
                        # A state merged by the schema may leave a key out: model_of then.
                        whole = parts is not None and len(new_state) == parts[2]
                recorded = self.recorded
                if recorded is not None and done_at is None:
                    # The node's end, as the general path reports it (clock.now(), inline).
                    done_at = (kept._now if kept._now_ns == kept._ns else clock.now()) \
                        if virtual else from_ts(real_now() / 1e9, UTC) if real \
                        else clock.now()
                arrivals = pos.arrivals
                if joins:
                    if fact[3]:
                        return _done(_settled(run, record), spec, started_at,
                                     done_at or clock.now(), patch, targets)
                    arrivals = {k: list(v) for k, v in arrivals.items()}
                if fact[1] is None:  # static edges only: worked out once
                    seq, scheduled, lone = fact[2]
                else:
                    count = len(targets)
                    seq = 2 + count  # node_start, node_end, an edge per target
                    if count == 1:
                        lone = targets[0] != END
                        scheduled = targets if lone else ()
                    else:
                        lone = False  # (a record each: one of them may be END)
                        scheduled = [t for t in targets if t != END]
                        if len(scheduled) > 1:
                            scheduled = sorted(dict.fromkeys(scheduled),
                                               key=lambda n: nodes[n].index)
                finished = not scheduled and not arrivals
                saving = every_step or spec.checkpoint or (
                    finished and (numbers.parent_id is not None or leg.thread_explicit))
                # Numbering.plain_step, inline: the step's events, a new task of each
                # scheduled node (as new_task makes it) and, when it saves, a checkpoint id;
                # the tasks also as the in-memory store's sink takes them (flat pairs).
                first_seq = numbers.seq
                numbers.seq = first_seq + seq + saving + finished
                counter = numbers.task_counter
                next_tasks: list[Any]
                pairs: tuple[str, ...]
                if lone and sink is not None:
                    # The next step's lone task, while the sink takes the tasks as pairs: a
                    # _PlainTask (made a TaskRecord wherever it would leave the loop).
                    counter += 1
                    (node,) = scheduled
                    task_id = f"{task_head}{counter}"
                    pairs = (task_id, node)
                    lone_task = _new(_PlainTask)
                    lone_task.task_id = task_id
                    lone_task.node = node
                    next_tasks = [lone_task]
                else:
                    next_tasks = []
                    pairs = ()
                    for node in scheduled:
                        counter += 1
                        task_id = f"{task_head}{counter}"
                        pairs += (task_id, node)
                        # _task_record, inline (one call fewer a task): the plain task's
                        # fields copied from their template (a copy of a dict costs less
                        # than a literal of six keys; the same keys, in order)
                        task = _new(TaskRecord)
                        tdata = dict(_TASK_TEMPLATE)
                        tdata["task_id"] = task_id
                        tdata["node"] = node
                        _set_dict(task, tdata)
                        _set_fields_set(task, task_fields)
                        _set_extra(task, None)
                        _set_private(task, None)
                        next_tasks += (task,)  # not append: one call fewer
                numbers.task_counter = counter
                if saving:
                    numbers.cp_counter = counter = numbers.cp_counter + 1
                    cid = f"{cp_head}{counter}"
                else:
                    cid = None
                if owned:
                    log += (name,)  # not append: one call fewer
                    n += 1
                    visited = _new(Visited)  # Visited(log, n), inline (no __init__ frame)
                    visited._log = log
                    visited._n = n
                    visited._cache = None
                else:
                    visited = visited.extend((name,))
                    log, n = visited.snapshot()
                    owned = True
                pos.visited = visited
                pos.state = new_state
                pos.model = None
                pos.arrivals = arrivals
                pos.tasks = next_tasks
                pos.step = step + 1
                now = None
                if cid is not None:
                    status = "completed" if finished else "running"
                    # clock.now(), inline: a virtual clock's instant is kept until it moves
                    now = (kept._now if kept._now_ns == kept._ns else clock.now()) \
                        if virtual else done_at if reuse_end else None
                    sunk = False
                    if sink is not None and not (run.tool_calls or pos.passed
                                                 or run.child_threads
                                                 or run.parent_command is not None):
                        answers: Any = run.answers
                        if answers:
                            # The leg's answers only grow (a hook's answer is added, none is
                            # changed): one copy serves every step until one is added.
                            count = len(answers)
                            if count != copied_count:
                                copied, copied_count = jcopy(answers), count
                            answers = copied
                        else:
                            answers = None
                        # NotImplemented: the sink declined (a FaultyStore given a rule
                        # since it was fetched): this save and the next go the general way.
                        sunk = sink(cid, name, step, numbers.parent_id,
                                    clock.now() if now is None else now, new_state, status,
                                    pairs, log, n, arrivals, answers, numbers.seq,
                                    numbers.cp_counter, numbers.task_counter) \
                            is not NotImplemented
                        if not sunk:
                            sink = None
                    if sunk:  # Numbering.saved, inline
                        numbers.parent_id = numbers.checkpoint_id = cid
                    else:
                        if next_tasks and type(next_tasks[0]) is _PlainTask:
                            # (the sink declined, or this step's checkpoint is not plain:
                            # the writer reads its tasks)
                            _settle(pos)
                            next_tasks = pos.tasks
                        # A store's own code runs without the task's context: _unset, inline.
                        if tokens is not None:
                            t1, t2, t3 = tokens
                            if t3 is not None:
                                ENTROPY.reset(t3)
                            if t2 is not None:
                                NODE_CLOCK.reset(t2)
                            CURRENT_TASK.reset(t1)
                            tokens = None
                        fields = writer.plain_fields(cid, step, next_tasks, name, status,
                                                     new_state, visited, arrivals, now)
                        if pending and (fields is None or not inline_put):
                            await self._answered(pending, len(pending))  # the store's turn
                        if fields is None:
                            await writer.save(cid, step=step, next_step=step + 1,
                                              tasks=next_tasks, node_ids=[name],
                                              status=status, state=new_state,
                                              visited=visited, arrivals=arrivals)
                        else:
                            if adopt_fields is None or not adopt_fields(fields, fence):
                                if inline_put is None:  # once a leg (the fields are fixed)
                                    inline_put = leg.deferred and len(fields) == cp_count
                                if inline_put:  # a deferred leg: what put() and make() do
                                    if not snapshots:
                                        fields["visited"] = visited.as_tuple()
                                    cp = _new(Checkpoint)
                                    _set_dict(cp, fields)
                                    _set_fields_set(cp, cp_names)
                                    _set_extra(cp, None)
                                    _set_private(cp, None)
                                    progress.pending += (cp,)  # committed with the events
                                else:
                                    await writer.put(fields)
                            numbers.parent_id = numbers.checkpoint_id = cid  # (saved())
                if finished:
                    if pending:  # the run ends: the commits' answers first
                        _unset(tokens)
                        tokens = None
                        await self._answered(pending, len(pending))
                    if tokens is not None:  # the in-memory store's own save ran, or none:
                        _unset(tokens)      # nothing moved a virtual clock since ``now``
                        tokens = None
                        await self.end.finish("completed", None, at=now)
                    else:
                        await self.end.finish("completed", None)
                if persist is not None:  # the store commits the step now, its events dumped
                    assert done_at is not None
                    assert times is not None
                    if tokens is not None:  # a store's own code runs without the context
                        _unset(tokens)
                        tokens = None
                    # The events' time: the checkpoint's (a virtual clock's kept instant, or
                    # the real clock's step end), else the clock's now.
                    dumped = stored_step_events(
                        times, run_id, clock.now() if now is None else now, first_seq, step,
                        name, record.task_id,
                        patch, started_at, done_at, targets, cid, finished,
                        new_state if finished else None)
                    # A pure node next: its step is worked out while this commit is on the
                    # wire (undone if the commit fails: the run as it is now, kept with it).
                    # Made ready (serialised) first, sent behind the last step's while
                    # that one is unanswered (the store's ``send_behind``; when that step's
                    # node is pure: another's effects are written before more is run), else
                    # once it is.
                    ready = send(dumped) if send is not None and lone \
                        and facts[scheduled[0]][7] else None
                    if ready is None:
                        if pending:
                            await self._answered(pending, len(pending))
                        await persist(dumped)
                    else:
                        if len(pending) >= _SENT_AHEAD:
                            await self._answered(pending, 1)
                        if not pending:
                            went = ready.send()
                        elif pending[-1][2] and (behind := getattr(
                                ready, "send_behind", None)) is not None \
                                and behind(pending[-1][0]):
                            went = True
                        else:  # not behind it: once the commits on the wire are answered
                            await self._answered(pending, len(pending))
                            went = ready.send()
                        if went:
                            progress.pending = []  # (the sent commit holds them)
                            pending.append((ready, _mark(run), fact[7]))
                        else:
                            await persist(dumped)
                elif recorded is not None:  # the step's events, for the recording or the store
                    assert done_at is not None
                    recorded.extend(lean_step_events(
                        run, first_seq, step, name, record.task_id, patch, started_at,
                        done_at, targets, cid, finished, new_state))
                    if leg.store_only or leg.cancel_at is not None:
                        # One step a piece: the store commits a step's events with its
                        # checkpoint; ``cancel_at`` tests a piece's events before the next.
                        return None
                if finished:
                    return None

                # The next superstep: lean too only if every check before it is plain (what
                # Runner._advance and _superstep check, in their order); else the next piece.
                try:  # exactly one task next (not len(): one call fewer)
                    (record,) = next_tasks
                except ValueError:
                    return None
                if pos.completed or flight.cancel_requested \
                        or progress.deadline_ns is not None or progress.deadline is not None \
                        or (budget is not None and progress.supersteps >= budget):
                    return None
                if not virtual:
                    now = None  # the next node's start is read when it starts
                elif now is None:
                    now = clock.now()
                if claim is not None and (now is None or now is not seen):
                    # Claim.due(), inline (one call, not three, a step on a real clock).
                    if claim._local is None and not claim.released and claim.lost is None:
                        held = (mono_ns() / 1e9 if claim_real else claim.clock.monotonic()) \
                            - claim._renewed_at
                        if held >= claim.ttl / 3:
                            return None
                    seen = now
                # ``node``: the next task's (the one scheduled), read without its record
                if before and node in before:
                    return None
                fact = facts[node]
                if fact[5] or (persist is not None and fact[6]):
                    return None  # (an external task's start is recorded before it runs)
                spec = nodes[node]
                name = node
                progress.supersteps += 1
        finally:
            if tokens is not None:
                _unset(tokens)
            try:
                if pending:  # whatever ended the loop: the commits' answers first
                    await self._answered(pending, len(pending))
            finally:
                tasks: list[Any] = pos.tasks
                if tasks and type(tasks[0]) is _PlainTask:  # (whatever ended the loop: the
                    _settle(pos)                             # general path reads the tasks)

    async def _answered(self, pending: list[tuple[Any, tuple[Any, ...], bool]], n: int
                        ) -> None:
        """Await the ``n`` oldest commits of ``pending`` (``Runner._send_step``'s, each with
        the run as it was when it was sent), in order, taking them off it. When one fails,
        the run's position, numbering and progress are put back as they were when it was
        sent (what the steps after it changed is undone), the commits sent behind it are
        dropped (their answers read: each statement's fence refused it, its parent not
        written), and its error is raised, as the commit raised it where it was asked for
        (C6)."""
        for _ in range(n):
            sent, mark, _pure = pending.pop(0)
            try:
                await sent.settled()
            except BaseException:
                _restore(self.run, mark)
                later = [behind for behind, _mark, _pure in pending]
                pending.clear()
                for behind in later:
                    with suppress(Exception):
                        await behind.dropped()
                raise

    def sink(self) -> Any:
        """The store's save for a lean step's checkpoint (the in-memory store's
        ``step_sink``), or ``None``: the writer's fast save or its general one. Asked of the
        store once a leg (what it depends on is fixed for the leg)."""
        sink = self._sink_fn
        if sink is not _UNASKED:
            return sink
        writer = self.writer
        leg = self.run.spec
        if not leg.features.step_sink or not writer.plain_leg:
            sink = None
        else:
            graph = leg.graph
            store: Any = leg.store  # declares step_sink (StoreFeatures.step_sink)
            sink = store.step_sink(leg.run_id, leg.thread_id, graph.graph_id, graph.revision,
                                   leg.tenant_id, writer.fence)
        self._sink_fn = sink
        return sink


_SENT_AHEAD = 2
"""How many of a run's commits the lean loop keeps on the wire unanswered (a store's
``send_behind`` lets the next go behind the last; PostgreSQL's pipeline holds two)."""


def _mark(run: RunState) -> tuple[Any, ...]:
    """What a lean step changes of ``run`` (its position, numbering and progress), as it is
    now: :func:`_restore` puts it back."""
    pos, numbers = run.pos, run.numbers
    return (pos.visited, pos.state, pos.model, pos.arrivals, pos.tasks, pos.step,
            numbers.seq, numbers.task_counter, numbers.cp_counter, numbers.parent_id,
            numbers.checkpoint_id, run.progress.supersteps)


def _restore(run: RunState, mark: tuple[Any, ...]) -> None:
    """Put back what :func:`_mark` kept of ``run``; the checkpoints pending for the next
    commit are dropped (the commit that failed took the earlier ones)."""
    pos, numbers, progress = run.pos, run.numbers, run.progress
    (pos.visited, pos.state, pos.model, pos.arrivals, pos.tasks, pos.step, numbers.seq,
     numbers.task_counter, numbers.cp_counter, numbers.parent_id, numbers.checkpoint_id,
     progress.supersteps) = mark
    progress.pending = []


def _unset(tokens: tuple[Any, Any, Any] | None) -> None:
    """Reset the task context ``run_from`` set (``tokens``), if it is set."""
    if tokens is not None:
        t1, t2, t3 = tokens
        if t3 is not None:
            ENTROPY.reset(t3)
        if t2 is not None:
            NODE_CLOCK.reset(t2)
        CURRENT_TASK.reset(t1)


def _facts(graph: CompiledGraph) -> dict[str, tuple[Any, ...]]:
    """What the lean step reads of each node of ``graph``, worked out once per graph:
    ``(targets, branches, (events, scheduled, lone), joins_from, fast, held, external,
    pure)`` —
    its static targets, its branches (``None``: none), the events and next nodes of a step
    through its static edges (``lone``: exactly one), whether a join waits for it, the
    types of the values each key it may write takes as they are (``None``: the schema is
    not plain), whether it cannot run inline (async, or with retries: ``held``), and
    whether its effect is ``external`` or ``pure``."""
    found: dict[str, tuple[Any, ...]] | None = graph.__dict__.get("_lean_facts")
    if found is None:
        found = graph.__dict__["_lean_facts"] = {
            name: _node_facts(graph, name) for name in graph.nodes}
    return found


def _node_facts(graph: CompiledGraph, name: str) -> tuple[Any, ...]:
    """One node's entry of :func:`_facts`."""
    nodes = graph.nodes
    targets = graph.edges.get(name, ())
    scheduled: Sequence[str]
    if len(targets) == 1:
        scheduled = () if targets[0] == END else targets
    else:
        scheduled = [t for t in targets if t != END]
        if len(scheduled) > 1:
            scheduled = sorted(dict.fromkeys(scheduled), key=lambda n: nodes[n].index)
    codec = graph.codec
    fast: dict[str, frozenset[type]] | None = None
    if codec.plain:
        writes = nodes[name].writes
        fast = {}
        scalars: frozenset[type] = frozenset((int, bool, str, type(None)))
        for key in graph.keys:
            if key in graph.reducers or (writes is not None and key not in writes):
                continue
            fast[key] = scalars & codec.passes[key] if key in codec.checked_on_write \
                else scalars
    spec = nodes[name]
    return (targets, graph.branches.get(name) or None,
            (2 + len(targets), scheduled, len(scheduled) == 1),
            bool(graph.joins_from.get(name)), fast, spec.is_async or spec.retry is not None,
            spec.effect == "external", spec.effect == "pure")


async def _routes(graph: CompiledGraph, out: Outcome, picked: Any, branches: Sequence[Branch],
                  picks: list[str], view: Any, ectx: EdgeContext) -> Outcome:
    """The rest of ``decide_edges`` from the first of ``branches``, whose route gave
    ``picked`` (an awaitable, or a pick only ``_pick`` resolves)."""
    node = out.record.node
    token = CURRENT_TASK.set(None)  # edge functions run outside the node
    try:
        for n, branch in enumerate(branches):
            try:
                if n:
                    route = branch.route
                    picked = route(view, ectx) if branch.arity == 2 else route(view)
                if inspect.isawaitable(picked):
                    picked = await picked
            except Exception as exc:
                out.kind = "edge_error"
                out.error = exc
                return out
            if not _pick(branch, node, picked, out, picks):
                return out
    finally:
        CURRENT_TASK.reset(token)
    out.targets = list(dict.fromkeys(picks))
    return out


def _outcome(record: TaskRecord, spec: NodeSpec, ctx: NodeContext, started_at: datetime,
             finished_at: datetime | None = None, patch: dict[str, Any] | None = None
             ) -> Outcome:
    """The task's outcome as ``execute`` builds it; with ``finished_at``, one whose node
    returned (its attempt and end time set, and its ``patch``). A lean loop's
    :class:`_PlainTask` is made a :class:`TaskRecord` first (the context's too)."""
    task: Any = record
    if type(task) is _PlainTask:
        record = ctx._record = _settled(ctx._leg, task)
    out = Outcome(record, spec)
    out.custom = ctx._custom
    out.artifacts = ctx._artifacts
    out.started_at = started_at
    if finished_at is not None:
        out.attempt = 1
        out.finished_at = finished_at
        out.patch = patch
    return out


def _done(record: TaskRecord, spec: NodeSpec, started_at: datetime, finished_at: datetime,
          patch: dict[str, Any] | None, targets: Any) -> Outcome:
    """A completed task's outcome (nothing emitted or attached), for the committer."""
    return Outcome(record, spec, "done", patch, targets=list(targets), started_at=started_at,
                   finished_at=finished_at)
