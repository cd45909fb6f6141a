"""Streams of a run's events, and handles on a started run."""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from .._graph._builder import CompiledGraph
from .._records._events import (
    CustomEvent,
    FinalEventData,
    InterruptEventData,
    NodeEnd,
    RunEnd,
    StreamEvent,
)
from .._records._json import jcopy
from ..errors import GraphExecutionError, GraphflowError, InvalidArgument
from ._results import GraphResult, StepState
from ._runner import Runner

__all__ = ["MODES", "RunHandle", "RunStream", "collect", "drain", "run_to_end"]

MODES = ("events", "updates", "values", "custom", "debug")


def _to_views(items: list[Any], mode: str, runner: Runner) -> list[Any]:
    if mode == "events":
        return [e for e in items if type(e) is not StepState]
    out: list[Any] = []
    step_cp: dict[int, str | None] = {s.step: s.checkpoint_id for s in items
                                      if type(s) is StepState}
    for e in items:
        if type(e) is StepState:
            if mode == "values":
                out.append(StreamEvent(mode="values", data=jcopy(e.state), run_id=runner.run_id,
                                       checkpoint_id=e.checkpoint_id, step=e.step))
            elif mode == "debug":
                out.append(StreamEvent(mode="debug", data={"type": "state_merge",
                                                           "state": jcopy(e.state)},
                                       run_id=runner.run_id, checkpoint_id=e.checkpoint_id,
                                       step=e.step))
            continue
        if mode == "updates" and isinstance(e, NodeEnd):
            out.append(StreamEvent(mode="updates", data=jcopy(e.patch), node=e.node,
                                   run_id=e.run_id, checkpoint_id=step_cp.get(e.step),
                                   step=e.step, task_id=e.task_id))
        elif mode == "custom" and isinstance(e, CustomEvent):
            out.append(StreamEvent(mode="tokens" if e.channel == "tokens" else "custom",
                                   data=jcopy(e.value), node=e.node, run_id=e.run_id,
                                   step=e.step, task_id=e.task_id))
        elif mode == "debug":
            out.append(StreamEvent(mode="debug", data=e.model_dump(mode="json"), node=e.node,
                                   run_id=e.run_id, step=e.step, task_id=e.task_id))
        if isinstance(e, RunEnd):
            if e.status == "interrupted":
                data: Any = InterruptEventData(
                    state=jcopy(e.state), thread_id=runner.run.thread_id,
                    interrupts={i.key: i for i in runner.interrupts})
                out.append(StreamEvent(mode="interrupt", data=data, run_id=e.run_id,
                                       checkpoint_id=runner.run.numbers.checkpoint_id,
                                       step=e.step))
            else:
                data = FinalEventData(state=jcopy(e.state), thread_id=runner.run.thread_id)
                out.append(StreamEvent(mode="final", data=data, run_id=e.run_id,
                                       checkpoint_id=runner.run.numbers.checkpoint_id,
                                       step=e.step))
    return out


class RunStream:
    """The events of a run as an async iterator, also an async context manager.

    Safe to leave early: ``break`` at ``interrupt`` (the run already saved its checkpoint
    and released its thread), or anywhere else (the run is closed, resumable from its last
    checkpoint). ``async with runtime.stream(...) as events:`` closes it on exit.
    """

    def __init__(self, prepare: Callable[[], Awaitable[Runner]], mode: str) -> None:
        if mode not in MODES:
            raise InvalidArgument(f"stream(mode={mode!r}): use one of {list(MODES)}")
        self._prepare: Callable[[], Awaitable[Runner]] | None = prepare
        self._mode = mode
        self._buf: deque[Any] = deque()
        self.runner: Runner | None = None
        self.states: list[StepState] = []
        self._record_events = True

    def __aiter__(self) -> RunStream:
        return self

    async def _ensure(self) -> Runner:
        if self.runner is None:
            assert self._prepare is not None
            prepare, self._prepare = self._prepare, None
            self.runner = await prepare()
        return self.runner

    async def __anext__(self) -> Any:
        buf = self._buf
        while not buf:
            runner = await self._ensure()
            if runner.done:
                raise StopAsyncIteration
            self._hand_out(await runner.advance(), runner, buf)
        return buf.popleft()

    def _hand_out(self, items: list[Any], runner: Runner, out: Any) -> None:
        """Append a piece's ``items`` to ``out`` as the stream hands them out (its step states
        kept in :attr:`states`; other modes' views made of them)."""
        if self._mode == "events":
            for item in items:
                if type(item) is StepState:
                    self.states.append(item)
                else:
                    out.append(item)
        else:
            out.extend(_to_views(items, self._mode, runner))

    async def aclose(self) -> None:
        """Close the run if it has not ended (it stays resumable)."""
        if self.runner is not None:
            await self.runner.close()
        self._prepare = None

    async def __aenter__(self) -> RunStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __del__(self) -> None:
        runner = getattr(self, "runner", None)
        if runner is not None and not runner.done:
            runner.abandon()

    def result(self) -> GraphResult[Any]:
        """The run's result, once the stream is exhausted."""
        if self.runner is None or not self.runner.done:
            raise GraphExecutionError("the run has not ended yet; consume the stream first")
        return _result(self.runner)


