"""Events of a run (SPEC §3): pydantic models discriminated by ``type``.

The runtime builds events with ``model_construct`` (no validation on the hot path); the wire
form is ``event.model_dump(mode="json")`` and :func:`parse_event` reads it back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)

from ._json import utf8_text

__all__ = [
    "Breakpoint",
    "CheckpointSaved",
    "CustomEvent",
    "EdgeTransition",
    "ErrorEvent",
    "EventBase",
    "FinalEventData",
    "GraphEvent",
    "Interrupt",
    "InterruptEvent",
    "InterruptEventData",
    "InterruptExpired",
    "NodeEnd",
    "NodeStart",
    "RunEnd",
    "RunStart",
    "StreamEvent",
    "ToolCallEvent",
    "error_message",
    "parse_event",
]


class Interrupt(BaseModel):
    """A pending interrupt of a paused run (seed 001).

    Attributes:
        key: ``"<task_id>:<id>"``; answer it with ``Resume(answers={key: ...})``.
        id: the id passed to ``interrupt``.
        node: the node that paused.
        task_id: the task of that node.
        payload: the payload passed to ``interrupt``.
        deadline: when the question expires (``interrupt(..., deadline=...)``), on the
            runtime's clock; ``None``: it waits for ever. Left out of the wire form when
            ``None``, so an interrupt without one is the same bytes as before deadlines.
    """

    model_config = ConfigDict(frozen=True)

    key: str
    id: str
    node: str
    task_id: str
    payload: Any = None
    deadline: datetime | None = None

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            if name != "deadline" or value is not None:
                yield name, value

    @model_serializer(mode="wrap")
    def _without_no_deadline(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if self.deadline is None and isinstance(data, dict):
            data.pop("deadline", None)
        return data


class Breakpoint(BaseModel):
    """Where a run paused for a breakpoint (seed 002: "pause for a breakpoint").

    Resume such a run without a ``Resume``: there is nothing to answer.

    Attributes:
        when: ``"before"`` (the batch holding the nodes has not run) or ``"after"`` (it ran
            and its state is committed).
        nodes: the breakpoint nodes of that batch, in declared order.
    """

    model_config = ConfigDict(frozen=True)

    when: Literal["before", "after"]
    nodes: list[str]


class EventBase(BaseModel):
    """Fields every event has.

    Attributes:
        seq: the event's number in its run's log, from 0, continuing across resumes.
        run_id: the run.
        step: the superstep, from 0.
        time: when the event was yielded, on the runtime's clock.
        node: the node it concerns, or ``None``.
        task_id: the task it concerns, or ``None``.
    """

    model_config = ConfigDict(frozen=True)

    seq: int
    run_id: str
    step: int
    time: datetime
    node: str | None = None
    task_id: str | None = None


class RunStart(EventBase):
    """The first event of a run (or of a resumed leg of it)."""

    type: Literal["run_start"] = "run_start"
    graph_id: str
    revision: str
    thread_id: str
    resumed_from: str | None = None


class NodeStart(EventBase):
    """A task began (``attempt`` counts retries from 1)."""

    type: Literal["node_start"] = "node_start"
    attempt: int = 1


class NodeEnd(EventBase):
    """A task completed: its patch, whether it was replayed, and its own timing."""

    type: Literal["node_end"] = "node_end"
    patch: dict[str, Any] | None = None
    replayed: bool = False
    attempt: int = 1
    started_at: datetime
    finished_at: datetime
    goto: list[str] | None = None


class EdgeTransition(EventBase):
    """The run moved along an edge from ``source`` to ``target`` (``__end__`` for END)."""

    type: Literal["edge_transition"] = "edge_transition"
    source: str
    target: str


class CheckpointSaved(EventBase):
    """A checkpoint was saved (the store's ``save`` returned)."""

    type: Literal["checkpoint_saved"] = "checkpoint_saved"
    checkpoint_id: str


class InterruptEvent(EventBase):
    """A task paused for input; ``interrupts`` are what it asks."""

    type: Literal["interrupt"] = "interrupt"
    interrupts: list[Interrupt]


class InterruptExpired(EventBase):
    """A question's deadline passed before it was answered (``interrupt(..., deadline=)``).

    ``key`` and ``deadline`` name the question and when it expired. What the run does
    instead is the graph's ``compile(on_timeout=...)``, and ``action`` says which:
    ``"routed"`` (``routed_to`` names the node the asking task goes to), ``"answered"``
    (``answer`` is the ``TimeoutAnswer`` its ``interrupt()`` returns) or ``"failed"`` (no
    route: the task fails with ``DeadlineExpired``). The event comes right after the resumed
    leg's ``run_start``; ``node`` and ``task_id`` are the asking task's.
    """

    type: Literal["interrupt_expired"] = "interrupt_expired"
    key: str
    deadline: datetime
    action: Literal["routed", "answered", "failed"]
    routed_to: str | None = None
    answer: Any = None


class ErrorEvent(EventBase):
    """A task, a budget or the run failed. ``will_retry`` marks a failed attempt that retries;
    ``routed_to`` names the failure route taken, if any."""

    type: Literal["error"] = "error"
    error_type: str
    message: str
    attempt: int = 1
    will_retry: bool = False
    routed_to: str | None = None


def error_message(error: BaseException | None) -> str:
    """The message ``error`` is recorded with (its ``error`` event, the checkpoint's and the
    run record's ``error``, a failure route's ``ctx.failure``): ``str(error)`` with lone
    surrogates escaped (:func:`~._json.utf8_text`), so every store can keep it."""
    return utf8_text(str(error))


class CustomEvent(EventBase):
    """A value a node emitted with ``emit(value, channel=...)``."""

    type: Literal["custom"] = "custom"
    channel: str = "custom"
    value: Any = None


class ToolCallEvent(EventBase):
    """A node called a tool (``ctx.call_tool``), between its task's ``node_start`` and its
    result.

    Attributes:
        tool: the tool's name.
        key: the call's key (``ToolCall.key``, ``"<task_id>:tool-<n>"``).
        effect: the tool's effect class.
        args: the arguments (JSON form).
        value: what the call returned (``None`` unless ``outcome`` is ``"ok"``).
        update: the tool's state update, if any.
        attempts: how many times the tool was called for it (its ``Retry``).
        replayed: the result was recorded by an earlier run of the task and the tool was
            not called.
        outcome: ``"ok"``; ``"error"`` (the tool raised, its retries gave up); or the
            ``ToolFailed`` cause: ``"fatal"``, ``"undeclared_update"``,
            ``"undeclared_question"``.
        error: the error's message, when the call failed.
        started_at, finished_at: the call's own timing on the runtime's clock (its retries'
            waits included; a replayed call takes no time).
    """

    type: Literal["tool_call"] = "tool_call"
    tool: str
    key: str
    effect: str = "external"
    args: Any = None
    value: Any = None
    update: dict[str, Any] | None = None
    attempts: int = 1
    replayed: bool = False
    outcome: Literal["ok", "error", "fatal", "undeclared_update",
                     "undeclared_question"] = "ok"
    error: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class RunEnd(EventBase):
    """The last event of a run (leg): its status and state."""

    type: Literal["run_end"] = "run_end"
    status: Literal["completed", "interrupted", "failed", "cancelled"]
    state: dict[str, Any]
    error_type: str | None = None
    breakpoint: Breakpoint | None = None
    """For a leg that paused for a breakpoint (status ``interrupted``), where it paused."""


GraphEvent = Annotated[
    RunStart | NodeStart | NodeEnd | EdgeTransition | CheckpointSaved | InterruptEvent
    | InterruptExpired | ErrorEvent | CustomEvent | ToolCallEvent | RunEnd,
    Field(discriminator="type"),
]
"""Any event of a run; discriminated by ``type``."""

_ADAPTER: TypeAdapter[Any] = TypeAdapter(GraphEvent)


def parse_event(data: dict[str, Any] | str | bytes) -> EventBase:
    """Read an event back from its wire form (a dict or a JSON string)."""
    if isinstance(data, (str, bytes)):
        return _ADAPTER.validate_json(data)  # type: ignore[no-any-return]
    return _ADAPTER.validate_python(data)  # type: ignore[no-any-return]


class FinalEventData(BaseModel):
    """Data of the terminal ``final`` stream item: final state and thread (seed 001)."""

    model_config = ConfigDict(frozen=True)

    state: dict[str, Any]
    thread_id: str


class InterruptEventData(BaseModel):
    """Data of the terminal ``interrupt`` stream item: state, thread and pending interrupts."""

    model_config = ConfigDict(frozen=True)

    state: dict[str, Any]
    thread_id: str
    interrupts: dict[str, Interrupt]


class StreamEvent(BaseModel):
    """One item of ``stream(mode=...)`` for the modes other than ``"events"`` (seed 001).

    ``mode`` is ``"updates"``, ``"values"``, ``"custom"``, ``"tokens"``, ``"debug"``, or the
    terminal ``"interrupt"`` and ``"final"``. Events carry copies: changing them does not
    change the run.
    """

    model_config = ConfigDict(frozen=True)

    mode: str
    data: Any = None
    node: str | None = None
    run_id: str | None = None
    checkpoint_id: str | None = None
    step: int | None = None
    task_id: str | None = None
