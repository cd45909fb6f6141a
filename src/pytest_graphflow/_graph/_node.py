"""What node code sees: ``ctx``, ``interrupt()``, ``emit()``, ``Resume`` and ``PAUSE``."""

from __future__ import annotations

import inspect
import random as _random
import re
import uuid as _uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from .._records._events import Interrupt
from .._records._fast import make
from .._records._json import NotJSONError, jcopy, to_json_value
from .._time._clock import Clock
from .._time._rng import EntropyStream
from ..errors import GraphExecutionError, ResumeError
from ._deadlines import TimeoutSignal, deadline_at, is_expired_marker
from ._primitives import Command

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .._records._checkpoint import TaskRecord
    from ._subgraph import Subgraph

__all__ = ["PAUSE", "EdgeContext", "NodeContext", "Resume", "TaskLeg", "answer_keys", "emit",
           "interrupt", "match_answers"]

_ID_RE = re.compile(r"[A-Za-z0-9_.\-]+\Z")
_GOOD_IDS: set[str] = set()
"""Interrupt ids that passed :data:`_ID_RE` (a node asks with the same few literals: a set
lookup, no call, after the first time); cleared when it grows past 4,096."""


class _Pause:
    """The type of :data:`PAUSE`."""

    _instance: _Pause | None = None

    def __new__(cls) -> _Pause:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "PAUSE"


PAUSE = _Pause()
"""Returned by an ``on_interrupt`` hook to let the run pause (``None`` is a valid answer)."""

_NO_VALUE: Any = object()


def answer_keys(interrupt: Interrupt) -> tuple[str, ...]:
    """The keys an answer for ``interrupt`` may be given under, most specific first.

    One form everywhere (``Resume(answers=...)``, the checkers, ``explore``): the interrupt's
    key (``"<task_id>:<id>"``, one task), ``"<node>:<id>"``, the interrupt id alone, or the
    node's name (every interrupt that node raises).
    """
    return (interrupt.key, f"{interrupt.node}:{interrupt.id}", interrupt.id, interrupt.node)


def match_answers(
    answers: Mapping[str, Any], pending: Sequence[Interrupt]
) -> tuple[dict[str, Any], list[str]]:
    """Each pending interrupt's answer by :attr:`Interrupt.key`, and the keys of ``answers``
    that match no pending interrupt. An interrupt ``answers`` has nothing for is left out."""
    out: dict[str, Any] = {}
    used: set[str] = set()
    for i in pending:
        for k in answer_keys(i):
            if k in answers:
                out[i.key] = answers[k]
                used.add(k)
                break
    matchable = {k for i in pending for k in answer_keys(i)}
    unknown = sorted(k for k in answers if k not in used and k not in matchable)
    return out, unknown


