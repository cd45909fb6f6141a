"""What a run gives back: ``GraphResult``, run records, and traces of events."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from .._graph._builder import END, START, CompiledGraph
from .._records._events import Breakpoint, EventBase, Interrupt, NodeEnd, StreamEvent
from .._records._fast import adopt, template
from .._records._json import jcopy

if TYPE_CHECKING:
    from .._graph._node import Visited

__all__ = ["EventLog", "GraphResult", "LazyEvent", "RunLeg", "RunRecord", "StepState", "Trace"]

StateT = TypeVar("StateT", bound=BaseModel)


class StepState:
    """Marker the runner puts after a superstep's events for the ``values`` view (internal).

    It is not an event: the ``events`` view drops it.
    """

    __slots__ = ("checkpoint_id", "state", "step")

    def __init__(self, step: int, state: dict[str, Any], checkpoint_id: str | None) -> None:
        self.step = step
        self.state = state
        self.checkpoint_id = checkpoint_id


_TEMPLATES: dict[type[EventBase], tuple[dict[str, Any], set[str]]] = {}


class LazyEvent:
    """An event of a recorded leg not built yet (internal): its class and its fields.

    ``invoke``/``resume`` on a runtime with an ``on_leg`` observer (the testing runtime) want
    no events, but the observer's :class:`RunLeg` must hold them: the leg numbers and stamps
    these in place of events (its ``__dict__`` is the fields), and :attr:`RunLeg.events` turns
    them into the events they stand for when someone reads them (a failure report, an
    assertion). The fields are the ones the event would have been built from, at that time.
    """

    __slots__ = ("__dict__", "cls")

    cls: type[EventBase]

    def build(self) -> EventBase:
        """The event (built without validation, as the runtime builds its events)."""
        cls = self.cls
        found = _TEMPLATES.get(cls)
        if found is None:
            static, every = template(cls)
            found = _TEMPLATES[cls] = ({**static, "time": None}, every)
        fields = self.__dict__
        # the defaults, then the fields in the order the runtime passes them (as
        # ``_run_state._ev`` does: a field's place shows in the event's JSON)
        data = found[0].copy()
        data["seq"], data["run_id"], data["step"] = (fields["seq"], fields["run_id"],
                                                     fields["step"])
        data.update(fields)
        built: EventBase = adopt(cls, data, found[1])
        return built

    def __repr__(self) -> str:
        return f"<unbuilt {self.cls.__name__} {self.__dict__!r:.120}>"


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
        breakpoint: where a run paused for a breakpoint (status ``interrupted`` and no
            ``interrupts``); resume it without a ``Resume``.
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
    breakpoint: Breakpoint | None = None

    @classmethod
    def _lazy(cls, model_of: Callable[[dict[str, Any]], Any], state: dict[str, Any],
              **fields: Any) -> GraphResult[Any]:
        """A result whose ``state`` and ``data`` are built from ``state`` (the leg's final
        state, never changed again) when first read: ``invoke`` callers often read only the
        status. ``model_of`` builds the model (its own copy)."""
        result = cls.__new__(cls)
        result.__dict__.update(fields, _source=(model_of, state))
        return result

    def _built(self, source: tuple[Callable[[dict[str, Any]], Any], dict[str, Any]]) -> None:
        model_of, state = source
        own = self.__dict__
        own["state"] = model_of(state)
        own["data"] = jcopy(state)
        del own["_source"]

    def __getstate__(self) -> dict[str, Any]:
        source = self.__dict__.get("_source")
        if source is not None:
            self._built(source)
        return self.__dict__

    def raise_for_status(self) -> GraphResult[StateT]:
        """Raise the run's error if it failed or was cancelled; return ``self`` otherwise."""
        if self.error is not None and self.status in ("failed", "cancelled"):
            raise self.error
        return self


