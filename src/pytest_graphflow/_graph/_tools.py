"""Tools with declared contracts: what a node calls through ``ctx.call_tool`` /
``ctx.acall_tool``.

A :class:`Tool` declares the state keys its update may write (``updates``), the questions it
may ask (``asks``: ``interrupt`` ids), its effect class and its :class:`Retry`. A call goes
through the runtime: it gets a deterministic key (``ToolCall.key``, the task and the call's
index in it) that the tool may hand on as an idempotency key, it is a ``tool_call`` event of
its task, and the result of a ``write``/``external``/``human`` tool is recorded on the run's
checkpoints, so a task that runs again (after an interrupt, a failure or a crash) gets the
recorded result instead of calling the tool twice.
"""

from __future__ import annotations

import builtins
import inspect
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, overload

import anyio

from .._records._json import NotJSONError, jcopy, to_json_value
from .._time._rng import EntropyStream
from ..errors import GraphExecutionError, InvalidArgument, ToolFailed
from ._middleware import is_async_hook
from ._primitives import EFFECTS, REPLAYED_EFFECTS, Retry


class _ToolLeg(Protocol):
    @property
    def tool_calls(self) -> dict[str, dict[str, Any]]: ...


class ToolContext(Protocol):
    """What a tool call reads of a task's ``_node.NodeContext`` (the one implementation):
    named here so that this module does not import the node module that imports it."""

    _custom: list[tuple[str, Any]]
    _erng: EntropyStream | None
    _tool: Any

    @property
    def _leg(self) -> _ToolLeg: ...
    @property
    def node(self) -> str: ...
    @property
    def task_id(self) -> str: ...
    @property
    def run_id(self) -> str: ...
    def now(self) -> datetime: ...
    def _stream_key(self, kind: str) -> str: ...

__all__ = ["TOOL_PLAYBACK", "Fatal", "Tool", "ToolCall", "ToolCallRecord", "ToolResult",
           "acall_tool", "call_tool", "play_back", "tool"]

TOOL_PLAYBACK: ContextVar[dict[str, list[Mapping[str, Any]]] | None] = ContextVar(
    "graphflow_tool_playback", default=None)