class Resume:
    """Answers for every pending interrupt of a paused run (seed 001).

    ``Resume(value)`` answers the only pending interrupt; ``Resume(answers={key: ...})``
    answers each; a key is the interrupt's ``Interrupt.key`` (``"<task_id>:<id>"``),
    ``"<node>:<id>"``, the interrupt id, or a node name (all of that node's interrupts) —
    the most specific key given wins (see :func:`answer_keys`). With ``partial=True``,
    ``answers`` may leave some pending interrupts unanswered: their nodes run again, ask
    again, and the run pauses again with just those pending.

    ``update={key: value}`` is merged into the state before the run continues, as a node's
    patch would be (reducers applied, validated). ``Resume(update=...)`` alone continues a run
    that has nothing to answer (a breakpoint, a failure) with that update.

    Raises:
        TypeError: if ``answers`` or ``update`` is not a mapping.
        ResumeError: if both or neither of ``value`` and ``answers`` are given (neither is
            fine with ``update``), or ``answers`` is empty.
    """

    __slots__ = ("_has_value", "answers", "partial", "update", "value")

    def __init__(
        self,
        value: Any = _NO_VALUE,
        *,
        answers: Mapping[str, Any] | None = None,
        partial: bool = False,
        update: Mapping[str, Any] | None = None,
    ):
        if answers is not None and not isinstance(answers, Mapping):
            raise TypeError(f"Resume(answers={answers!r}): answers must be a mapping of "
                            "key (Interrupt.key, '<node>:<id>', interrupt id or node) to answer")
        if update is not None and not isinstance(update, Mapping):
            raise TypeError(f"Resume(update={update!r}): update must be a mapping of state "
                            "keys to values")
        self.update: dict[str, Any] | None = dict(update) if update is not None else None
        if partial and answers is None:
            raise ResumeError("Resume(partial=True) needs answers={key: ...} for the "
                              "interrupts it answers")
        if value is not _NO_VALUE and answers is not None:
            raise ResumeError("Resume takes a value or answers=, not both")
        if value is _NO_VALUE and answers is None and update is None:
            raise ResumeError("Resume needs a value (for the only pending interrupt) or "
                              "answers={key: ...}")
        if answers is not None and not answers:
            raise ResumeError("Resume(answers={}) is empty: give one answer per pending "
                              "interrupt key")
        self.partial = bool(partial)
        self._has_value = value is not _NO_VALUE
        self.value: Any = value if self._has_value else None
        self.answers: dict[str, Any] | None = dict(answers) if answers is not None else None

    @property
    def has_answers(self) -> bool:
        """Whether this resume answers interrupts (a value or ``answers``)."""
        return self._has_value or self.answers is not None

    def resolve(self, pending: list[Interrupt]) -> dict[str, Any]:
        """The answers by key for ``pending``, JSON-normalised.

        Raises:
            ResumeError: when the answers do not match the pending interrupts one to one.
        """
        keys = [i.key for i in pending]
        if self._has_value:
            if len(pending) != 1:
                raise ResumeError(
                    f"Resume(value) answers exactly one interrupt, but {len(pending)} are "
                    f"pending: {keys}; use Resume(answers={{key: ...}})"
                )
            raw = {keys[0]: self.value}
        else:
            assert self.answers is not None
            raw, unknown = match_answers(self.answers, pending)
            missing = [] if self.partial else [k for k in keys if k not in raw]
            if unknown or missing:
                forms = [f"{i.key} (or {i.node}:{i.id}, {i.id}, {i.node})" for i in pending]
                raise ResumeError(
                    f"Resume answers must answer every pending interrupt and only those; "
                    f"pending: {forms}; not pending: {unknown}; unanswered: {missing}"
                )
        out: dict[str, Any] = {}
        for key, answer in raw.items():
            try:
                out[key] = to_json_value(answer)
            except NotJSONError as exc:
                raise ResumeError(
                    f"the answer for {key!r} does not decode to JSON: {exc}") from None
        return out

    def __repr__(self) -> str:
        parts = []
        if self._has_value:
            parts.append(repr(self.value))
        if self.answers is not None:
            parts.append(f"answers={self.answers!r}")
        if self.partial:
            parts.append("partial=True")
        if self.update is not None:
            parts.append(f"update={self.update!r}")
        return f"Resume({', '.join(parts)})"


class Visited:
    """The nodes a run completed, in order: an append-only log and a length (internal).

    Extending a snapshot that ends the log appends in place (O(1) per node), so a long run
    does not copy its history at every step; the tuple is built only when someone reads it.
    """

    __slots__ = ("_cache", "_log", "_n")

    def __init__(self, log: list[str], n: int | None = None) -> None:
        self._log = log
        self._n = len(log) if n is None else n
        self._cache: tuple[str, ...] | None = None

    def extend(self, nodes: Sequence[str]) -> Visited:
        """A snapshot with ``nodes`` added after this one."""
        if not nodes:
            return self
        if self._n == len(self._log):
            self._log.extend(nodes)
            return Visited(self._log)
        return Visited([*self._log[:self._n], *nodes])

    def snapshot(self) -> tuple[list[str], int]:
        """The log and this snapshot's length: the nodes are ``log[:n]``, and ``log`` is only
        ever appended to, so two snapshots of one log are a path and a prefix of it (a store
        writing paths step by step compares them in O(1), not O(steps))."""
        return self._log, self._n

    def as_tuple(self) -> tuple[str, ...]:
        """The nodes as a tuple."""
        if self._cache is None:
            self._cache = tuple(self._log[:self._n])
        return self._cache

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_tuple())


