"""``LangGraphHarness``: a user's own LangGraph graph under deterministic test machinery.

The harness runs the graph with LangGraph itself (``astream``), unchanged, on a
:class:`SeededLoop` under a :class:`VirtualClock`, with the graph's checkpointer wrapped in a
:class:`FaultySaver`, and returns our :class:`Trace` (events, result, saver call log).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast, overload

import anyio.to_thread
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import StateGraph
from langgraph.types import Command, StateSnapshot

from .._engine._options import check_cancel_after, check_cancel_at
from .._engine._results import EventLog, GraphResult, RunLeg, Trace
from .._records._events import Breakpoint, Interrupt
from .._stores.faults._store import FaultyStore
from .._time import _wallclock
from .._time._clock import VirtualClock
from .._time._rng import ScheduleRng
from ..errors import Cancelled, InvalidArgument, NotSuspended, ResumeError
from ._cancel import CancelAt
from ._convert import jsonable
from ._ids import ID_SOURCE, IdSource, install_id_hooks
from ._loop import (
    LEG,
    LegContext,
    SeededLoop,
    TaskStart,
    ensure_time_hooks,
    install_loop_hooks,
    run_leg,
)
from ._order import install_order_hooks, stable_order
from ._record import LegRecorder
from ._replay_order import replay_order
from ._saver import FaultySaver, SaverOp

__all__ = ["LangGraphHarness"]

_NO_ANSWER: Any = object()


class LangGraphHarness:
    """Runs a compiled LangGraph graph (or a ``StateGraph`` builder) deterministically.

    Same graph, input and seed give the same events, byte for byte, in any process:
    checkpoint, task and interrupt ids, ``add_messages`` ids, retry jitter and every time are
    derived from the seed and the virtual clock. Each call (:meth:`trace`, :meth:`resume`)
    is one *leg* of one run on one thread; ``seq`` continues across legs.

    A subgraph's events are logged in its namespace, as LangGraph's ``subgraphs=True``
    stream has them: ``custom`` events on channel ``"subgraph"`` (``{"path", "namespace",
    "event"}``) carried by the subgraph node's task; :meth:`state` with ``subgraphs=True``
    is LangGraph's ``get_state(config, subgraphs=True)``.

    Example:
        >>> h = LangGraphHarness(builder, seed=1)
        >>> trace = h.trace({"messages": [("user", "hi")]})
        >>> trace = h.resume("approve")        # Command(resume="approve")

    Args:
        graph: a compiled graph (``builder.compile(...)``) or a ``StateGraph`` builder.
        seed: decides the order parallel tasks start and interleave in, and every id.
        clock: the virtual clock (default: a fresh :class:`VirtualClock`).
        saver: the checkpoint saver to wrap; default: a fresh ``InMemorySaver`` for this
            harness (a checkpointer compiled into the graph is not used, so a module-level
            one cannot carry threads from test to test). A :class:`FaultySaver` is used as
            is.
        faults: a :class:`~pytest_graphflow.FaultyStore` (the ``store_faults`` fixture) whose
            rules apply to the saver too (``save`` = ``put``, ``get`` = ``get_tuple``,
            ``delete`` = ``delete_thread``).
        thread_id: the thread (default: derived from the seed).
        durability: LangGraph's ``durability`` (``"sync"``, ``"async"``, ``"exit"``);
            default: LangGraph's.
        config: more run config (``recursion_limit``, ``configurable`` keys, ...).
        on_leg: called with a :class:`RunLeg` as each leg starts; it fills in as the leg
            goes (the plugin's failure report shows the last one: path, diagram, events).
        interrupt_before: static breakpoints for every leg (node names, or ``"*"``), as
            LangGraph's per-run ``invoke(..., interrupt_before=...)``; breakpoints compiled
            into the graph apply too. A leg that stops at one ends ``interrupted`` with
            ``result.breakpoint`` naming the node(s); :meth:`resume` without an answer
            continues (LangGraph's ``invoke(None, config)``).
        interrupt_after: the same, after the nodes ran.
        context: the run context of every leg (LangGraph's ``invoke(..., context=...)``, read
            by nodes through ``Runtime[Context]``).
    """

    def __init__(
        self,
        graph: Any,
        *,
        seed: int = 0,
        clock: VirtualClock | None = None,
        saver: BaseCheckpointSaver[Any] | None = None,
        faults: FaultyStore | None = None,
        thread_id: str | None = None,
        durability: str | None = None,
        config: Mapping[str, Any] | None = None,
        on_leg: Callable[[RunLeg], None] | None = None,
        interrupt_before: Sequence[str] | str | None = None,
        interrupt_after: Sequence[str] | str | None = None,
        context: Any = None,
    ) -> None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise InvalidArgument(f"LangGraphHarness(seed={seed!r}): seed must be an int")
        if clock is not None and not isinstance(clock, VirtualClock):
            raise InvalidArgument(
                f"LangGraphHarness(clock={clock!r}): the harness needs a VirtualClock")
        if durability not in (None, "sync", "async", "exit"):
            raise InvalidArgument(f"LangGraphHarness(durability={durability!r}): use "
                                  "'sync', 'async' or 'exit'")
        install_id_hooks()
        install_loop_hooks()
        install_order_hooks()
        self.source = graph
        """The graph as passed (what ``--graphflow-processes`` imports again)."""
        self.own_saver = saver is None or _fresh_memory(saver)
        """Whether a fresh interpreter can make the saver again: the harness made it, or the
        test passed an empty ``InMemorySaver`` (bare or in a ``FaultySaver``)."""
        self.shared_saver = saver is not None
        """Whether the test passed the saver (another harness or call may write to it)."""
        self.replay_broken = ""
        """Why the legs cannot be replayed alone: something else wrote to the thread."""
        self._saved_last: str | None = None
        self.replay_calls: list[tuple[str, Any, int, int]] = []
        """Each leg's input and ``update_state`` call, with the virtual instant (ns since
        the clock's start) it began at and its place among every harness's calls."""
        self.replay_spent: dict[int, int] = {}
        """How many saver calls each of :attr:`replay_calls` made, by its place (the
        saver's other calls are not the harness's)."""
        self.replay_born = replay_order()
        """This harness's place among every harness's calls (made before its first)."""
        self.interrupt_before_arg = interrupt_before
        self.interrupt_after_arg = interrupt_after
        if isinstance(graph, StateGraph):
            inner = saver if saver is not None else InMemorySaver()
            self.saver = inner if isinstance(inner, FaultySaver) else FaultySaver(inner)
            self.graph: Any = graph.compile(checkpointer=self.saver)
        elif hasattr(graph, "astream") and hasattr(graph, "copy"):
            # A checkpointer compiled into the graph (often at module level, shared by every
            # test importing it) is never used: each harness gets a fresh saver, so one
            # test's threads cannot leak into another's. Pass saver= to use one on purpose.
            inner = saver if saver is not None else InMemorySaver()
            self.saver = inner if isinstance(inner, FaultySaver) else FaultySaver(inner)
            self.graph = _with_saver(graph, self.saver)
        else:
            raise InvalidArgument(
                f"LangGraphHarness(graph={graph!r}): pass a compiled LangGraph graph "
                "(builder.compile()) or a StateGraph builder")
        # Edges in a stable order, not the interpreter's string hashes (PYTHONHASHSEED);
        # a compiled graph is ordered once (its copies share its node table).
        stable_order(self.graph if isinstance(graph, StateGraph) else graph)
        # The harness's graph updates state with owned ids too (h.graph.update_state(...)).
        self._update_state = self.graph.update_state
        self.graph.update_state = _owned_update_of(self)
        self.seed = seed
        self.clock = clock if clock is not None else VirtualClock()
        self.saver.bind_clock(self.clock)
        if faults is not None:
            self.saver.link(faults)
        token = hashlib.sha256(f"graphflow-langgraph-run:{seed}".encode()).hexdigest()[:12]
        self.run_id = f"run-{token}"
        self.thread_id = thread_id if thread_id is not None else f"thread-{token}"
        self.durability = durability
        self.config = dict(config or {})
        self.on_leg = on_leg
        self.graph_id = str(getattr(self.graph, "name", None) or "LangGraph")
        self.interrupt_before = _breakpoints(self.graph, "interrupt_before", interrupt_before)
        self.interrupt_after = _breakpoints(self.graph, "interrupt_after", interrupt_after)
        self.context = context
        self.revision = _revision(self.graph, None if isinstance(graph, StateGraph) else graph)
        self.events = EventLog()
        self.start_steps: list[tuple[int, TaskStart]] = []
        self.generated_ids: list[str] = []
        self._legs = 0
        self._known: dict[str, Interrupt] = {}
        self._child_seq: dict[str, int] = {}
        self.last: GraphResult[Any] | None = None
        self._reader_graph: Any = None
        self._plain: bool | None = None

    # ------------------------------------------------------------------ running

    def trace(self, input: Any = None, *, cancel_after: float | None = None,
              cancel_at: Any = None) -> Trace:
        """Run the graph on ``input`` until it ends or pauses at an interrupt.

        ``input`` is what ``graph.invoke`` takes (a state dict, a ``Command``, or ``None`` to
        continue the thread from its last checkpoint). A node's exception ends the leg with
        status ``failed`` (``result.error`` is the exception LangGraph raised); an exception
        the saver raised (a rejected save, a simulated crash) propagates unchanged, as plain
        LangGraph would raise it.

        ``cancel_after=`` seconds cancels the leg at that virtual instant, as a cancelled
        ``ainvoke`` would be in production (a deploy, a stopped worker): status
        ``cancelled``, ``result.error`` a :class:`~pytest_graphflow.Cancelled`; the tasks
        that finished keep their saved writes, and :meth:`resume` (no answer), here or in a
        fresh harness over the same saver, continues the thread.

        ``cancel_at=`` cancels the leg right after its first event that matches: one item of
        :func:`~pytest_graphflow.assert_events`'s pattern language (``"node_end:search"``,
        ``"* seq=12"``, a dict of field matchers, an event, or a predicate on the event). The
        leg is cut at that virtual instant, inside its step: no time passes and no waiting
        task starts or wakes first; the tasks still running get a ``CancelledError`` event,
        the finished ones keep their saved writes, as with ``cancel_after``. Events LangGraph
        reported together with the match (the rest of a step's starts) are logged too.
        An event that no longer leaves anything to cancel (the last checkpoint, ``run_end``)
        cancels nothing; a matcher that never matches changes nothing.

        Returns:
            The leg's :class:`Trace` (``events``, ``result``, ``store_log``: the saver calls).
        """
        return self._leg(input, cancel_after, cancel_at)

    def invoke(self, input: Any = None) -> GraphResult[Any]:
        """:meth:`trace`, returning only the result."""
        return self._leg(input).result

    def resume(self, answer: Any = _NO_ANSWER, *,
               answers: Mapping[str, Any] | None = None,
               cancel_after: float | None = None, cancel_at: Any = None) -> Trace:
        """Continue the thread: answer its pending interrupt(s), or (no answer) go on from
        the last saved checkpoint after a failure, a rejected save or a crash.

        Args:
            answer: the answer to the one pending interrupt (``Command(resume=answer)``).
            answers: answers by :attr:`Interrupt.key`, LangGraph interrupt id, or node name.
            cancel_after: cancel this leg at that many virtual seconds (see :meth:`trace`).
            cancel_at: cancel this leg right after its first event that matches (see
                :meth:`trace`).

        Raises:
            NotSuspended: an answer was given but no interrupt is pending.
            ResumeError: several interrupts are pending and ``answer`` was given, or a key of
                ``answers`` names no pending interrupt.
        """
        if answer is _NO_ANSWER and answers is None:
            return self._leg(None, cancel_after, cancel_at)
        pending = self.pending_interrupts()
        paused = None if self.last is None else self.last.breakpoint
        if not pending and paused is not None:
            raise ResumeError(
                f"resume on thread {self.thread_id!r}: the thread paused at a breakpoint "
                f"{paused.when} {', '.join(paused.nodes)}, which has nothing to answer; call "
                "resume() without an answer to continue")
        if not pending:
            raise NotSuspended(f"resume on thread {self.thread_id!r}: no interrupt is pending;"
                               " call resume() without an answer to continue the thread")
        if answers is None:
            if len(pending) > 1:
                raise ResumeError(
                    f"resume({answer!r}): {len(pending)} interrupts are pending "
                    f"({', '.join(i.key for i in pending)}); pass answers={{key: value}}")
            return self._leg(Command(resume=answer), cancel_after, cancel_at)
        mapped: dict[str, Any] = {}
        for key, value in answers.items():
            match = [i for i in pending if key in (i.key, i.id, i.node)]
            if len(match) != 1:
                raise ResumeError(
                    f"resume(answers={{{key!r}: ...}}): {key!r} names "
                    f"{'no' if not match else 'more than one'} pending interrupt; pending: "
                    f"{', '.join(f'{i.key} (node {i.node})' for i in pending)}")
            mapped[match[0].id] = value
        return self._leg(Command(resume=mapped), cancel_after, cancel_at)

    async def atrace(self, input: Any = None, *, cancel_after: float | None = None,
                     cancel_at: Any = None) -> Trace:
        """:meth:`trace` from async code (the run uses its own loop, on a worker thread).

        This is also how to drive a saver whose sync methods hand each call to the event
        loop that opened it (``AsyncSqliteSaver``): open it in the test's loop and await
        ``atrace``/``aresume`` there.
        """
        return await anyio.to_thread.run_sync(self._leg, input, cancel_after, cancel_at)

    async def aresume(self, answer: Any = _NO_ANSWER, *,
                      answers: Mapping[str, Any] | None = None,
                      cancel_after: float | None = None, cancel_at: Any = None) -> Trace:
        """:meth:`resume` from async code."""
        return await anyio.to_thread.run_sync(lambda: self.resume(
            answer, answers=answers, cancel_after=cancel_after, cancel_at=cancel_at))

    def pending_interrupts(self) -> list[Interrupt]:
        """The interrupts the thread waits on: after this harness's last leg, or (a fresh
        harness over a saved thread) as the saver has them."""
        if self.last is not None:
            return list(self.last.interrupts.values())
        reader = self._reader()
        found = []
        for task in reader.get_state(self._thread_config(None)).tasks:
            for item in task.interrupts:
                pending = Interrupt(key=f"{task.id}:{item.id}", id=str(item.id),
                                    node=str(task.name), task_id=str(task.id),
                                    payload=jsonable(item.value))
                self._known[pending.id] = pending
                found.append(pending)
        return found

    @overload
    def state(self) -> dict[str, Any]: ...

    @overload
    def state(self, *, subgraphs: bool) -> StateSnapshot: ...

    def state(self, *, subgraphs: bool | None = None) -> Any:
        """The thread's current state, read from the inner saver (not logged).

        Without arguments: the values (a dict). With ``subgraphs=`` (``True`` or
        ``False``): LangGraph's ``StateSnapshot``, what ``graph.get_state(config,
        subgraphs=...)`` returns — values, ``next``, tasks with their interrupts, pending
        interrupts, and with ``True`` the nested snapshot of each subgraph task paused
        inside its subgraph (``task.state``).
        """
        reader = self._reader()
        snapshot = reader.get_state(self._thread_config(None), subgraphs=bool(subgraphs))
        return dict(snapshot.values) if subgraphs is None else snapshot

    def update_state(self, values: Any, *, as_node: str | None = None,
                     checkpoint_id: str | None = None) -> str:
        """LangGraph's ``update_state`` on the harness's thread, with owned ids.

        The new checkpoint's id and time, and the ids ``add_messages`` gives id-less messages,
        come from the seed, the thread's saved history and the virtual clock, as in a leg
        (calling ``h.graph.update_state`` directly would draw them from the wall clock and
        the OS, and every later id would follow). It goes through the :class:`FaultySaver`
        (its rules apply; its call log shows it). Continue with :meth:`resume` (no answer).

        Args:
            values: the update (as ``graph.update_state`` takes it).
            as_node: the node the update is written as.
            checkpoint_id: update from this checkpoint instead of the newest (time travel).

        Returns:
            The id of the checkpoint the update saved.
        """
        saved = self._owned_update(self._thread_config(checkpoint_id), values, as_node)
        return str(saved["configurable"]["checkpoint_id"])

    def _owned_update(self, config: Any, values: Any, as_node: str | None = None,
                      task_id: str | None = None) -> Any:
        """``update_state`` of the harness's graph (also what ``h.graph.update_state`` is):
        ids salted by the thread and the checkpoint it extends, times from the clock."""
        order = replay_order()
        self.replay_calls.append(("update", (config, values, as_node, task_id),
                                  self.clock.elapsed_ns, order))
        spent = len(self.saver.calls)
        conf = dict((config or {}).get("configurable") or {})
        thread = str(conf.get("thread_id", self.thread_id))
        latest = self.saver.inner.get_tuple({"configurable": {"thread_id": thread}})
        newest = None if latest is None else latest.config["configurable"]["checkpoint_id"]
        ids = IdSource(self.clock, f"{thread}:{conf.get('checkpoint_id') or newest}:update",
                       place_salt=f"{thread}:update")
        ids.observe(newest)
        driver = _wallclock.activate()
        id_token = ID_SOURCE.set(ids)
        clock_token = _wallclock.NODE_CLOCK.set(self.clock)
        try:
            saved = self._update_state(config, values, as_node=as_node, task_id=task_id)
            if self.shared_saver and thread == self.thread_id and newest == self._saved_last:
                self._saved_last = str(saved["configurable"]["checkpoint_id"])
            return saved
        finally:
            self.replay_spent[order] = len(self.saver.calls) - spent
            _wallclock.NODE_CLOCK.reset(clock_token)
            ID_SOURCE.reset(id_token)
            _wallclock.deactivate(driver)
            self.generated_ids.extend(ids.generated)

    async def aupdate_state(self, values: Any, *, as_node: str | None = None,
                            checkpoint_id: str | None = None) -> str:
        """:meth:`update_state` from async code (on a worker thread)."""
        return await anyio.to_thread.run_sync(lambda: self.update_state(
            values, as_node=as_node, checkpoint_id=checkpoint_id))

    def state_history(self, *, limit: int | None = None) -> list[Any]:
        """LangGraph's ``get_state_history`` for the harness's thread, newest first, read
        from the inner saver (not logged): ``StateSnapshot`` values whose checkpoint ids
        are the seeded ones the legs saved."""
        reader = self._reader()
        return list(reader.get_state_history(self._thread_config(None), limit=limit))

    def _thread_config(self, checkpoint_id: str | None) -> dict[str, Any]:
        configurable = {**dict(self.config.get("configurable") or {}),
                        "thread_id": self.thread_id}
        if checkpoint_id is not None:
            configurable["checkpoint_id"] = checkpoint_id
        return {**self.config, "configurable": configurable}

    @overload
    async def astate(self) -> dict[str, Any]: ...

    @overload
    async def astate(self, *, subgraphs: bool) -> StateSnapshot: ...

    async def astate(self, *, subgraphs: bool | None = None) -> Any:
        """:meth:`state` from async code (read on a worker thread, as an ``AsyncSqliteSaver``
        needs)."""
        if subgraphs is None:
            return await anyio.to_thread.run_sync(self.state)
        return await anyio.to_thread.run_sync(lambda: self.state(subgraphs=subgraphs))

    async def apending_interrupts(self) -> list[Interrupt]:
        """:meth:`pending_interrupts` from async code (read on a worker thread, as an
        ``AsyncSqliteSaver`` or ``AsyncPostgresSaver`` opened in the caller's loop needs)."""
        return await anyio.to_thread.run_sync(self.pending_interrupts)

    # ------------------------------------------------------------------ one leg

    def _check_saver_loop(self) -> None:
        """Refuse a leg whose saver waits for an event loop that cannot answer: an async
        saver's sync methods (what the harness calls) hand each call to the loop that opened
        it, which must be running, on another thread."""
        inner = self.saver.inner
        loop = getattr(inner, "loop", None)
        if not isinstance(loop, asyncio.AbstractEventLoop):
            return
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if loop.is_running() and loop is not here:
            return
        raise InvalidArgument(
            f"LangGraphHarness(saver={type(inner).__name__}): the saver answers on the event "
            "loop that opened it, which is "
            + ("this thread's; await h.atrace(...)/h.aresume(...) from that loop instead of "
               "calling trace()/resume()" if loop is here else
               "not running; open the saver in an async test and await h.atrace(...)/"
               "h.aresume(...) from that loop"))

    def _leg(self, input: Any, cancel_after: float | None = None,
             cancel_at: Any = None) -> Trace:
        cancel_after = check_cancel_after(cancel_after)
        cancel_test = check_cancel_at(cancel_at)
        self._check_saver_loop()
        order = replay_order()
        if cancel_after is None and cancel_test is None:
            self.replay_calls.append(("leg", input, self.clock.elapsed_ns, order))
        else:
            self.replay_calls.append(("cancel_leg", (input, cancel_after, cancel_at),
                                      self.clock.elapsed_ns, order))
        spent = len(self.saver.calls)
        self._legs += 1
        leg_no = self._legs
        resumed_from = self._latest_checkpoint()
        if self.shared_saver and resumed_from != self._saved_last and not self.replay_broken:
            self.replay_broken = "something else wrote to its thread between its legs"
        # Salted by the checkpoint the leg extends (the thread's saved history), never by
        # this object's leg count: a fresh harness over an existing thread draws what the
        # original would have drawn there, and never an id the thread already holds.
        extends = str((self.config.get("configurable") or {}).get("checkpoint_id")
                      or resumed_from or "new")
        rng = ScheduleRng(self.seed, f"{self.run_id}:{extends}", 0)
        ids = IdSource(self.clock, f"{self.thread_id}:{extends}", place_salt=self.thread_id)
        writes: dict[str, list[tuple[str, Any]]] = {}
        recorder = LegRecorder(self.clock, self.run_id, len(self.events), self._known,
                               self.saver.task_nodes, writes, self._child_seq)
        first_call = self.saver.call_count

        def listen(info: SaverOp, payload: Any) -> None:
            if info.op == "get_tuple" and payload is not None:
                ids.observe(payload.config.get("configurable", {}).get("checkpoint_id"),
                            info.checkpoint_ns)
            recorder.on_saver(info, payload)

        self.saver.listeners.append(listen)
        record = RunLeg(cast("Any", _GraphView(self.graph, self.graph_id, self)), self.run_id,
                        resumed=leg_no > 1, seed=self.seed)
        if self.on_leg is not None:
            self.on_leg(record)
        started: list[TaskStart] = []
        outcome: dict[str, Any] = {}
        driver = _wallclock.activate()
        try:
            run_leg(self.clock, rng, lambda: self._main(
                input, recorder, ids, started, writes, resumed_from, outcome, cancel_after,
                cancel_test))
        except BaseException as exc:
            record.error = exc
            raise
        finally:
            self.replay_spent[order] = len(self.saver.calls) - spent
            record.events.extend(recorder.events)
            record.visited.extend(e.node for e in recorder.events
                                  if e.type == "node_end" and e.node)  # type: ignore[attr-defined]
            _wallclock.deactivate(driver)
            self.saver.listeners.remove(listen)
            self.events.extend(recorder.events)
            self.start_steps.extend((leg_no, s) for s in started)
            self.generated_ids.extend(ids.generated)
            if self.shared_saver:
                try:
                    self._saved_last = self._latest_checkpoint()
                except Exception:  # the leg's own error (if any) is what the caller sees
                    self.replay_broken = "its saver could not be read after a leg"
        error = outcome.get("error")
        status = outcome["status"]
        interrupts = {}
        for iid in recorder.pending:
            if iid in self._known:
                interrupts[self._known[iid].key] = self._known[iid]
        final = recorder.values if recorder.values is not None else {}
        data = jsonable(final) if isinstance(final, Mapping) else {"value": jsonable(final)}
        result: GraphResult[Any] = GraphResult(
            state=dict(final) if isinstance(final, Mapping) else final, data=data,
            status=status, run_id=self.run_id,
            thread_id=self.thread_id, step=recorder.step, checkpoint_id=recorder.checkpoint_id,
            interrupts=interrupts, error=error, breakpoint=outcome.get("breakpoint"))
        self.last = result
        return Trace(result, EventLog(list(recorder.events)), self.saver.calls_since(first_call))

    def _latest_checkpoint(self) -> str | None:
        """The id of the thread's newest checkpoint (read from the inner saver, unlogged)."""
        found = self.saver.inner.get_tuple({"configurable": {"thread_id": self.thread_id}})
        if found is None:
            return None
        return str(found.config.get("configurable", {}).get("checkpoint_id")) or None

    async def _main(self, input: Any, recorder: LegRecorder, ids: IdSource,
                    started: list[TaskStart],
                    writes: dict[str, list[tuple[str, Any]]], resumed_from: str | None,
                    outcome: dict[str, Any], cancel_after: float | None = None,
                    cancel_at: Callable[[Any], bool] | None = None) -> None:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, SeededLoop)
        ID_SOURCE.set(ids)
        ensure_time_hooks()
        LEG.set(LegContext(loop, self.clock, started, writes, self.saver.task_nodes,
                           self.thread_id, recorder.began, recorder, recorder.steps))
        _wallclock.NODE_CLOCK.set(self.clock)
        configurable = {**dict(self.config.get("configurable") or {}),
                        "thread_id": self.thread_id}
        config = {**self.config, "configurable": configurable}
        # tasks (starts and results) and values: what the events are built from; LangGraph's
        # debug mode would build each checkpoint's payload besides, which nothing reads
        kwargs: dict[str, Any] = {"stream_mode": ["tasks", "values"], "subgraphs": True}
        if self.durability is not None:
            kwargs["durability"] = self.durability
        if self.context is not None:
            kwargs["context"] = self.context
        if self.interrupt_before is not None:
            kwargs["interrupt_before"] = self.interrupt_before
        if self.interrupt_after is not None:
            kwargs["interrupt_after"] = self.interrupt_after
        cut = asyncio.timeout(None)
        watch = None if cancel_at is None else _watch_cancel_at(recorder, cancel_at, loop, cut)
        recorder.run_start(self.graph_id, self.revision, self.thread_id, resumed_from,
                           0 if self.last is None else self.last.step)
        if cancel_after is not None:
            loop.cut_at(self.clock.elapsed_ns + round(cancel_after * 1e9),
                        lambda: cut.reschedule(loop.time()))
        try:
            async with cut:
                if watch is not None:
                    watch.arm()
                async for namespace, mode, chunk in self.graph.astream(input, config,
                                                                       **kwargs):
                    recorder.chunk(mode, chunk, namespace)
        except TimeoutError as exc:
            if not cut.expired():
                raise
            # cancelled at the instant asked for, as a cancelled ainvoke: resumable
            cancelled = Cancelled(self.run_id)
            cancelled.__cause__ = exc
            recorder.values = self._returned(config, recorder.values)
            recorder.run_end("cancelled", cancelled)
            outcome.update(status="cancelled", error=cancelled)
            return
        except Exception as exc:
            recorder.flush()
            if self.saver.raised(exc):
                raise
            recorder.values = self._returned(config, recorder.values)
            recorder.run_end("failed", exc)
            outcome.update(status="failed", error=exc)
            return
        recorder.values = self._returned(config, recorder.values)
        paused = None if recorder.pending else self._breakpoint(config, recorder)
        status = "interrupted" if recorder.pending or paused else "completed"
        recorder.run_end(status, breakpoint=paused)
        outcome.update(status=status, breakpoint=paused)

    def _reader(self) -> Any:
        """The graph over the inner saver (reads are not logged), made once."""
        if self._reader_graph is None:
            self._reader_graph = _with_saver(self.graph, self.saver.inner)
        return self._reader_graph

    def _returned(self, config: Any, streamed: Any) -> Any:
        """What LangGraph returns for the leg: the saved values (not the live channel objects
        the ``values`` stream hands out, which a node may have mutated in place without
        LangGraph saving it), restricted to the graph's output schema (its output
        channels). ``streamed`` when the thread has no saved checkpoint, or a failed step
        left writes LangGraph refuses to read back (the error the leg failed with)."""
        out = getattr(self.graph, "output_channels", None)
        token = ID_SOURCE.set(None)  # a read: draws no owned ids
        try:
            if isinstance(out, (list, tuple)) and self._plain_channels(out):
                # the saved checkpoint's values are the channels' (cheaper than get_state)
                saved = self.saver.inner.get_tuple(config)
                if saved is None:
                    values = streamed
                else:
                    stored = saved.checkpoint.get("channel_values") or {}
                    values = {k: stored[k] for k in out if k in stored}
            else:
                snapshot = self._reader().get_state(config)
                values = streamed if snapshot.created_at is None else snapshot.values
        except Exception:  # a failed step whose saved writes LangGraph cannot apply
            values = streamed
        finally:
            ID_SOURCE.reset(token)
        if isinstance(values, Mapping) and isinstance(out, (list, tuple)):
            return {k: values[k] for k in out if k in values}
        return values

    def _plain_channels(self, names: Sequence[str]) -> bool:
        """Whether every channel of ``names`` saves its value as is (``LastValue``, a
        reducer's ``BinaryOperatorAggregate``), so a saved checkpoint's values are the
        state."""
        if self._plain is None:
            from langgraph.channels import BinaryOperatorAggregate, LastValue

            channels = getattr(self.graph, "channels", {})
            self._plain = all(type(channels.get(n)) in (LastValue, BinaryOperatorAggregate)
                              for n in names)
        return self._plain

    def _breakpoint(self, config: Any, recorder: LegRecorder) -> Breakpoint | None:
        """Where a leg that ended with no interrupt pending stopped at a static breakpoint
        (LangGraph's ``next`` then names the nodes still to run), or ``None``."""
        before = _merged(self.interrupt_before, getattr(self.graph, "interrupt_before_nodes",
                                                        None))
        after = _merged(self.interrupt_after, getattr(self.graph, "interrupt_after_nodes",
                                                      None))
        if not before and not after:
            return None
        reader = self._reader()
        waiting = list(reader.get_state(config).next)
        if not waiting:
            return None
        order = list(getattr(self.graph, "nodes", {}))
        # LangGraph checks interrupt_after at the end of a step, before interrupt_before.
        ran = [n for n in order if n in recorder.ended_last_step() and n in after]
        if ran:
            return Breakpoint(when="after", nodes=ran)
        stopped = [n for n in order if n in waiting and n in before] or sorted(set(waiting))
        return Breakpoint(when="before", nodes=stopped)


