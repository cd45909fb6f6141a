"""A leg's state: what it runs, where it saves, how far it got, and its counters.

:class:`RunState` is the one object the parts of the run loop share, each given it
explicitly: the batch runner (:mod:`._batch`), the committer (:mod:`._commit`), the halt
handler (:mod:`._halts`), the checkpoint writer (:mod:`._writer`) and the loop itself
(:mod:`._runner`). It also numbers what the leg produces — events (``seq``), checkpoint ids
and task ids — since those counters are part of where the run stands.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from datetime import datetime
from typing import Any

import anyio
from pydantic import BaseModel

from .._graph._builder import CompiledGraph, NodeSpec
from .._graph._node import Visited
from .._records._checkpoint import TaskOutput, TaskRecord
from .._records._events import Breakpoint, EventBase, Interrupt
from .._records._fast import adopt, make, template
from .._records._json import jcopy
from .._stores._features import StoreFeatures, features_of
from .._stores._protocol import CheckpointStore
from .._time._clock import Clock
from ._hooks import HookTable, NodeHooks
from ._task import Outcome

__all__ = ["STEPPING", "UNRECORDED", "RunState", "StepState"]

STEPPING: ContextVar[bool] = ContextVar("graphflow_stepping", default=False)
"""Set while ``GraphRuntime.astep`` drives a run: a leg made then is a step (see ``_step``)."""


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


class StepState:
    """Marker the runner puts after a superstep's events for the ``values`` view (internal).

    It is not an event: the ``events`` view drops it.
    """

    __slots__ = ("checkpoint_id", "state", "step")

    def __init__(self, step: int, state: dict[str, Any], checkpoint_id: str | None) -> None:
        self.step = step
        self.state = state
        self.checkpoint_id = checkpoint_id


class RunState:
    """One leg of a run: its graph, store and clock, its position, and how it ended.

    A fresh run starts at step 0 with no tasks (the entry is scheduled when it begins);
    :meth:`continue_from` places a resumed leg where its checkpoint left the run.
    """

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
        max_supersteps: int | None,
        timeout: float | None,
        on_interrupt: Callable[[Interrupt], Any] | None,
        wall_clock: bool,
        record_events: bool = True,
        thread_explicit: bool = False,
        features: StoreFeatures | None = None,
    ) -> None:
        # What runs, where, on which clock.
        self.graph = graph
        self.store = store
        self.clock = clock
        self.seed = seed
        self.run_id = run_id
        self.thread_id = thread_id
        self.tenant_id = tenant_id
        self.max_supersteps = max_supersteps
        self.timeout = timeout
        self.on_interrupt = on_interrupt
        self.wall_clock = wall_clock
        self.features: StoreFeatures = features_of(store) if features is None else features
        """What the store supports, read once for the leg."""
        self.durable = self.features.events
        self.deferred = False  # set by the CheckpointWriter: commits go with the events
        self.record_events = record_events or self.durable
        self.thread_explicit = thread_explicit
        self.hooks: HookTable | None = None
        """The leg's middleware and guardrails (``_hooks.hook_table``), if any."""
        # Breakpoints: the graph's and this leg's.
        self.break_before = graph.interrupt_before
        self.break_after = graph.interrupt_after
        self.passed: set[str] = set()  # tasks whose before-breakpoint the run has passed
        self.breakpoint: Breakpoint | None = None  # where the leg paused for a breakpoint
        self.hex = run_id[4:] if run_id.startswith("run-") else run_id
        # Where the run stands (what a checkpoint records).
        self.state = state
        self.model: BaseModel | None = None
        self.step = 0
        self.tasks: list[TaskRecord] | None = None
        self.completed: dict[str, TaskOutput] = {}
        self.answers: dict[str, Any] = {}
        self.deadlines: dict[str, datetime] = {}
        """The deadlines of the questions the leg resumed with: asked again, they keep them."""
        self.expired: list[tuple[Interrupt, str, str | None, Any]] = []
        """The questions this leg resumed to expire: (question, action, route node, answer)."""
        self.tool_calls: dict[str, dict[str, Any]] = {}
        """Recorded results of ``write``/``external``/``human`` tool calls by call key
        (``<task_id>:tool-<n>``): a task that runs again replays them (see ``_tools``)."""
        self.visited = Visited([])
        self.arrivals: dict[str, list[str]] = {}
        self.seq = 0
        self.parent_id: str | None = None
        self.resumed_from: str | None = None
        self.cp_counter = 0
        self.task_counter = 0
        # The leg's progress and end.
        self.started = False
        self.done = False
        self.status: str | None = None
        self.error: BaseException | None = None
        self.interrupts: list[Interrupt] = []
        self.checkpoint_id: str | None = None
        self.supersteps = 0
        self.cancel_requested = False
        self.cancel_after: float | None = None
        """``cancel_after=``: reaching this many seconds into the leg cancels it."""
        self.scope: anyio.CancelScope | None = None
        self.deadline: float | None = None
        self.deadline_ns: int | None = None
        self.started_at: datetime | None = None
        self.ended_at: datetime | None = None
        self.batch: list[Outcome] | None = None  # the running batch's outcomes, while it runs
        self.start_order: list[str] = []
        # Observers the runtime attaches: its run record and a recording leg.
        self.record: Any = None
        self.leg: Any = None
        # The leg's claim on its thread (a ThreadClaim, attached by the runtime), and the
        # checkpoints of the current piece a durable store commits with its events.
        self.claim: Any = None
        self.pending: list[Any] = []
        # How a Subgraph node runs its child (set by the runtime, see _subgraph); the child
        # threads of the pending subgraph tasks (task id -> thread) and the checkpoint each
        # child paused at; whether this leg resumed from a checkpoint other than its run's
        # latest (time travel); and, in a child run, the Command(graph=PARENT) that ended it.
        self.subgraph_runner: Any = None
        self.child_threads: dict[str, str] = {}
        self.child_checkpoints: dict[str, str] = {}
        self.time_travel = False
        self.branch = False  # the leg's first checkpoint goes on from an earlier one
        self.parent_command: Any = None
        # A leg driven by astep: a cancelled superstep keeps nothing (seed 004).
        self.stepping = STEPPING.get()

    def continue_from(
        self,
        checkpoint: Any,
        *,
        answers: dict[str, Any],
        seq: int,
        cp_counter: int,
        task_counter: int,
    ) -> None:
        """Place a resumed leg where ``checkpoint`` left the run."""
        cp = checkpoint
        self.step = cp.next_step
        self.tasks = list(cp.tasks)
        self.completed = dict(cp.completed)
        self.answers = answers
        self.deadlines = {i.key: i.deadline for i in cp.interrupts if i.deadline is not None}
        self.tool_calls = dict(cp.metadata.get("tool_calls", {}))
        self.visited = Visited(list(cp.visited))
        self.arrivals = {k: list(v) for k, v in cp.arrivals.items()}
        self.seq = seq
        self.parent_id = cp.id
        self.resumed_from = cp.id
        self.cp_counter = cp_counter
        self.task_counter = task_counter
        self.passed = set(cp.metadata.get("breakpoint_passed", ()))
        self.child_threads = dict(cp.metadata.get("subgraph_threads", {}))
        self.child_checkpoints = dict(cp.metadata.get("subgraph_checkpoints", {}))
        self.time_travel = bool(cp.metadata.get("time_travel"))

    async def run_subgraph(self, sub: Any, state: BaseModel, ctx: Any) -> Any:
        """Run a subgraph node's child run (see :mod:`._subgraph`); the runtime that built
        this leg provides how (``subgraph_runner``)."""
        if self.subgraph_runner is None:  # pragma: no cover - the runtime always sets it
            raise RuntimeError("this leg cannot run subgraphs")
        return await self.subgraph_runner(self, sub, state, ctx)

    def set_breakpoints(self, before: frozenset[str], after: frozenset[str]) -> None:
        """Add this leg's own breakpoints to the graph's."""
        self.break_before = self.graph.interrupt_before | before
        self.break_after = self.graph.interrupt_after | after

    def hooks_of(self, node: str) -> NodeHooks | None:
        """The middleware and guardrails around tasks of ``node`` in this leg, if any."""
        return None if self.hooks is None else self.hooks.get(node)

    def runs_inline(self, spec: NodeSpec) -> bool:
        """Whether a task of ``spec`` may run inline: a sync node without retries, and no
        async hook around it."""
        if spec.is_async or spec.retry is not None:
            return False
        hooks = self.hooks_of(spec.name)
        return hooks is None or not hooks.is_async

    def next_checkpoint_id(self) -> str:
        """A new checkpoint id: the run's and a counter."""
        self.cp_counter += 1
        return f"cp-{self.hex}-{self.cp_counter}"

    def new_task(
        self,
        node: str,
        failure: dict[str, Any] | None = None,
        item: Any = None,
        has_item: bool = False,
        checkpoint_id_before: str | None = None,
    ) -> TaskRecord:
        """A new task of ``node`` with the next task id."""
        self.task_counter += 1
        return make(TaskRecord, task_id=f"task-{self.hex}-{self.task_counter}", node=node,
                    item=item, has_item=has_item, checkpoint_id_before=checkpoint_id_before,
                    failure=failure)

    def event(self, cls: type[EventBase], step: int, **fields: Any) -> Any:
        """The next event of the leg (numbered even when events are not recorded)."""
        self.seq += 1
        if not self.record_events:
            return UNRECORDED
        return _ev(cls, seq=self.seq - 1, run_id=self.run_id, step=step, **fields)

    def copy_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """Events carry copies: mutating one changes nothing in the run."""
        return jcopy(state) if self.record_events else state

    def stamp(self, events: list[Any]) -> list[Any]:
        """Give a piece's events the time they are yielded at."""
        if not self.record_events:
            return [e for e in events if type(e) is StepState]
        now = self.clock.now()
        for ev in events:
            if type(ev) is not StepState:
                ev.__dict__["time"] = now
        return events