class _InterruptSignal(BaseException):
    """Raised by ``interrupt()`` to pause a node. Not an ``Exception``: ``except Exception``
    in node code cannot swallow it."""

    def __init__(self, interrupt: Interrupt, more: Sequence[Interrupt] = ()) -> None:
        super().__init__(interrupt.key)
        self.interrupt = interrupt
        self.more = list(more)  # a subgraph node surfaces every pending child interrupt


class TaskLeg(Protocol):
    """What a task's context reads of the leg it runs in (the engine's ``RunState``).

    Plain attributes on the engine's side, read per task: ``run_id``, ``thread_id``,
    ``clock``, the ``on_interrupt`` hook and the ``deadlines`` of questions asked before;
    ``answers`` and ``tool_calls`` are the leg's ledgers, which a task adds to in place.
    """

    @property
    def run_id(self) -> str: ...
    @property
    def thread_id(self) -> str: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def on_interrupt(self) -> Callable[[Interrupt], object] | None: ...
    @property
    def deadlines(self) -> Mapping[str, datetime]: ...
    @property
    def answers(self) -> dict[str, Any]: ...
    @property
    def tool_calls(self) -> dict[str, dict[str, Any]]: ...

    def run_subgraph(self, sub: Subgraph, state: BaseModel, ctx: NodeContext
                     ) -> Awaitable[object]:
        """Run a ``Subgraph`` node's child run for the task of ``ctx``."""
        ...

    def next_checkpoint_id(self) -> str:
        """A new checkpoint id of the leg (a guardrail's ``Block`` names one)."""
        ...

    def hand_to_parent(self, command: Command) -> None:
        """End this child run: the parent's subgraph node takes ``command``."""
        ...