"""Set by ``assert_replays`` around a replay: the recorded ``tool_call`` events (wire form) of
the run's executed calls, by call key, in order (a node's retry makes the same key again). A
recorded (``write``/``external``/``human``) tool call is then played back from them, and the
tool is never called."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns when it updates the state: ``update`` (keys it declares in
    ``updates=``) is merged into its node's patch, ``value`` is what ``call_tool`` returns.
    A tool that returns anything else returns just a value."""

    value: Any = None
    update: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Fatal:
    """What a tool returns to fail the run: the call raises ``ToolFailed(cause="fatal")``
    in its node, and the task fails with it even if the node catches it (no retry; the
    node's ``on_error`` route takes it if it has one).

    Args:
        reason: why, for the error and the ``tool_call`` event.
    """

    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason:
            raise InvalidArgument(f"Fatal(reason={self.reason!r}): give the reason as text")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of a tool, handed to the tool as its second argument ``fn(args, call)``.

    Attributes:
        key: the call's key, ``"<task_id>:tool-<n>"`` (``n`` counts the task's tool calls
            from 0): the same when the task runs again on resume or after a crash, so a
            tool hands it to an outside service as the idempotency key.
        tool: the tool's name.
        args: the arguments (their JSON form).
        node: the calling node.
        task_id: the calling task.
        run_id: the run.
        attempt: the try, from 1 (see the tool's ``Retry``).
    """

    key: str
    tool: str
    args: Any
    node: str
    task_id: str
    run_id: str
    attempt: int = 1


@dataclass(frozen=True, slots=True, init=False)
class Tool:
    """A tool with a declared contract (build one with :func:`tool`).

    Attributes:
        name: the tool's name (events, errors).
        fn: ``fn(args)`` or ``fn(args, call)``, sync or ``async def``.
        updates: the state keys its ``ToolResult.update`` may write.
        asks: the ``interrupt`` ids it may ask.
        effect: ``pure``/``read`` tools are called again when their task runs again;
            ``write``/``external``/``human`` tools are recorded and replayed instead.
        retry: the tool's own retries (an exception in ``retry_on`` is retried, waiting on
            the runtime's clock), or ``None``.
    """

    name: str
    fn: Callable[..., Any]
    updates: frozenset[str]
    asks: frozenset[str]
    effect: str
    retry: Retry | None
    is_async: bool
    arity: int

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None,
                 updates: Iterable[str] = (), asks: Iterable[str] = (),
                 effect: str = "external", retry: Retry | None = None) -> None:
        if not callable(fn):
            raise InvalidArgument(f"Tool({fn!r}): fn is not callable; pass a function "
                                  "fn(args) or fn(args, call)")
        name = name if name is not None else getattr(fn, "__name__", None)
        if not isinstance(name, str) or not name:
            raise InvalidArgument(f"Tool({fn!r}): give the tool a name (name='...')")
        where = f"tool {name!r}"
        if effect not in EFFECTS:
            raise InvalidArgument(f"{where}: effect={effect!r} must be one of {sorted(EFFECTS)}")
        if retry is not None and not isinstance(retry, Retry):
            raise InvalidArgument(f"{where}: retry={retry!r} must be a Retry(...) or None")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "updates", _names(updates, f"{where}: updates"))
        object.__setattr__(self, "asks", _names(asks, f"{where}: asks"))
        object.__setattr__(self, "effect", effect)
        object.__setattr__(self, "retry", retry)
        object.__setattr__(self, "is_async", is_async_hook(fn))
        object.__setattr__(self, "arity", _arity(fn, where))

    @property
    def recorded(self) -> bool:
        """Whether its results are recorded and replayed (``write``/``external``/``human``)."""
        return self.effect in REPLAYED_EFFECTS

    def __repr__(self) -> str:
        return f"<Tool {self.name!r} effect={self.effect!r}>"


def _names(value: Iterable[str], where: str) -> frozenset[str]:
    if isinstance(value, str):
        value = [value]
    try:
        names = list(value)
    except TypeError:
        raise InvalidArgument(f"{where}={value!r} must be a list of names") from None
    if not all(isinstance(n, str) and n for n in names):
        raise InvalidArgument(f"{where}={names!r} must be a list of non-empty strings")
    return frozenset(names)


def _arity(fn: Callable[..., Any], where: str) -> int:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # pragma: no cover - a builtin: assume (args)
        return 1
    params = [p for p in sig.parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values()):
        return 2
    if len(params) == 1:
        return 1
    raise InvalidArgument(f"{where} must take (args) or (args, call); got signature {sig}")


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(*, name: str | None = ..., updates: Iterable[str] = ..., asks: Iterable[str] = ...,
         effect: str = ..., retry: Retry | None = ...) -> Callable[[Callable[..., Any]], Tool]:
    ...


def tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None,
         updates: Iterable[str] = (), asks: Iterable[str] = (), effect: str = "external",
         retry: Retry | None = None) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Declare a tool: ``@tool`` or ``@tool(updates=[...], asks=[...], effect=..., retry=...)``.

    The function takes ``(args)`` or ``(args, call)`` (a :class:`ToolCall`) and returns a
    value, a :class:`ToolResult` (a value and/or an update of the keys in ``updates``) or
    :class:`Fatal`. Nodes call it with ``ctx.call_tool(tool, args)`` or ``await
    ctx.acall_tool(tool, args)``. Breaking the contract — an update to a key outside
    ``updates``, an ``interrupt`` whose id is outside ``asks`` — or returning ``Fatal`` fails
    the run with :class:`~pytest_graphflow.errors.ToolFailed` (``cause`` says which).

    Args:
        name: the tool's name (default: the function's).
        updates: the state keys it may update.
        asks: the interrupt ids it may ask (a human approval on a tool call).
        effect: ``"external"`` (the default), ``"write"`` or ``"human"``: its result is
            recorded on the run's checkpoints and a task that runs again replays it, so it is
            never called twice after the checkpoint that recorded it; ``"pure"``/``"read"``:
            called again whenever its task runs.
        retry: a :class:`Retry` for the tool's own exceptions (waiting on the runtime's
            clock; the sync ``call_tool`` refuses one that would wait).

    Raises:
        InvalidArgument: a bad name, effect, retry, ``updates`` or ``asks``, or a function
            with another signature.
    """
    def make(f: Callable[..., Any]) -> Tool:
        return Tool(f, name=name, updates=updates, asks=asks, effect=effect, retry=retry)

    return make(fn) if fn is not None else make


@dataclass(slots=True)
class ToolCallRecord:
    """A finished tool call, as its task's ``tool_call`` event reports it (internal)."""

    tool: str
    key: str
    effect: str
    args: Any
    value: Any = None
    update: dict[str, Any] | None = None
    attempts: int = 1
    replayed: bool = False
    outcome: str = "ok"
    error: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class ToolState:
    """A task's tool calls in its current attempt (internal; ``NodeContext._tool``)."""

    __slots__ = ("count", "failure", "running", "started_at", "updates")

    def __init__(self) -> None:
        self.count = 0
        self.started_at: datetime | None = None
        self.running: tuple[Tool, ToolCall] | None = None
        self.failure: ToolFailed | None = None
        self.updates: list[dict[str, Any]] = []


def _emit(ctx: ToolContext, record: ToolCallRecord) -> None:
    """Add a call's event to its task, timed from the call's start to now (unless the record
    carries its times: a played-back call)."""
    if record.finished_at is None:
        st: ToolState | None = ctx._tool
        now = ctx.now()
        record.started_at = now if st is None or st.started_at is None else st.started_at
        record.finished_at = now
    ctx._custom.append(("tool_call", record))


def state_of(ctx: ToolContext) -> ToolState:
    """The task's tool state, made on first use."""
    st: ToolState | None = ctx._tool
    if st is None:
        st = ctx._tool = ToolState()
    return st


def asked(ctx: ToolContext, question: str) -> None:
    """``interrupt(id=question)`` is asked in ``ctx``'s task: inside a tool call, a question
    the tool does not declare fails the call (and the task) with ``ToolFailed``."""
    st: ToolState | None = ctx._tool
    running = None if st is None else st.running
    if st is None or running is None or question in running[0].asks:
        return
    t, call = running
    raise _fail(ctx, st, t, call.key, "undeclared_question", repr(question), call.args)


def _fail(ctx: ToolContext, st: ToolState, t: Tool, key: str, cause: str, detail: str,
          args: Any) -> ToolFailed:
    err = ToolFailed(cause, t.name, key=key, node=ctx.node, task_id=ctx.task_id, detail=detail)
    if st.failure is None:
        st.failure = err
        _emit(ctx, ToolCallRecord(
            t.name, key, t.effect, args, outcome=cause, error=str(err)))
    return err


def _begin(ctx: ToolContext, t: Tool, args: Any) -> tuple[ToolState, ToolCall, Any]:
    """Check the call, give it its key; the recorded result when it is a replay."""
    if not isinstance(t, Tool):
        raise InvalidArgument(f"call_tool({t!r}): pass a Tool (declare it with @tool(...))")
    st = state_of(ctx)
    if st.failure is not None:
        raise st.failure  # the task failed already: no call after a failed one
    try:
        args = to_json_value(args)
    except NotJSONError as exc:
        raise TypeError(f"call_tool({t.name!r}) from node {ctx.node!r}: the arguments have no "
                        f"JSON form ({exc})") from None
    key = f"{ctx.task_id}:tool-{st.count}"
    st.count += 1
    st.started_at = ctx.now()
    call = ToolCall(key=key, tool=t.name, args=args, node=ctx.node, task_id=ctx.task_id,
                    run_id=ctx.run_id)
    recorded = ctx._leg.tool_calls.get(key) if t.recorded else None
    if recorded is not None and recorded.get("tool") != t.name:
        raise GraphExecutionError(
            f"node {ctx.node!r} called tool {t.name!r} as call {key}, where its earlier run "
            f"called {recorded.get('tool')!r}: a node must call its recorded tools in the same "
            "order each time its task runs (branch on the state or on interrupt answers, not "
            "on anything else)")
    if recorded is None and t.recorded:
        playback = TOOL_PLAYBACK.get()
        if playback is not None:
            queue = playback.get(key)
            _play(ctx, st, t, call, queue.pop(0) if queue else None)
    return st, call, recorded


class _Played(Exception):
    """A played-back call's outcome (internal signal: the tool is not called): its value or
    the exception it ended with, and when it ended on the recording's clock."""

    def __init__(self, value: Any, error: Exception | None, until: datetime | None) -> None:
        super().__init__("played back")
        self.value = value
        self.error = error
        self.until = until

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


def _times(event: Mapping[str, Any]) -> tuple[datetime | None, datetime | None]:
    def read(name: str) -> datetime | None:
        raw = event.get(name)
        if isinstance(raw, datetime):
            return raw
        return datetime.fromisoformat(raw) if isinstance(raw, str) else None
    return read("started_at"), read("finished_at")


def _play(ctx: ToolContext, st: ToolState, t: Tool, call: ToolCall,
          event: Mapping[str, Any] | None) -> None:
    """Play back the recording of ``call`` (during a replay): the event as recorded, its
    update, its record; its value, failure or exception (raised as ``_Played``)."""
    if event is None or event.get("tool") != t.name:
        raise GraphExecutionError(
            f"node {ctx.node!r} called tool {t.name!r} as call {call.key}, which the recording "
            "does not have (there, "
            + (f"that call was of tool {event.get('tool')!r}" if event is not None
               else "the task made no such call")
            + "); a replay never calls a recorded (external) tool")
    value, update = jcopy(event.get("value")), jcopy(event.get("update"))
    attempts, outcome = int(event.get("attempts", 1)), str(event.get("outcome", "ok"))
    started, finished = _times(event)
    record = ToolCallRecord(t.name, call.key, t.effect, call.args, jcopy(value), jcopy(update),
                            attempts=attempts, outcome=outcome, error=event.get("error"),
                            started_at=started, finished_at=finished)
    _emit(ctx, record)
    if outcome in ToolFailed.CAUSES:
        detail = str(event.get("error", ""))
        err = ToolFailed(outcome, t.name, key=call.key, node=ctx.node, task_id=ctx.task_id,
                         detail=detail)
        err.args = (detail,)  # the message as recorded
        st.failure = err
        raise _Played(None, err, finished)
    if outcome == "error":
        name, _, message = str(event.get("error", "")).partition(": ")
        raise _Played(None, _exception(name, message), finished)
    ctx._leg.tool_calls[call.key] = {"tool": t.name, "value": value, "update": update,
                                     "attempts": attempts}
    if update:
        st.updates.append(update)
    raise _Played(jcopy(value), None, finished)


def _exception(name: str, message: str) -> Exception:
    base = getattr(builtins, name, None)
    if isinstance(base, type) and issubclass(base, Exception):
        return base(message)
    cls: type[Exception] = type(name, (Exception,), {"__module__": "replay"})
    return cls(message)


def play_back(ctx: ToolContext, event: Mapping[str, Any]) -> None:
    """Append a recorded ``tool_call`` event (wire form) to ``ctx``'s task as it was (a
    replay's stub of an ``external`` node plays back the tool calls it made)."""
    started, finished = _times(event)
    _emit(ctx, ToolCallRecord(
        str(event["tool"]), str(event["key"]), str(event.get("effect", "external")),
        jcopy(event.get("args")), jcopy(event.get("value")), jcopy(event.get("update")),
        attempts=int(event.get("attempts", 1)), replayed=bool(event.get("replayed")),
        outcome=str(event.get("outcome", "ok")), error=event.get("error"),
        started_at=started, finished_at=finished))


def _replay(ctx: ToolContext, st: ToolState, t: Tool, call: ToolCall,
            recorded: dict[str, Any]) -> Any:
    update = recorded.get("update")
    if update:
        st.updates.append(jcopy(update))
    _emit(ctx, ToolCallRecord(
        t.name, call.key, t.effect, call.args, jcopy(recorded.get("value")), jcopy(update),
        attempts=int(recorded.get("attempts", 1)), replayed=True))
    return jcopy(recorded.get("value"))


def _finish(ctx: ToolContext, st: ToolState, t: Tool, call: ToolCall, result: Any,
            attempts: int) -> Any:
    if st.failure is not None:
        raise st.failure  # it asked an undeclared question and swallowed the error
    if isinstance(result, Fatal):
        raise _fail(ctx, st, t, call.key, "fatal", result.reason, call.args)
    value, update = (result.value, result.update) if isinstance(result, ToolResult) \
        else (result, None)
    if update is not None:
        if not isinstance(update, Mapping):
            raise TypeError(f"tool {t.name!r} returned ToolResult(update={update!r}); the "
                            "update must be a dict of state keys to values")
        undeclared = sorted(str(k) for k in update if k not in t.updates)
        if undeclared:
            raise _fail(ctx, st, t, call.key, "undeclared_update",
                        f"the keys {undeclared}", call.args)
    try:
        value = to_json_value(value)
        update = to_json_value(dict(update)) if update else None
    except NotJSONError as exc:
        raise TypeError(f"tool {t.name!r} (call {call.key}) returned a result with no JSON "
                        f"form ({exc}); return JSON values (they are recorded)") from None
    if t.recorded:
        ctx._leg.tool_calls[call.key] = {"tool": t.name, "value": value, "update": update,
                                         "attempts": attempts}
    if update:
        st.updates.append(update)
    _emit(ctx, ToolCallRecord(
        t.name, call.key, t.effect, call.args, jcopy(value), jcopy(update),
        attempts=attempts))
    return jcopy(value) if t.recorded else value


def _failed_attempt(ctx: ToolContext, st: ToolState, t: Tool, call: ToolCall,
                    exc: Exception) -> float | None:
    """The wait before the next attempt, or ``None`` when the exception is final."""
    if st.failure is not None:
        return None
    retry = t.retry
    if retry is not None and call.attempt < retry.attempts \
            and isinstance(exc, retry.retry_on):
        return retry.delay(call.attempt)
    _emit(ctx, ToolCallRecord(
        t.name, call.key, t.effect, call.args, attempts=call.attempt, outcome="error",
        error=f"{type(exc).__name__}: {exc}"))
    return None


def call_tool(ctx: ToolContext, t: Tool, args: Any = None) -> Any:
    """``ctx.call_tool``: call a sync tool from node code (see :meth:`NodeContext.call_tool`)."""
    if isinstance(t, Tool) and t.is_async:
        raise InvalidArgument(f"tool {t.name!r} is async: call it with "
                              f"await ctx.acall_tool({t.name}, args) from an async node")
    if isinstance(t, Tool) and t.retry is not None and t.retry.attempts > 1 \
            and t.retry.delay(1) > 0:
        raise InvalidArgument(
            f"tool {t.name!r} has Retry(backoff={t.retry.backoff}), whose retries wait on the "
            f"clock, which the sync ctx.call_tool cannot do: call it with await "
            f"ctx.acall_tool({t.name}, args) from an async node, or give it Retry(backoff=0)")
    try:
        st, call, recorded = _begin(ctx, t, args)
    except _Played as played:
        return played.result()
    if recorded is not None:
        return _replay(ctx, st, t, call, recorded)
    entropy = _OwnEntropy(ctx, call.key)
    while True:
        st.running = (t, call)
        try:
            with entropy:
                result = t.fn(call.args, call) if t.arity == 2 else t.fn(call.args)
        except Exception as exc:
            if _failed_attempt(ctx, st, t, call, exc) is None:
                raise
            call = _next(call)
            continue
        finally:
            st.running = None
        return _finish(ctx, st, t, call, result, call.attempt)


async def acall_tool(ctx: ToolContext, t: Tool, args: Any = None) -> Any:
    """``ctx.acall_tool``: call a tool, sync or async, from an async node (see
    :meth:`NodeContext.acall_tool`)."""
    try:
        st, call, recorded = _begin(ctx, t, args)
    except _Played as played:
        if played.until is not None:  # the call took this long in the recording
            wait = (played.until - ctx.now()).total_seconds()
            if wait > 0:
                await anyio.sleep(wait)
        return played.result()
    if recorded is not None:
        return _replay(ctx, st, t, call, recorded)
    entropy = _OwnEntropy(ctx, call.key)
    while True:
        st.running = (t, call)
        try:
            with entropy:
                result = t.fn(call.args, call) if t.arity == 2 else t.fn(call.args)
                if inspect.isawaitable(result):
                    result = await result
        except Exception as exc:
            delay = _failed_attempt(ctx, st, t, call, exc)
            if delay is None:
                raise
            st.running = None
            await anyio.sleep(delay)
            call = _next(call)
            continue
        finally:
            st.running = None
        return _finish(ctx, st, t, call, result, call.attempt)


class _OwnEntropy:
    """While a tool runs, the node code's ``uuid.uuid4()``/``random`` draw from a stream of
    the call's own (keyed by the task and the call's index): a replayed call, which draws
    nothing, does not shift what the node or a later call draws, and a call that runs again
    draws what it drew before."""

    __slots__ = ("ctx", "saved", "stream")

    def __init__(self, ctx: ToolContext, key: str) -> None:
        self.ctx = ctx
        self.saved: Any = None
        self.stream = EntropyStream(ctx._stream_key(f"graphflow-tool-{key.rpartition(':')[2]}"))

    def __enter__(self) -> None:
        self.saved = self.ctx._erng
        self.ctx._erng = self.stream

    def __exit__(self, *exc: object) -> None:
        self.ctx._erng = self.saved


def _next(call: ToolCall) -> ToolCall:
    return ToolCall(call.key, call.tool, call.args, call.node, call.task_id, call.run_id,
                    call.attempt + 1)