def _owned_update_of(harness: LangGraphHarness) -> Callable[..., Any]:
    """``h.graph.update_state``: the harness's :meth:`LangGraphHarness._owned_update`,
    holding the harness weakly (the graph is the harness's: a strong reference back would
    keep both, its saver and its events, alive until the cycle collector runs)."""
    ref = weakref.ref(harness)
    graph = weakref.ref(harness.graph)

    def update_state(config: Any, values: Any, as_node: str | None = None,
                     task_id: str | None = None) -> Any:
        owner = ref()
        if owner is not None:
            return owner._owned_update(config, values, as_node, task_id)
        target: Any = graph()
        return type(target).update_state(target, config, values, as_node=as_node,
                                         task_id=task_id)

    return update_state


def _watch_cancel_at(recorder: LegRecorder, test: Callable[[Any], bool], loop: Any,
                     cut: asyncio.Timeout) -> CancelAt:
    """``cancel_at=``: the recorder shows each event it logs to a watcher that cuts the leg
    at the first match (:mod:`._cancel`)."""
    watch = CancelAt(test, loop, cut)
    recorder.watch = watch
    return watch


class _GraphView:
    """What a :class:`RunLeg` needs of a graph (id, Mermaid), for a LangGraph graph, and the
    harness that ran the leg, held weakly: a leg recorded by ``graph_runtime.langgraph(app)``
    sits in the runtime's recordings, which the harness reaches through its ``on_leg``, so a
    strong reference made the harness, its saver and its events cyclic garbage, left to the
    collector after every use (whoever needs the harness past its user's last reference,
    ``--graphflow-processes``, keeps it)."""

    __slots__ = ("_graph", "_harness", "graph_id")

    def __init__(self, graph: Any, graph_id: str, harness: LangGraphHarness) -> None:
        self.graph_id = graph_id
        self._graph = graph
        self._harness = weakref.ref(harness)

    @property
    def harness(self) -> LangGraphHarness | None:
        """The harness that ran the leg, or ``None`` once nothing holds it."""
        return self._harness()

    def mermaid(self, path: Any = None) -> str:
        """LangGraph's own Mermaid drawing of the graph (the path is not drawn)."""
        return str(self._graph.get_graph().draw_mermaid())