class _Built:
    """``GraphResult.state`` and ``.data`` of a lazy result, built when first read. A
    non-data descriptor: once built (or set, as the dataclass's ``__init__`` sets them) the
    instance's dict answers. Not ``GraphResult.__getattr__``: a class with one reads every
    attribute through the interpreter's slow path (``result.status``, ``result.run_id``)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, result: GraphResult[Any] | None, owner: type | None = None) -> Any:
        name = self.name
        if result is None:  # the class has no value of it (a dataclass field, no default)
            raise AttributeError(f"type object 'GraphResult' has no attribute {name!r}")
        own = result.__dict__
        source = own.get("_source")
        if source is None:
            raise AttributeError(f"{type(result).__name__!r} object has no attribute {name!r}")
        result._built(source)
        return own[name]


GraphResult.state = _Built("state")  # type: ignore[misc]
GraphResult.data = _Built("data")  # type: ignore[assignment]


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
            "tenant_id": self.tenant_id, "error": self.error, "legs": self.legs,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        """A record from its JSON form (:meth:`as_dict`, as a durable store keeps it); a
        record written without ``legs`` counts one leg."""
        def moment(key: str) -> datetime | None:
            value = data.get(key)
            return None if value is None else datetime.fromisoformat(value)

        return cls(
            run_id=data["run_id"], thread_id=data.get("thread_id", ""),
            graph_id=data.get("graph_id", ""), revision=data.get("revision", ""),
            status=data.get("status", "running"), started_at=moment("started_at"),
            updated_at=moment("updated_at"), tenant_id=data.get("tenant_id"),
            error=data.get("error"), legs=int(data.get("legs", 1)),
        )


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


@dataclass
class RunLeg:
    """One leg of a run as it happened, for observers (``GraphRuntime(on_leg=...)``).

    Attributes:
        graph: the graph that ran (with the runtime's checkpoint policy, if it sets one).
        run_id: the run.
        resumed: whether the leg resumed an earlier one.
        events: the events of the leg, in order, whichever stream mode was consumed.
        error: an exception that escaped the run (a rejected checkpoint save, an edge
            function's error, a simulated crash), or ``None``.
        visited: the nodes whose tasks completed, in order (for a run that raised, this goes
            further than ``events``: the events of the piece of the run that raised are lost
            with the exception).
        seed: the seed of the runtime that ran it.
        initial_state: for a fresh run, the state it started from (JSON form).
        answers: for a resumed leg, every interrupt answer it starts with (earlier answers
            and the ``Resume``'s), by ``Interrupt.key``.
        store: the store the leg ran on (recorders read its checkpoints from it).
    """

    graph: CompiledGraph
    run_id: str
    resumed: bool = False
    seed: int | None = None
    events: list[EventBase] = field(default_factory=list)
    error: BaseException | None = None
    visited: list[str] = field(default_factory=list)
    initial_state: dict[str, Any] | None = None
    answers: dict[str, Any] = field(default_factory=dict)
    store: Any = None

    lazy: bool = field(default=False, init=False, repr=False, compare=False)
    """Whether the runtime may hand this leg :class:`LazyEvent` entries (set by the runtime
    when the call that ran it reads no events: ``invoke``, ``resume``, ``step``)."""

    @classmethod
    def _started(cls, graph: CompiledGraph, run_id: str, resumed: bool, seed: int | None,
                 initial_state: dict[str, Any] | None, answers: dict[str, Any], store: Any,
                 lazy: bool) -> RunLeg:
        """The leg the runtime shows its ``on_leg`` observer as the leg starts (internal):
        what ``RunLeg(graph=..., ..., store=store)`` makes, with ``lazy`` set, its fields
        set directly (the dataclass's ``__init__`` goes through the ``events`` and
        ``visited`` properties: a few calls a leg, every leg of every test)."""
        leg = cls.__new__(cls)
        leg.__dict__.update(
            graph=graph, run_id=run_id, resumed=resumed, seed=seed, events=[], _unbuilt=None,
            error=None, visited=[], initial_state=initial_state, answers=answers, store=store,
            lazy=lazy)
        return leg

    def _note(self, items: list[Any], visited: Visited) -> None:
        """The runner's report of one piece of the leg: its events and step markers (events
        maybe unbuilt), and the nodes visited so far (a snapshot, listed when read)."""
        d = self.__dict__
        if items:
            log: list[Any] = d["events"]
            if d["_unbuilt"] is None:
                d["_unbuilt"] = len(log)
            log.extend([i for i in items if type(i) is not StepState])
        d["_visited_at"] = visited  # (what _reached does, without the call)

    def _reached(self, visited: Visited) -> None:
        """The nodes visited so far (kept as the run's snapshot, a list only when read)."""
        self.__dict__["_visited_at"] = visited

    @property
    def status(self) -> str:
        """``run_end``'s status, ``"raised"`` when an exception escaped, else ``"running"``."""
        for event in reversed(self.events):
            if getattr(event, "type", None) == "run_end":
                return str(event.status)  # type: ignore[attr-defined]
        return "raised" if self.error is not None else "running"

    def path(self) -> list[tuple[str, str]]:
        """The ``(source, target)`` edges the leg took, in order, each once.

        A fresh run also enters its first nodes from ``START`` (``"__start__"``); the other
        edges come from ``edge_transition`` events.
        """
        pairs: list[tuple[str, str]] = []
        first_step: int | None = None
        fresh = False
        for event in self.events:
            kind = getattr(event, "type", None)
            if kind == "run_start":
                fresh = getattr(event, "resumed_from", None) is None
            elif kind == "node_start" and fresh and event.node is not None:
                if first_step is None:
                    first_step = event.step
                if event.step == first_step:
                    pairs.append((START, event.node))
            elif kind == "edge_transition":
                pairs.append((event.source, event.target))  # type: ignore[attr-defined]
        return list(dict.fromkeys(pairs))

    def path_text(self) -> str:
        """The path as one line: ``START -> a -> b -> END`` (branches separated by ``;``)."""
        names = {START: "START", END: "END"}
        chains: list[list[str]] = []
        for source, target in self.path():
            src, dst = names.get(source, source), names.get(target, target)
            for chain in chains:
                if chain[-1] == src:
                    chain.append(dst)
                    break
            else:
                chains.append([src, dst])
        return "; ".join(" -> ".join(chain) for chain in chains) or "(no edges taken)"

    def mermaid(self) -> str:
        """The graph as a Mermaid flowchart with the edges of :meth:`path` drawn bold."""
        return self.graph.mermaid(path=self.path())


def _leg_events(leg: RunLeg) -> list[EventBase]:
    d = leg.__dict__
    log: list[Any] = d["events"]
    start = d.get("_unbuilt")
    if start is not None:  # entries the runtime left unbuilt: build them now, in place
        for i in range(start, len(log)):
            entry = log[i]
            if type(entry) is LazyEvent:
                log[i] = entry.build()
        d["_unbuilt"] = None
    return log


def _set_leg_events(leg: RunLeg, events: list[EventBase]) -> None:
    leg.__dict__["events"] = events
    leg.__dict__["_unbuilt"] = None


def _leg_visited(leg: RunLeg) -> list[str]:
    d = leg.__dict__
    snapshot = d.pop("_visited_at", None)
    if snapshot is not None:
        d["visited"] = list(snapshot)
    visited: list[str] = d["visited"]
    return visited


def _set_leg_visited(leg: RunLeg, visited: list[str]) -> None:
    leg.__dict__["visited"] = visited
    leg.__dict__.pop("_visited_at", None)


# Read through these, the leg's entries become events (and its visited snapshot a list)
# only when someone looks; the dataclass's __init__, __eq__ and __repr__ go through them.
RunLeg.events = property(_leg_events, _set_leg_events,  # type: ignore[assignment]
                         doc="The events of the leg, in order.")
RunLeg.visited = property(_leg_visited, _set_leg_visited,  # type: ignore[assignment]
                          doc="The nodes whose tasks completed, in order.")
