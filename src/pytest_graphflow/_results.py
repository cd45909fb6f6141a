"""What a run gives back: ``GraphResult``, run records, and traces of events."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from ._events import EventBase, Interrupt, NodeEnd, StreamEvent
from ._json import jcopy
from ._runner import StepState

__all__ = ["EventLog", "GraphResult", "RunRecord", "Trace"]

StateT = TypeVar("StateT", bound=BaseModel)


@dataclass
class GraphResult(Generic[StateT]):
    """The outcome of a run (seed 001, seed 002).

    Attributes:
        state: the final (or paused) state as the schema's model.
        data: the same state as a plain dict (JSON form).
        status: ``completed``, ``interrupted``, ``failed`` or ``cancelled``.
        run_id: the run.
        thread_id: the thread the run used.
        step: the superstep in which the run finished or paused, from 0.
        checkpoint_id: the run's last checkpoint, if one was saved.
        interrupts: pending interrupts by ``Interrupt.key``.
        error: what ended a failed or cancelled run (``NodeFailed``, ``RunTimedOut``, ...).
    """

    state: StateT
    data: dict[str, Any]
    status: str
    run_id: str
    thread_id: str
    step: int
    checkpoint_id: str | None = None
    interrupts: dict[str, Interrupt] = field(default_factory=dict)
    error: BaseException | None = None

    def raise_for_status(self) -> GraphResult[StateT]:
        """Raise the run's error if it failed or was cancelled; return ``self`` otherwise."""
        if self.error is not None and self.status in ("failed", "cancelled"):
            raise self.error
        return self


@dataclass
class RunRecord:
    """A run's record (seed 002): lifecycle status, graph identity, revision, timing, failure."""

    run_id: str
    thread_id: str
    graph_id: str
    revision: str
    status: str
    started_at: datetime | None
    updated_at: datetime | None
    tenant_id: str | None = None
    error: dict[str, Any] | None = None
    legs: int = 1

    def as_dict(self) -> dict[str, Any]:
        """The record in JSON form (what durable stores keep)."""
        return {
            "run_id": self.run_id, "thread_id": self.thread_id, "graph_id": self.graph_id,
            "revision": self.revision, "status": self.status,
            "started_at": None if self.started_at is None else self.started_at.isoformat(),
            "updated_at": None if self.updated_at is None else self.updated_at.isoformat(),
            "tenant_id": self.tenant_id, "error": self.error,
        }


class EventLog(list[EventBase]):
    """A run's events, with the ``updates`` and ``values`` views of ``stream(mode=...)``."""

    def __init__(self, events: list[EventBase] = (), states: list[StepState] = ()) -> None:  # type: ignore[assignment]
        super().__init__(events)
        self._states = list(states)

    def updates(self) -> list[StreamEvent]:
        """Each completed task's update, as ``stream(mode="updates")`` gives them."""
        return [StreamEvent(mode="updates", data=jcopy(e.patch), node=e.node, run_id=e.run_id,
                            step=e.step, task_id=e.task_id)
                for e in self if isinstance(e, NodeEnd)]

    def values(self) -> list[dict[str, Any]]:
        """The state after each superstep, as ``stream(mode="values")`` gives them."""
        return [jcopy(s.state) for s in self._states]

    def of_type(self, *types: str) -> list[EventBase]:
        """The events whose ``type`` is one of ``types``."""
        return [e for e in self if e.type in types]  # type: ignore[attr-defined]


@dataclass
class Trace:
    """A finished run as tests look at it: result, events and the store's call log."""

    result: GraphResult[Any]
    events: EventLog
    store_log: list[Any]

    @property
    def status(self) -> str:
        """The run's status."""
        return self.result.status

    @property
    def state(self) -> Any:
        """The run's final state (model)."""
        return self.result.state

    def to_json(self) -> str:
        """The event stream as JSON lines (byte-identical for the same graph, input and seed)."""
        return "\n".join(e.model_dump_json() for e in self.events)