class _All:
    """``"*"``: every node."""

    def __contains__(self, item: object) -> bool:
        return True

    def __bool__(self) -> bool:
        return True


def _merged(*sources: Any) -> Any:
    """The nodes named by per-run and compiled breakpoints (``"*"`` is every node)."""
    if any(s == "*" for s in sources):
        return _All()
    return {n for s in sources if s for n in s}


def _breakpoints(graph: Any, name: str, value: Sequence[str] | str | None
                 ) -> list[str] | str | None:
    """Check a per-run breakpoint list against the graph's nodes."""
    if value is None or value == "*":
        return value
    nodes = [n for n in getattr(graph, "nodes", {}) if not n.startswith("__")]
    if isinstance(value, str) or not all(isinstance(n, str) for n in value):
        raise InvalidArgument(f"LangGraphHarness({name}={value!r}): pass a list of node "
                              f"names or '*'; the graph's nodes are {nodes}")
    unknown = [n for n in value if n not in nodes]
    if unknown:
        raise InvalidArgument(f"LangGraphHarness({name}={value!r}): no node named "
                              f"{', '.join(map(repr, unknown))}; the graph's nodes are {nodes}")
    return list(value)


def _with_saver(graph: Any, saver: BaseCheckpointSaver[Any]) -> Any:
    """``graph.copy(update={"checkpointer": saver})`` without validating again the graph
    LangGraph validated when it was compiled: the copy shares the node and channel tables,
    as ``copy`` has it share them."""
    copy = object.__new__(type(graph))
    copy.__dict__.update(graph.__dict__)
    copy.__dict__.pop("__orig_class__", None)
    copy.__dict__.pop("update_state", None)  # another harness's owned update_state
    copy.checkpointer = saver
    return copy