class NodeContext:
    """The second argument of a node ``fn(state, ctx)``.

    Attributes:
        node: the node's name.
        task_id: the task's id (stable across resumes).
        run_id: the run.
        thread_id: the run's thread.
        step: the superstep.
        attempt: the try, from 1 (see ``Retry``).
        item: the expansion item, for a task scheduled by ``Expand``.
        checkpoint_id_before: for an expansion task, the checkpoint saved before the
            expansion (resuming from it re-runs the expanding node).
        visited: the nodes completed so far in the run, in order.
        failure: for a failure-route target, the failure it handles
            (``{"node", "error_type", "message"}``).
        clock: the runtime's clock.

    ``ctx.random()`` and ``ctx.uuid()`` are the node's seeded randomness (in the manner of
    Temporal's workflow random): derived from the run (whose id the runtime's ``seed``
    decides) and the task, so the same seed gives the same values, and a task run again on
    resume draws the same values again.
    """

    # Built for every task on the hot path: only what varies is stored; the rest is read
    # from the task's record and the run when asked.
    __slots__ = ("_artifacts", "_custom", "_erng", "_leg", "_record", "_rng", "_tool", "_used",
                 "_visited", "attempt", "step")

    def __init__(self, leg: TaskLeg, record: TaskRecord, step: int, visited: Visited) -> None:
        self._leg = leg
        self._record = record
        self.step = step
        self.attempt = 1
        self._visited = visited
        self._used: set[str] | None = None
        self._custom: list[tuple[str, Any]] = []
        self._rng: _random.Random | None = None
        self._erng: EntropyStream | None = None
        self._artifacts: list[tuple[str, bytes, str]] = []
        self._tool: Any = None  # the task's tool calls (``_tools.ToolState``), on first use

    @property
    def node(self) -> str:
        """The node's name."""
        return self._record.node

    @property
    def task_id(self) -> str:
        """The task's id (stable across resumes)."""
        return self._record.task_id

    @property
    def item(self) -> Any:
        """The expansion item, for a task scheduled by ``Expand``."""
        return self._record.item

    @property
    def checkpoint_id_before(self) -> str | None:
        """For an expansion task, the checkpoint saved before the expansion."""
        return self._record.checkpoint_id_before

    @property
    def failure(self) -> dict[str, Any] | None:
        """For a failure-route target, the failure it handles."""
        return self._record.failure

    @property
    def run_id(self) -> str:
        """The run."""
        return self._leg.run_id

    @property
    def thread_id(self) -> str:
        """The run's thread."""
        return self._leg.thread_id

    @property
    def clock(self) -> Clock:
        """The runtime's clock."""
        return self._leg.clock

    @property
    def visited(self) -> tuple[str, ...]:
        """The nodes completed so far in the run, in order."""
        return self._visited.as_tuple()

    def now(self) -> datetime:
        """The runtime clock's current time."""
        return self.clock.now()

    def random(self) -> _random.Random:
        """This task's seeded random number generator (one stream per task run).

        Seeded from the run id and the task id: under a seeded runtime the same seed gives
        the same draws, and the task, run again when its run resumes (or after a failure in
        its batch), draws the same values in the same order. Use it instead of the
        ``random`` module in node code, which makes runs differ. ``explore(node_seed=N)``
        holds it fixed across its seeds: it is then seeded from ``N`` and the task's place in
        its run.
        """
        if self._rng is None:
            self._rng = _random.Random(self._stream_key("graphflow-task"))
        return self._rng

    def _stream_key(self, kind: str) -> str:
        """The seed of one of the task's streams: the run and the task, or (under
        ``explore(node_seed=N)``) ``N`` and the task's place in its run."""
        fixed = NODE_SEED.get()
        if fixed is None:
            return f"{kind}:{self.run_id}:{self.task_id}"
        token = self.run_id.removeprefix("run-")  # the task's place, whatever the run's id
        return f"{kind}:{fixed}:{self.task_id.replace(token, '')}"

    def entropy_rng(self) -> EntropyStream:
        """The stream the node's own ``uuid.uuid4()``, ``random.random()`` and unseeded
        ``random.Random()`` draw from in a deterministic run (see ``docs/determinism.md``):
        keyed like :meth:`random`, but a stream of its own, so calling one does not move the
        other."""
        if self._erng is None:
            self._erng = EntropyStream(self._stream_key("graphflow-entropy"))
        return self._erng

    def uuid(self) -> _uuid.UUID:
        """A version-4 UUID drawn from :meth:`random` (same seed, same UUIDs; use it instead
        of ``uuid.uuid4()`` in node code)."""
        return _uuid.UUID(int=self.random().getrandbits(128), version=4)

    def emit(self, value: Any, *, channel: str = "custom") -> None:
        """Emit a custom event (``stream(mode="custom")``); ``channel="tokens"`` for tokens."""
        try:
            item = (channel, to_json_value(value))
        except NotJSONError as exc:
            raise TypeError(f"emit() from node {self.node!r}: the value has no JSON form "
                            f"({exc})") from None
        self._custom.append(item)

    def attach(self, name: str, data: bytes | str,
               media_type: str = "application/octet-stream") -> None:
        """Attach an artifact to the run (seed 002: "larger outputs or diagnostic material").

        It is stored with the run's store (``store.artifacts(run_id)``, ``graphflow
        artifacts FILE RUN_ID``) once the task's batch has run, whatever its outcome, so a
        failing node can leave its diagnostics; a ``custom`` event on channel ``"artifact"``
        records ``{"name", "media_type", "size"}``. An artifact of the same name is replaced.

        Raises:
            TypeError: ``name`` is not a non-empty str, ``data`` not bytes or str, or
                ``media_type`` not a str.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"attach(name={name!r}): name must be a non-empty str")
        if not isinstance(media_type, str) or not media_type:
            raise TypeError(f"attach({name!r}, media_type={media_type!r}): media_type must be "
                            "a non-empty str")
        if isinstance(data, str):
            data = data.encode()
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"attach({name!r}): data must be bytes or str, got "
                            f"{type(data).__name__}")
        content = bytes(data)
        self._artifacts.append((name, content, media_type))
        self._custom.append(("artifact", {"name": name, "media_type": media_type,
                                          "size": len(content)}))

    def call_tool(self, tool: Any, args: Any = None) -> Any:
        """Call a sync ``tool`` (declared with ``@tool``) through the runtime; its value.

        The call is a ``tool_call`` event of this task, gets the key ``call.key`` (the same
        when the task runs again), and the result of a ``write``/``external``/``human`` tool
        is recorded: when the task runs again (after an interrupt, a failure or a crash),
        the recorded value is returned and the tool is not called. The tool's update is
        merged into this task's patch (before the node's own result).

        Raises:
            ToolFailed: the tool returned ``Fatal``, or broke its contract; the task fails
                with it even if the node catches it.
            InvalidArgument: ``tool`` is not a ``Tool``, is async, or has a ``Retry`` that
                waits (call those with :meth:`acall_tool`).
            Exception: the tool's own exception, once its ``Retry`` (if any) gave up.
        """
        from ._tools import call_tool

        return call_tool(self, tool, args)

    async def acall_tool(self, tool: Any, args: Any = None) -> Any:
        """Call a ``tool``, sync or async, from an async node; see :meth:`call_tool`.
        A ``Retry`` of the tool waits on the runtime's clock (virtual under a
        ``VirtualClock``)."""
        from ._tools import acall_tool

        return await acall_tool(self, tool, args)

    def interrupt(self, payload: Any = None, *, id: str, deadline: Any = None) -> Any:
        """Pause this node until answered; see :func:`interrupt`."""
        if type(id) is not str or id not in _GOOD_IDS:
            if not isinstance(id, str) or not _ID_RE.match(id):
                raise ValueError(f"interrupt id {id!r} is invalid: use a non-empty id of "
                                 "letters, digits, '_', '.' and '-'")
            if type(id) is str:
                if len(_GOOD_IDS) >= 4096:
                    _GOOD_IDS.clear()
                _GOOD_IDS.add(id)
        if self._tool is not None:
            from ._tools import asked

            asked(self, id)  # inside a tool call: a question it does not declare fails it
        if self._used is None:
            self._used = set()
        if id in self._used:
            raise GraphExecutionError(
                f"node {self.node!r} already used interrupt id {id!r} in this run; give each "
                "interrupt() call of a node its own id"
            )
        self._used.add(id)
        record = self._record  # its task id and node, read without the properties' calls
        key = f"{record.task_id}:{id}"
        due = None
        if deadline is not None:  # checked before an answer is returned: a bad one always fails
            due = deadline_at(self.clock.now(), deadline, record.node, id)
        answers: dict[str, Any] = self._leg.answers
        if key in answers:
            answer = answers[key]
            if is_expired_marker(answer):
                raise TimeoutSignal(key)
            return jcopy(answer)
        try:
            payload = to_json_value(payload)
        except NotJSONError as exc:
            raise TypeError(f"interrupt payload of node {record.node!r} has no JSON form: "
                            f"{exc}") from None
        if due is not None:  # asked again (a partial resume): the first deadline stands
            due = self._leg.deadlines.get(key, due)
        # Every field is known valid here (ids checked, payload JSON-normalised, ``due`` an
        # aware datetime): what validation would build, without it.
        pending = make(Interrupt, key=key, id=id, node=record.node, task_id=record.task_id,
                       payload=payload, deadline=due)
        hook = self._leg.on_interrupt
        if hook is not None:
            answer = hook(pending)
            if inspect.isawaitable(answer):
                close = getattr(answer, "close", None)
                if close is not None:
                    close()
                raise TypeError("the on_interrupt hook returned an awaitable; it must return "
                                "the answer (or PAUSE) synchronously")
            if answer is not PAUSE:
                try:
                    normalised = to_json_value(answer)
                except NotJSONError as exc:
                    raise TypeError(f"the on_interrupt answer for {key!r} has no JSON form: "
                                    f"{exc}") from None
                answers[key] = normalised
                return jcopy(normalised)
        raise _InterruptSignal(pending)

    def __repr__(self) -> str:
        return f"<NodeContext node={self.node!r} task={self.task_id} step={self.step}>"


class EdgeContext:
    """The second argument of an edge function ``route(state, ctx)`` (seed 000).

    Attributes:
        current_node: the node whose edges are being decided.
        visited_nodes: the nodes visited so far, ``current_node`` included.
        step: the superstep.
    """

    __slots__ = ("_visited", "current_node", "step")

    def __init__(self, current_node: str, visited: Visited | tuple[str, ...], step: int) -> None:
        self.current_node = current_node
        self._visited = visited
        self.step = step

    @property
    def visited_nodes(self) -> tuple[str, ...]:
        """The nodes visited so far, ``current_node`` included."""
        v = self._visited
        return v if isinstance(v, tuple) else (*v.as_tuple(), self.current_node)

    def __repr__(self) -> str:
        return f"<EdgeContext current_node={self.current_node!r} step={self.step}>"


CURRENT_TASK: ContextVar[NodeContext | None] = ContextVar("graphflow_task", default=None)

NODE_SEED: ContextVar[int | None] = ContextVar("graphflow_node_seed", default=None)
"""Set by ``explore(node_seed=...)`` around its runs: ``ctx.random()`` then ignores the run id."""


def _current(what: str) -> NodeContext:
    ctx = CURRENT_TASK.get()
    if ctx is None:
        raise RuntimeError(f"{what} was called outside a running node; call it from node code")
    return ctx


def interrupt(payload: Any = None, *, id: str, deadline: Any = None) -> Any:
    """Pause the current node until the interrupt is answered (seed 001).

    An ``on_interrupt`` hook may answer at once; otherwise the run pauses. On resume the node
    runs again from the top, and this call returns the answer (normalised to JSON values).

    Args:
        payload: the question or data for whoever answers (JSON values).
        id: unique within one run of the node; letters, digits, ``_``, ``.`` and ``-``.
        deadline: how long the question may wait (seconds or a ``timedelta``), on the
            runtime's clock (virtual under a ``VirtualClock``). Once it passed,
            ``GraphRuntime.expire_due`` (or a ``Worker``) takes the graph's
            ``compile(on_timeout=...)`` route, and a late answer is refused with
            ``DeadlineExpired``. ``None``: the question waits for ever.

    Raises:
        ValueError: if ``id`` is empty or has other characters, or ``deadline`` is not a
            positive duration.
        GraphExecutionError: if the node already used ``id`` in this run.
        RuntimeError: if called outside a running node.
        TypeError: if an ``on_interrupt`` hook returns an awaitable.
    """
    ctx = CURRENT_TASK.get()  # what _current() does, inline (a question a leg)
    if ctx is None:
        raise RuntimeError("interrupt() was called outside a running node; call it from node "
                           "code")
    return ctx.interrupt(payload, id=id, deadline=deadline)


def emit(value: Any, *, channel: str = "custom") -> None:
    """Emit a custom event from node code (``stream(mode="custom")``).

    Raises:
        RuntimeError: if called outside a running node.
    """
    _current("emit()").emit(value, channel=channel)