def _result(runner: Runner) -> GraphResult[Any]:
    run = runner.run
    outcome = run.outcome
    assert outcome is not None  # only an ended leg has a result
    status = outcome.status
    bp = outcome.breakpoint
    step = run.pos.step - (1 if status == "completed" or (
        status == "interrupted" and bp is not None and bp.when == "after") else 0)
    return GraphResult._lazy(
        functools.partial(_model_of, run.spec.graph), run.pos.state,
        status=status, run_id=run.run_id,
        thread_id=run.thread_id, step=step if step > 0 else 0,  # (max(step, 0), no call)
        checkpoint_id=outcome.checkpoint_id,
        interrupts={i.key: i for i in outcome.interrupts} if outcome.interrupts else {},
        error=outcome.error if status in ("failed", "cancelled") else None,
        breakpoint=bp if status == "interrupted" else None,
    )


def _model_of(graph: CompiledGraph, data: dict[str, Any]) -> Any:
    """The result's model of the leg's final state ``data`` (its own copy)."""
    try:
        # Built without re-running validators: they ran when each key was written.
        return graph.codec.model_of(data)
    except (GraphflowError, ValueError, TypeError):  # pragma: no cover - a valid state builds
        return graph.state_model.model_construct(None, **data)


class RunHandle:
    """A started run: cancel it, or await its result (``handle = await runtime.start(...)``).

    The run advances while ``result()`` is awaited (in whichever task awaits it); ``cancel()``
    from another task cancels the running batch, joins every task and ends the run with status
    ``cancelled``, resumable without re-running the tasks that finished.
    """

    def __init__(self, stream: RunStream, run_id: str) -> None:
        self._stream = stream
        self.run_id = run_id
        self._result: GraphResult[Any] | None = None

    def cancel(self) -> None:
        """Cancel the run.

        Raises:
            GraphExecutionError: if the run has already ended.
        """
        runner = self._stream.runner
        if runner is not None and runner.done:
            raise GraphExecutionError(
                f"run {self.run_id} already ended with status {runner.status!r}; there is "
                "nothing to cancel"
            )
        if runner is not None:
            runner.cancel()

    async def result(self) -> GraphResult[Any]:
        """Run to the end (or halt) and return the result."""
        if self._result is None:
            async for _ in self._stream:
                pass
            self._result = self._stream.result()
        return self._result


async def run_to_end(runner: Runner) -> GraphResult[Any]:
    """Run ``runner``'s leg to its end and return its result (``invoke``, ``resume``: no one
    reads the events, and no stream hands them out). A leg an exception leaves unended is
    abandoned as a dropped stream's is (it stays resumable from its last checkpoint)."""
    run = runner.run
    try:
        if run.spec.leg is None:  # no observer: the pieces themselves
            while run.outcome is None:
                await runner._advance()
        else:
            while run.outcome is None:
                await runner.advance()
    except BaseException:
        if run.outcome is None:
            runner.abandon()
        raise
    return _result(runner)


async def collect(stream: RunStream, into: list[Any]) -> None:
    """Run ``stream``'s run to its end, appending to ``into`` what iterating it gives, a piece
    at a time (no ``__anext__`` an item); a crash leaves in ``into`` the pieces before it."""
    into.extend(stream._buf)
    stream._buf.clear()
    runner = await stream._ensure()
    while not runner.done:
        stream._hand_out(await runner.advance(), runner, into)


async def drain(stream: RunStream) -> GraphResult[Any]:
    """Run ``stream``'s run to its end and return its result (piece by piece: no one reads
    the events, so they are not handed out one at a time)."""
    stream._buf.clear()
    runner = await stream._ensure()
    run = runner.run
    while run.outcome is None:
        await runner.advance()
    return stream.result()