_REVISION = "_graphflow_revision"


def _revision(graph: Any, compiled: Any = None) -> str:
    """A stable hash of the graph's structure (nodes, channels, edges); kept on
    ``compiled`` (the compiled graph passed, which cannot change) for the next harness."""
    known = None if compiled is None else compiled.__dict__.get(_REVISION)
    if known is not None:
        return str(known)
    revision = _structure_hash(graph)
    if compiled is not None:
        compiled.__dict__[_REVISION] = revision
    return revision


def _structure_hash(graph: Any) -> str:
    builder = getattr(graph, "builder", None)
    parts = {
        "nodes": sorted(map(str, getattr(graph, "nodes", {}))),
        "channels": sorted(map(str, getattr(graph, "channels", {}))),
        "edges": sorted(map(str, getattr(builder, "edges", ()) or ())),
        "branches": sorted(f"{k}:{sorted(v)}" for k, v in
                           (getattr(builder, "branches", {}) or {}).items()),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]


def _fresh_memory(saver: Any) -> bool:
    """Whether ``saver`` is an empty ``InMemorySaver`` (in a rule-less ``FaultySaver`` or
    bare), which a fresh interpreter makes again as ``InMemorySaver()``."""
    if isinstance(saver, FaultySaver):
        if saver.rules or saver.calls:
            return False
        saver = saver.inner
    return type(saver) is InMemorySaver and not saver.storage and not saver.writes
