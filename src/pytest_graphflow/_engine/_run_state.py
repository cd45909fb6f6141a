"""A leg's state, in parts with one owner each (see ``docs/architecture.md``).

:class:`RunState` is the one object the parts of the run loop share, each given it
explicitly. Its state is split by who changes it:

========================  ==============================  ==================================
part                      what it holds                   who assigns its fields
========================  ==============================  ==================================
:class:`LegSpec`          graph, store and features,      nobody: frozen, made by ``_legs``
                          clock, seed, ids, budgets,
                          breakpoints, hooks, claim
:class:`Position`         state, step, tasks, completed,  the committer (``_commit``), and
                          visited, arrivals               the lean step (``_lean``) for the
                                                          steps it commits itself
:class:`Numbering`        event ``seq``, checkpoint and   its own methods, and the lean
                          task counters, parent chain     step (``_lean``) for the steps
                                                          it numbers itself
:class:`Progress`         started, supersteps, deadline,  the loop (``_runner``), and the
                          checkpoints awaiting commit     lean step for the steps it runs
:class:`Flight`           the running batch, its scope,   the batch runner (``_batch``)
                          start order, cancel request
:class:`LegOutcome`       status, error, interrupts,      nobody: frozen, made once by
                          breakpoint, last checkpoint     ``_writer.LegEnd`` as the leg ends
========================  ==============================  ==================================

``tests/layout/test_run_state_owners.py`` holds the table above to the code. The fields a
task reads through its ``NodeContext`` (:class:`~.._graph._node.TaskLeg`) are plain
attributes of :class:`RunState`: copies of the spec's, and the leg's ledgers (answers, tool
calls, child threads), dicts made once and changed in place.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio
from pydantic import BaseModel

from .._graph._builder import Command, CompiledGraph, NodeSpec
from .._graph._node import NodeContext, Visited
from .._records._checkpoint import Checkpoint, TaskOutput, TaskRecord
from .._records._events import Breakpoint, EventBase, Interrupt
from .._records._fast import (
    _new,
    _set_dict,
    _set_extra,
    _set_fields_set,
    _set_private,
    adopt,
    make,
    template,
)
from .._records._json import jcopy
from .._stores._features import StoreFeatures
from .._stores._protocol import CheckpointStore
from .._time._clock import Clock
from ._claim import ThreadClaim
from ._hooks import HookTable, NodeHooks
from ._outcome import Outcome
from ._results import LazyEvent, RunLeg, RunRecord, StepState

if TYPE_CHECKING:
    from .._graph._subgraph import Subgraph

__all__ = ["STEPPING", "UNRECORDED", "Expired", "Flight", "LegOutcome", "LegSpec", "LegStatus",
           "Numbering", "Position", "Progress", "RunState", "SubgraphRunner"]

STEPPING: ContextVar[bool] = ContextVar("graphflow_stepping", default=False)
"""Set while ``GraphRuntime.astep`` drives a run: a leg made then is a step (see ``_step``)."""

LegStatus = Literal["completed", "interrupted", "failed", "cancelled"]
"""How a leg ended (``run_end``'s status)."""

Expired = tuple[Interrupt, str, str | None, object]
"""A question a leg resumed to expire: (question, action, route node, answer)."""

SubgraphRunner = Callable[
    ["RunState", "Subgraph", BaseModel, NodeContext], Awaitable[object]]
"""How a leg runs a subgraph node's child run (``_subgraph.run_subgraph``)."""

_TASK_FIELDS = template(TaskRecord)[1]

_EVENT_TEMPLATES: dict[type[EventBase], tuple[dict[str, Any], set[str]]] = {}


def _ev(cls: type[EventBase], **fields: Any) -> Any:
    """Build an event without validation (hot path); ``time`` is stamped when yielded."""
    found = _EVENT_TEMPLATES.get(cls)
    if found is None:
        static, every = template(cls)
        found = _EVENT_TEMPLATES[cls] = ({**static, "time": None}, every)
    data = found[0].copy()
    data.update(fields)
    return adopt(cls, data, found[1])


class _Unrecorded:
    """Stands in for an event when a run's events are not wanted (``invoke``): the sequence
    numbers still advance, so checkpoints record the same ``next_seq`` either way."""

    __slots__ = ("__dict__",)


UNRECORDED = _Unrecorded()


_NO_DEADLINES: Mapping[str, datetime] = MappingProxyType({})


class LegSpec:
    """What one leg runs, where it saves and on which clock: fixed when ``Legs`` makes it.

    Frozen for the type checker (every field is ``Final``) and by the layout test; a plain
    slotted class, not a frozen dataclass, because one is made per leg and a frozen
    dataclass's ``__init__`` costs a few microseconds more (a one-node run is ~150 µs).

    Attributes:
        graph: the graph (under the runtime's checkpoint policy).
        store: the checkpoint store; ``features``: what it supports, read once.
        record_events: whether the leg builds its events (``invoke`` does not, unless the
            store keeps them or an ``on_leg`` observer watches).
        break_before, break_after: the graph's breakpoints and this leg's own.
        hooks: the leg's middleware and guardrails (``_hooks.hook_table``), if any.
        claim: the leg's claim on its thread.
        subgraph_runner: how a ``Subgraph`` node runs its child.
        record, leg: observers the runtime attaches: its run record, a recording leg.
        resumed_from: the checkpoint a resumed leg continues (``None`` for a fresh run).
        time_travel: resumed from a checkpoint other than its run's latest.
        branch: the leg's first checkpoint goes on from an earlier one (on purpose).
        expired: the questions the leg resumed to expire.
        deadlines: the deadlines of the questions the leg resumed with (asked again, they
            keep them).
        cancel_after: seconds into the leg at which it is cancelled (``cancel_after=``).
        cancel_at: the test of the event after which the leg is cancelled (``cancel_at=``).
        stepping: a leg driven by ``astep`` (a cancelled superstep keeps nothing, seed 004).
        durable: the store keeps the leg's events; ``deferred``: its checkpoints go with them
            in one commit under the claim's token; ``store_only``: deferred, and nobody but
            the store reads the events.
    """

    __slots__ = ("branch", "break_after", "break_before", "cancel_after", "cancel_at", "claim",
                 "clock",
                 "deadlines", "deferred",
                 "durable", "expired", "features", "graph", "hex", "hooks", "leg", "max_supersteps",
                 "on_interrupt", "record", "record_events", "resumed_from", "run_id", "seed",
                 "stepping", "store", "store_only", "subgraph_runner", "tenant_id",
                 "thread_explicit",
                 "thread_id", "time_travel", "timeout", "wall_clock")

    def __init__(
        self,
        graph: CompiledGraph,
        store: CheckpointStore,
        features: StoreFeatures,
        clock: Clock,
        seed: int | None,
        run_id: str,
        thread_id: str,
        tenant_id: str | None,
        max_supersteps: int | None,
        timeout: float | None,
        on_interrupt: Callable[[Interrupt], object] | None,
        wall_clock: bool,
        record_events: bool,
        break_before: frozenset[str],
        break_after: frozenset[str],
        hooks: HookTable | None,
        claim: ThreadClaim | None,
        subgraph_runner: SubgraphRunner | None,
        record: RunRecord | None,
        leg: RunLeg | None,
        thread_explicit: bool,
        resumed_from: str | None,
        time_travel: bool,
        branch: bool,
        expired: tuple[Expired, ...],
        deadlines: Mapping[str, datetime],
        stepping: bool,
        cancel_after: float | None,
        cancel_at: Callable[[EventBase], bool] | None,
        /,
    ) -> None:
        # Positional only, in the order of the attributes above: one leg makes one, and
        # 29 keywords through a class's ``__init__`` go through a dict both ways (~9,000
        # instructions of a ~13,000 call; ``Legs.start`` is the one caller).
        self.graph: Final = graph
        self.store: Final = store
        self.features: Final = features
        self.clock: Final = clock
        self.seed: Final = seed
        self.run_id: Final = run_id
        self.thread_id: Final = thread_id
        self.tenant_id: Final = tenant_id
        self.max_supersteps: Final = max_supersteps
        self.timeout: Final = timeout
        self.on_interrupt: Final = on_interrupt
        self.wall_clock: Final = wall_clock
        self.break_before: Final = break_before
        self.break_after: Final = break_after
        self.hooks: Final = hooks
        self.claim: Final = claim
        self.subgraph_runner: Final = subgraph_runner
        self.record: Final = record
        self.leg: Final = leg
        self.thread_explicit: Final = thread_explicit
        self.resumed_from: Final = resumed_from
        self.time_travel: Final = time_travel
        self.branch: Final = branch
        self.expired: Final = expired
        self.deadlines: Final = deadlines
        self.stepping: Final = stepping
        self.cancel_after: Final = cancel_after
        self.cancel_at: Final = cancel_at
        durable = features.events
        self.durable: Final = durable
        self.record_events: Final = record_events or durable
        self.hex: Final = run_id[4:] if run_id[:4] == "run-" else run_id
        fenced = claim is not None and claim.fenced and claim.token is not None
        self.deferred: Final = durable and fenced and features.commit
        self.store_only: Final = self.deferred and not record_events and cancel_at is None
        """Only the store reads the leg's events (``invoke`` on a store that commits them):
        its plain steps may take the lean step, one step a commit (see ``_lean``)."""

    def __repr__(self) -> str:
        return f"<LegSpec run={self.run_id} thread={self.thread_id} graph={self.graph.graph_id!r}>"


class Position:
    """Where the run stands: what a checkpoint records (owner: ``_commit``).

    Attributes:
        state: the run's state (JSON form); ``model``: it as the graph's model, when the
            last commit built one (the next task's input; the batch runner takes it).
        step: the next superstep; ``tasks``: its tasks; ``completed``: those of them that
            finished before the leg resumed (C9).
        visited: the nodes completed so far, in order; ``arrivals``: each join's sources
            arrived so far.
        passed: tasks whose before-breakpoint the run has passed (changed in place by the
            halt handler).
    """

    __slots__ = ("arrivals", "completed", "model", "passed", "state", "step", "tasks",
                 "visited")

    def __init__(self, state: dict[str, object], checkpoint: Checkpoint | None = None) -> None:
        self.state = state
        self.model: BaseModel | None = None
        if checkpoint is None:
            self.step = 0
            self.tasks: list[TaskRecord] = []
            self.completed: dict[str, TaskOutput] = {}
            self.visited = Visited([], 0)
            self.arrivals: dict[str, list[str]] = {}
            self.passed: set[str] = set()
            return
        # The checkpoint's fields read from its dict (a pydantic model's attribute reads take
        # the interpreter's slow path: its class has a ``__getattr__``).
        cp = checkpoint.__dict__
        self.step = cp["next_step"]
        self.tasks = list(cp["tasks"])
        self.completed = dict(cp["completed"])
        self.visited = Visited(list(cp["visited"]))
        arrivals = cp["arrivals"]
        self.arrivals = {k: list(v) for k, v in arrivals.items()} if arrivals else {}
        meta = cp["metadata"]
        self.passed = set(meta["breakpoint_passed"]) if "breakpoint_passed" in meta else set()

    def take_model(self) -> BaseModel | None:
        """The cached model of the state, once (the next task's input)."""
        model, self.model = self.model, None
        return model


class Numbering:
    """What the leg numbers: events (``seq``), checkpoint and task ids, and the checkpoint
    chain (``parent_id``: the next checkpoint's parent; ``checkpoint_id``: the last one this
    leg saved). Only its own methods change it: ids are never handed out twice."""

    __slots__ = ("checkpoint_id", "cp_counter", "hex", "lazy", "parent_id", "record_events",
                 "run_id", "seq", "task_counter")

    def __init__(self, spec: LegSpec, seq: int = 0, cp_counter: int = 0,
                 task_counter: int = 0) -> None:
        self.run_id = spec.run_id
        self.hex = spec.hex
        self.record_events = spec.record_events
        leg = spec.leg
        # Events only a recording leg reads, and nobody else: left unbuilt (LazyEvent).
        self.lazy = leg is not None and leg.lazy and not spec.durable
        self.seq = seq
        self.cp_counter = cp_counter
        self.task_counter = task_counter
        self.parent_id: str | None = spec.resumed_from
        self.checkpoint_id: str | None = None

    def next_checkpoint_id(self) -> str:
        """A new checkpoint id: the run's and a counter."""
        self.cp_counter += 1
        return f"cp-{self.hex}-{self.cp_counter}"

    def new_task(
        self,
        node: str,
        failure: dict[str, Any] | None = None,
        item: object = None,
        has_item: bool = False,
        checkpoint_id_before: str | None = None,
    ) -> TaskRecord:
        """A new task of ``node`` with the next task id."""
        self.task_counter += 1
        return make(TaskRecord, task_id=f"task-{self.hex}-{self.task_counter}", node=node,
                    item=item, has_item=has_item, checkpoint_id_before=checkpoint_id_before,
                    failure=failure)

    def plain_step(self, count: int, nodes: Sequence[str], checkpoint: bool
                   ) -> tuple[list[TaskRecord], str | None, tuple[str, ...]]:
        """Number a lean step at once (``_lean``): ``count`` events, a new task of each of
        ``nodes`` (as :meth:`new_task` makes them) and, with ``checkpoint``, a checkpoint id
        (counted in ``count`` by the caller). Also gives the tasks as the in-memory store's
        step sink takes them: one flat tuple ``(task_id, node, task_id, node...)``."""
        self.seq += count
        hexid = self.hex
        tasks: list[TaskRecord] = []
        pairs: tuple[str, ...] = ()  # flat: one tuple for the collector
        for node in nodes:
            self.task_counter = counter = self.task_counter + 1
            task_id = f"task-{hexid}-{counter}"
            pairs += (task_id, node)
            # What adopt() does, inline (a lean step makes one a step).
            task = _new(TaskRecord)
            _set_dict(task, {
                "task_id": task_id, "node": node, "item": None,
                "has_item": False, "checkpoint_id_before": None, "failure": None})
            _set_fields_set(task, _TASK_FIELDS)
            _set_extra(task, None)
            _set_private(task, None)
            tasks += (task,)  # not tasks.append: one call fewer
        if not checkpoint:
            return tasks, None, pairs
        self.cp_counter = counter = self.cp_counter + 1
        return tasks, f"cp-{hexid}-{counter}", pairs

    def event(self, cls: type[EventBase], step: int, **fields: Any) -> Any:
        """The next event of the leg (numbered even when events are not recorded)."""
        self.seq += 1
        if not self.record_events:
            return UNRECORDED
        if self.lazy:  # a LazyEvent: the fields, built when the recording leg is read
            fields["seq"] = self.seq - 1
            fields["run_id"] = self.run_id
            fields["step"] = step
            entry = LazyEvent()
            entry.cls = cls
            entry.__dict__ = fields
            return entry
        return _ev(cls, seq=self.seq - 1, run_id=self.run_id, step=step, **fields)

    def skip(self, count: int) -> None:
        """Number ``count`` events that are not built (``invoke`` wants none)."""
        self.seq += count

    def saved(self, checkpoint_id: str) -> None:
        """``checkpoint_id`` was saved: the next checkpoint continues from it."""
        self.parent_id = checkpoint_id
        self.checkpoint_id = checkpoint_id

    def expanded(self, node: str, items: Sequence[object], checkpoint_id_before: str | None,
                 into: list[TaskRecord]) -> None:
        """Append to ``into`` a new task of ``node`` for each of ``items``, in order, as
        :meth:`new_task` makes them (an expansion's thousands of tasks, one call each)."""
        hexid = self.hex
        counter = self.task_counter
        for item in items:
            counter += 1
            task = _new(TaskRecord)  # what adopt() does, inline
            _set_dict(task, {
                "task_id": f"task-{hexid}-{counter}", "node": node, "item": item,
                "has_item": True, "checkpoint_id_before": checkpoint_id_before,
                "failure": None})
            _set_fields_set(task, _TASK_FIELDS)
            _set_extra(task, None)
            _set_private(task, None)
            into += (task,)  # not into.append: one call fewer
        self.task_counter = counter


class Progress:
    """How far the leg got (owner: ``_runner``): whether it began, the supersteps it ran,
    its deadline, and the checkpoints a durable store commits with the piece's events
    (``pending``: the writer appends, the loop takes them)."""

    __slots__ = ("deadline", "deadline_ns", "pending", "started", "started_at", "supersteps")

    def __init__(self) -> None:
        self.started = False
        self.started_at: datetime | None = None
        self.supersteps = 0
        self.deadline: float | None = None
        self.deadline_ns: int | None = None
        self.pending: list[Checkpoint] = []


class Flight:
    """The batch in flight (owner: ``_batch``): its outcomes while it runs, its cancel scope,
    the order its tasks started in, and whether a cancel was asked for."""

    __slots__ = ("batch", "cancel_requested", "scope", "start_order")

    def __init__(self) -> None:
        self.batch: list[Outcome] | None = None
        self.scope: anyio.CancelScope | None = None
        self.start_order: list[str] = []
        self.cancel_requested = False

    def cancel(self) -> None:
        """Ask the run to stop: the running batch (if any) is cancelled and joined."""
        self.cancel_requested = True
        if self.scope is not None:
            self.scope.cancel()

    def take(self) -> list[Outcome] | None:
        """The running batch's outcomes, once (a cancelled piece stops with them)."""
        batch, self.batch = self.batch, None
        return batch


@dataclass(frozen=True, slots=True)
class LegOutcome:
    """How a leg ended: made once, by ``LegEnd``, when it ends (a value a caller can hold).

    Attributes:
        status: ``completed``, ``interrupted``, ``failed`` or ``cancelled``.
        error: why it failed or was cancelled (the first error wins).
        interrupts: the questions it paused at.
        breakpoint: the breakpoint it paused for.
        checkpoint_id: the last checkpoint it saved.
        ended_at: when it ended, on its clock (``None`` when the clock threw).
    """

    status: LegStatus
    error: BaseException | None = None
    interrupts: tuple[Interrupt, ...] = ()
    breakpoint: Breakpoint | None = None
    checkpoint_id: str | None = None
    ended_at: datetime | None = None


_new_outcome = object.__new__
# The slots' own setters: what the frozen dataclass's ``__init__`` reaches through one
# ``object.__setattr__`` lookup a field.
_SET_OUTCOME = tuple(vars(LegOutcome)[name].__set__ for name in (
    "status", "error", "interrupts", "breakpoint", "checkpoint_id", "ended_at"))


def leg_outcome(status: LegStatus, error: BaseException | None,
                interrupts: tuple[Interrupt, ...], breakpoint: Breakpoint | None,
                checkpoint_id: str | None, ended_at: datetime | None) -> LegOutcome:
    """``LegOutcome(status, error, ...)`` with every field given, made as its ``__init__``
    makes it but without the frozen ``__init__``'s cost (~10,000 instructions -> ~5,000;
    every leg ends with one, ``LegEnd.finish``)."""
    outcome = _new_outcome(LegOutcome)
    s_status, s_error, s_interrupts, s_breakpoint, s_checkpoint, s_ended = _SET_OUTCOME
    s_status(outcome, status)
    s_error(outcome, error)
    s_interrupts(outcome, interrupts)
    s_breakpoint(outcome, breakpoint)
    s_checkpoint(outcome, checkpoint_id)
    s_ended(outcome, ended_at)
    return outcome


class RunState:
    """One leg of a run: its spec, position, numbering, progress, batch and outcome.

    A fresh run starts at step 0 with no tasks (the entry is scheduled when it begins); a
    resumed leg (``checkpoint``) starts where its checkpoint left the run.
    """

    __slots__ = ("answers", "child_checkpoints", "child_threads", "clock", "deadlines",
                 "flight", "numbers", "on_interrupt", "outcome", "parent_command", "pos",
                 "progress", "run_id", "spec", "thread_id", "tool_calls")

    def __init__(
        self,
        spec: LegSpec,
        state: dict[str, object],
        checkpoint: Checkpoint | None = None,
        answers: dict[str, object] | None = None,
        seq: int = 0,
        cp_counter: int = 0,
        task_counter: int = 0,
    ) -> None:
        self.spec = spec
        self.pos = Position(state, checkpoint)
        self.numbers = Numbering(spec, seq, cp_counter, task_counter)  # (positional: no dict)
        self.progress = Progress()
        self.flight = Flight()
        self.outcome: LegOutcome | None = None
        """How the leg ended (``LegEnd`` sets it once); ``None`` while it runs."""
        # What a task's context reads (the spec's, as plain attributes: read per task).
        self.run_id = spec.run_id
        self.thread_id = spec.thread_id
        self.clock = spec.clock
        self.on_interrupt = spec.on_interrupt
        self.deadlines = spec.deadlines
        # The leg's ledgers: made here, then changed in place only.
        self.answers: dict[str, object] = {} if answers is None else answers
        self.tool_calls: dict[str, dict[str, object]] = {}
        """Recorded results of ``write``/``external``/``human`` tool calls by call key
        (``<task_id>:tool-<n>``): a task that runs again replays them (see ``_tools``)."""
        self.child_threads: dict[str, str] = {}
        """The child threads of the pending subgraph tasks (task id -> thread)."""
        self.child_checkpoints: dict[str, str] = {}
        """The checkpoint each paused child stood at."""
        if checkpoint is not None:
            meta = checkpoint.__dict__["metadata"]  # (see Position)
            if "tool_calls" in meta:
                self.tool_calls.update(meta["tool_calls"])
            if "subgraph_threads" in meta:
                self.child_threads.update(meta["subgraph_threads"])
            if "subgraph_checkpoints" in meta:
                self.child_checkpoints.update(meta["subgraph_checkpoints"])
        self.parent_command: Command | None = None
        """In a child run, the ``Command(graph=PARENT)`` that ended it."""

    def hand_to_parent(self, command: Command) -> None:
        """A node of this child run returned ``command`` (``graph=Command.PARENT``): the
        run ends, and the parent's subgraph node takes it."""
        self.parent_command = command

    async def run_subgraph(self, sub: Subgraph, state: BaseModel, ctx: NodeContext) -> object:
        """Run a subgraph node's child run (see :mod:`._subgraph`); the runtime that built
        this leg provides how (``spec.subgraph_runner``)."""
        runner = self.spec.subgraph_runner
        if runner is None:  # pragma: no cover - the runtime always sets it
            raise RuntimeError("this leg cannot run subgraphs")
        return await runner(self, sub, state, ctx)

    def next_checkpoint_id(self) -> str:
        """A new checkpoint id (see :meth:`Numbering.next_checkpoint_id`)."""
        return self.numbers.next_checkpoint_id()

    def hooks_of(self, node: str) -> NodeHooks | None:
        """The middleware and guardrails around tasks of ``node`` in this leg, if any."""
        hooks = self.spec.hooks
        return None if hooks is None else hooks.get(node)

    def runs_inline(self, spec: NodeSpec) -> bool:
        """Whether a task of ``spec`` may run inline: a sync node without retries, and no
        async hook around it."""
        if spec.is_async or spec.retry is not None:
            return False
        table = self.spec.hooks
        if table is None:
            return True
        hooks = table.get(spec.name)
        return hooks is None or not hooks.is_async

    def copy_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """Events carry copies: mutating one changes nothing in the run."""
        return jcopy(state) if self.spec.record_events else state

    def stamp(self, events: list[Any]) -> list[Any]:
        """Give a piece's events the time they are yielded at."""
        if not self.spec.record_events:
            return [e for e in events if type(e) is StepState]
        now = self.clock.now()
        for ev in events:
            if type(ev) is not StepState:
                ev.__dict__["time"] = now
        return events
