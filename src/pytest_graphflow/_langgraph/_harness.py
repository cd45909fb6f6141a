"""``LangGraphHarness``: a user's own LangGraph graph under deterministic test machinery.

The harness runs the graph with LangGraph itself (``astream``), unchanged, on a
:class:`SeededLoop` under a :class:`VirtualClock`, with the graph's checkpointer wrapped in a
:class:`FaultySaver`, and returns our :class:`Trace` (events, result, saver call log).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any, cast

import anyio.to_thread
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import StateGraph
from langgraph.types import Command

from .._engine._results import EventLog, GraphResult, RunLeg, Trace
from .._records._events import Interrupt
from .._stores._faulty import FaultyStore
from .._time import _wallclock
from .._time._clock import VirtualClock
from .._time._rng import ScheduleRng
from ..errors import InvalidArgument, NotSuspended, ResumeError
from ._convert import jsonable
from ._ids import ID_SOURCE, IdSource, install_id_hooks
from ._loop import LEG, LegContext, SeededLoop, install_loop_hooks
from ._record import LegRecorder
from ._saver import FaultySaver, SaverOp

__all__ = ["LangGraphHarness"]

_NO_ANSWER: Any = object()


class LangGraphHarness:
    """Runs a compiled LangGraph graph (or a ``StateGraph`` builder) deterministically.

    Same graph, input and seed give the same events, byte for byte, in any process:
    checkpoint, task and interrupt ids, ``add_messages`` ids, retry jitter and every time are
    derived from the seed and the virtual clock. Each call (:meth:`trace`, :meth:`resume`)
    is one *leg* of one run on one thread; ``seq`` continues across legs.

    Example:
        >>> h = LangGraphHarness(builder, seed=1)
        >>> trace = h.trace({"messages": [("user", "hi")]})
        >>> trace = h.resume("approve")        # Command(resume="approve")

    Args:
        graph: a compiled graph (``builder.compile(...)``) or a ``StateGraph`` builder.
        seed: decides the order parallel tasks start and interleave in, and every id.
        clock: the virtual clock (default: a fresh :class:`VirtualClock`).
        saver: the checkpoint saver to wrap; default: the graph's own checkpointer, else an
            ``InMemorySaver``. A :class:`FaultySaver` is used as is.
        faults: a :class:`~pytest_graphflow.FaultyStore` (the ``store_faults`` fixture) whose
            rules apply to the saver too (``save`` = ``put``, ``get`` = ``get_tuple``,
            ``delete`` = ``delete_thread``).
        thread_id: the thread (default: derived from the seed).
        durability: LangGraph's ``durability`` (``"sync"``, ``"async"``, ``"exit"``);
            default: LangGraph's.
        config: more run config (``recursion_limit``, ``configurable`` keys, ...).
        on_leg: called with a :class:`RunLeg` as each leg starts; it fills in as the leg
            goes (the plugin's failure report shows the last one: path, diagram, events).
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
        if isinstance(graph, StateGraph):
            inner = saver if saver is not None else InMemorySaver()
            self.saver = inner if isinstance(inner, FaultySaver) else FaultySaver(inner)
            self.graph: Any = graph.compile(checkpointer=self.saver)
        elif hasattr(graph, "astream") and hasattr(graph, "copy"):
            own = getattr(graph, "checkpointer", None)
            inner = saver if saver is not None else (
                own if isinstance(own, BaseCheckpointSaver) else InMemorySaver())
            self.saver = inner if isinstance(inner, FaultySaver) else FaultySaver(inner)
            self.graph = graph.copy(update={"checkpointer": self.saver})
        else:
            raise InvalidArgument(
                f"LangGraphHarness(graph={graph!r}): pass a compiled LangGraph graph "
                "(builder.compile()) or a StateGraph builder")
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
        self.revision = _revision(self.graph)
        self.events = EventLog()
        self.start_steps: list[tuple[int, int, str, str]] = []
        self.generated_ids: list[str] = []
        self._legs = 0
        self._known: dict[str, Interrupt] = {}
        self.last: GraphResult[Any] | None = None

    # ------------------------------------------------------------------ running

    def trace(self, input: Any = None) -> Trace:
        """Run the graph on ``input`` until it ends or pauses at an interrupt.

        ``input`` is what ``graph.invoke`` takes (a state dict, a ``Command``, or ``None`` to
        continue the thread from its last checkpoint). A node's exception ends the leg with
        status ``failed`` (``result.error`` is the exception LangGraph raised); an exception
        the saver raised (a rejected save, a simulated crash) propagates unchanged, as plain
        LangGraph would raise it.

        Returns:
            The leg's :class:`Trace` (``events``, ``result``, ``store_log``: the saver calls).
        """
        return self._leg(input)

    def invoke(self, input: Any = None) -> GraphResult[Any]:
        """:meth:`trace`, returning only the result."""
        return self._leg(input).result

    def resume(self, answer: Any = _NO_ANSWER, *,
               answers: Mapping[str, Any] | None = None) -> Trace:
        """Continue the thread: answer its pending interrupt(s), or (no answer) go on from
        the last saved checkpoint after a failure, a rejected save or a crash.

        Args:
            answer: the answer to the one pending interrupt (``Command(resume=answer)``).
            answers: answers by :attr:`Interrupt.key`, LangGraph interrupt id, or node name.

        Raises:
            NotSuspended: an answer was given but no interrupt is pending.
            ResumeError: several interrupts are pending and ``answer`` was given, or a key of
                ``answers`` names no pending interrupt.
        """
        if answer is _NO_ANSWER and answers is None:
            return self._leg(None)
        pending = self.pending_interrupts()
        if not pending:
            raise NotSuspended(f"resume on thread {self.thread_id!r}: no interrupt is pending;"
                               " call resume() without an answer to continue the thread")
        if answers is None:
            if len(pending) > 1:
                raise ResumeError(
                    f"resume({answer!r}): {len(pending)} interrupts are pending "
                    f"({', '.join(i.key for i in pending)}); pass answers={{key: value}}")
            return self._leg(Command(resume=answer))
        mapped: dict[str, Any] = {}
        for key, value in answers.items():
            match = [i for i in pending if key in (i.key, i.id, i.node)]
            if len(match) != 1:
                raise ResumeError(
                    f"resume(answers={{{key!r}: ...}}): {key!r} names "
                    f"{'no' if not match else 'more than one'} pending interrupt; pending: "
                    f"{', '.join(f'{i.key} (node {i.node})' for i in pending)}")
            mapped[match[0].id] = value
        return self._leg(Command(resume=mapped))

    async def atrace(self, input: Any = None) -> Trace:
        """:meth:`trace` from async code (the run uses its own loop, on a worker thread).

        This is also how to drive a saver whose sync methods hand each call to the event
        loop that opened it (``AsyncSqliteSaver``): open it in the test's loop and await
        ``atrace``/``aresume`` there.
        """
        return await anyio.to_thread.run_sync(self._leg, input)

    async def aresume(self, answer: Any = _NO_ANSWER, *,
                      answers: Mapping[str, Any] | None = None) -> Trace:
        """:meth:`resume` from async code."""
        return await anyio.to_thread.run_sync(lambda: self.resume(answer, answers=answers))

    def pending_interrupts(self) -> list[Interrupt]:
        """The interrupts the thread waits on (after the last leg)."""
        return [] if self.last is None else list(self.last.interrupts.values())

    def state(self) -> dict[str, Any]:
        """The thread's current values, read from the inner saver (not logged)."""
        snapshot = self.graph.copy(update={"checkpointer": self.saver.inner}).get_state(
            {"configurable": {"thread_id": self.thread_id}})
        return dict(snapshot.values)

    async def astate(self) -> dict[str, Any]:
        """:meth:`state` from async code (read on a worker thread, as an ``AsyncSqliteSaver``
        needs)."""
        return await anyio.to_thread.run_sync(self.state)

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

    def _leg(self, input: Any) -> Trace:
        self._check_saver_loop()
        self._legs += 1
        leg_no = self._legs
        rng = ScheduleRng(self.seed, self.run_id, leg_no)
        ids = IdSource(self.clock, f"{self.thread_id}:{leg_no}")
        writes: dict[str, list[tuple[str, Any]]] = {}
        recorder = LegRecorder(self.clock, self.run_id, len(self.events), self._known,
                               self.saver.task_nodes, writes)
        resumed_from = self._latest_checkpoint()
        first_call = len(self.saver.calls)

        def listen(info: SaverOp, payload: Any) -> None:
            if info.op == "get_tuple" and payload is not None:
                ids.observe(payload.config.get("configurable", {}).get("checkpoint_id"))
            recorder.on_saver(info, payload)

        self.saver.listeners.append(listen)
        record = RunLeg(cast("Any", _GraphView(self.graph, self.graph_id)), self.run_id,
                        resumed=leg_no > 1, seed=self.seed)
        if self.on_leg is not None:
            self.on_leg(record)
        started: list[tuple[int, str, str]] = []
        outcome: dict[str, Any] = {}
        driver = _wallclock.activate()
        try:
            with asyncio.Runner(loop_factory=lambda: SeededLoop(self.clock, rng)) as runner:
                runner.run(self._main(input, recorder, ids, started, writes, resumed_from,
                                      outcome))
        except BaseException as exc:
            record.error = exc
            raise
        finally:
            record.events.extend(recorder.events)
            record.visited.extend(e.node for e in recorder.events
                                  if e.type == "node_end" and e.node)  # type: ignore[attr-defined]
            _wallclock.deactivate(driver)
            self.saver.listeners.remove(listen)
            self.events.extend(recorder.events)
            self.start_steps.extend((leg_no, *s) for s in started)
            self.generated_ids.extend(ids.generated)
        error = outcome.get("error")
        status = outcome["status"]
        interrupts = {}
        for iid in recorder.pending:
            if iid in self._known:
                interrupts[self._known[iid].key] = self._known[iid]
        data = jsonable(recorder.values or {})
        result: GraphResult[Any] = GraphResult(
            state=dict(recorder.values or {}), data=data, status=status, run_id=self.run_id,
            thread_id=self.thread_id, step=recorder.step, checkpoint_id=recorder.checkpoint_id,
            interrupts=interrupts, error=error)
        self.last = result
        return Trace(result, EventLog(list(recorder.events)), self.saver.calls[first_call:])

    def _latest_checkpoint(self) -> str | None:
        """The id of the thread's newest checkpoint (read from the inner saver, unlogged)."""
        found = self.saver.inner.get_tuple({"configurable": {"thread_id": self.thread_id}})
        if found is None:
            return None
        return str(found.config.get("configurable", {}).get("checkpoint_id")) or None

    async def _main(self, input: Any, recorder: LegRecorder, ids: IdSource,
                    started: list[tuple[int, str, str]],
                    writes: dict[str, list[tuple[str, Any]]], resumed_from: str | None,
                    outcome: dict[str, Any]) -> None:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, SeededLoop)
        ID_SOURCE.set(ids)
        LEG.set(LegContext(loop, self.clock, started, writes, self.saver.task_nodes,
                           self.thread_id))
        _wallclock.NODE_CLOCK.set(self.clock)
        configurable = {**dict(self.config.get("configurable") or {}),
                        "thread_id": self.thread_id}
        config = {**self.config, "configurable": configurable}
        kwargs: dict[str, Any] = {"stream_mode": ["debug", "values"]}
        if self.durability is not None:
            kwargs["durability"] = self.durability
        recorder.run_start(self.graph_id, self.revision, self.thread_id, resumed_from,
                           0 if self.last is None else self.last.step)
        try:
            async for mode, chunk in self.graph.astream(input, config, **kwargs):
                recorder.chunk(mode, chunk)
        except Exception as exc:
            recorder.flush()
            if self.saver.raised(exc):
                raise
            recorder.run_end("failed", exc)
            outcome.update(status="failed", error=exc)
            return
        status = "interrupted" if recorder.pending else "completed"
        recorder.run_end(status)
        outcome.update(status=status)


class _GraphView:
    """What a :class:`RunLeg` needs of a graph (id, Mermaid), for a LangGraph graph."""

    def __init__(self, graph: Any, graph_id: str) -> None:
        self.graph_id = graph_id
        self._graph = graph

    def mermaid(self, path: Any = None) -> str:
        """LangGraph's own Mermaid drawing of the graph (the path is not drawn)."""
        return str(self._graph.get_graph().draw_mermaid())


def _revision(graph: Any) -> str:
    """A stable hash of the graph's structure (nodes, channels, edges)."""
    builder = getattr(graph, "builder", None)
    parts = {
        "nodes": sorted(map(str, getattr(graph, "nodes", {}))),
        "channels": sorted(map(str, getattr(graph, "channels", {}))),
        "edges": sorted(map(str, getattr(builder, "edges", ()) or ())),
        "branches": sorted(f"{k}:{sorted(v)}" for k, v in
                           (getattr(builder, "branches", {}) or {}).items()),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]

