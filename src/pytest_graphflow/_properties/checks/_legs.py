"""What the event checkers share: a violation, a run's legs, and reading events of any form."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from itertools import pairwise, repeat
from typing import Any

from ..._records._events import (
    ErrorEvent,
    EventBase,
    InterruptEvent,
    NodeEnd,
    RunEnd,
    RunStart,
    parse_event,
)

__all__ = ["Leg", "Violation", "halting", "legs_shared", "normalise_events", "short", "split_legs",
           "terminal"]


@dataclass(frozen=True)
class Violation:
    """A broken rule.

    Attributes:
        rule: ``"C1"``..``"C10"`` for the event invariants; the whole-run properties use
            ``"equivalence"``, ``"crash-recovery"``, ``"effects"``, ``"determinism"``,
            ``"schedule"`` and ``"reducer:<law>"``.
        index: the index of the offending event in the list checked, or ``None``.
        message: what is wrong, naming nodes, tasks and checkpoints.
        example: for whole-run properties and reducer laws, the (minimal) counterexample.
    """

    rule: str
    index: int | None
    message: str
    example: Any = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        where = "" if self.index is None else f" at event #{self.index}"
        return f"{self.rule}{where}: {self.message}"


@dataclass
class Leg:
    """One leg of a run: from a ``run_start`` to its ``run_end`` (or the end of the list).

    Attributes:
        start: index of the leg's first event in the whole list.
        events: the leg's events.
    """

    start: int
    events: list[EventBase]

    @property
    def end(self) -> int:
        """Index one past the leg's last event."""
        return self.start + len(self.events)

    def indexed(self) -> Iterable[tuple[int, EventBase]]:
        """``(index in the whole list, event)`` pairs."""
        return enumerate(self.events, start=self.start)

    @property
    def run_start(self) -> RunStart | None:
        """The leg's ``run_start``, if it begins with one."""
        first = self.events[0] if self.events else None
        return first if type(first) is RunStart else None

    @property
    def run_end(self) -> RunEnd | None:
        """The leg's ``run_end``, if it ends with one."""
        last = self.events[-1] if self.events else None
        return last if type(last) is RunEnd else None


def normalise_events(events: Iterable[Any]) -> list[EventBase]:
    """Events as models: wire-form dicts and JSON strings are parsed (a new list)."""
    out = list(events)
    if all(map(isinstance, out, repeat(EventBase))):
        return out  # a run's own log: models already (no call per event)
    return [e if isinstance(e, EventBase) else parse_event(e) for e in out]


_SHARED: ContextVar[tuple[Sequence[EventBase], list[Leg]] | None] = ContextVar(
    "graphflow_shared_legs", default=None)


@contextmanager
def legs_shared(events: Sequence[EventBase]) -> Iterator[None]:
    """Within the block, :func:`split_legs` of ``events`` (that very list, unchanged) splits
    it once: ``check_invariants`` runs a dozen checkers over one log, each splitting it."""
    token = share_legs(events)
    try:
        yield
    finally:
        _SHARED.reset(token)


def share_legs(events: Sequence[EventBase]) -> Token[Any]:
    """:func:`legs_shared` without its context manager: the token to reset ``_SHARED`` with."""
    return _SHARED.set((events, _split(events)))


def split_legs(events: Sequence[EventBase]) -> list[Leg]:
    """The legs of a run's log, split at each ``run_start`` (a prefix before any is a leg)."""
    shared = _SHARED.get()
    if shared is not None and shared[0] is events:
        return shared[1]
    return _split(events)


def _split(events: Sequence[EventBase]) -> list[Leg]:
    if not events:
        return []
    starts = [i for i, e in enumerate(events) if type(e) is RunStart]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)  # a prefix before any run_start is a leg
    starts.append(len(events))
    return [Leg(a, list(events[a:b])) for a, b in pairwise(starts)]


def halting(e: EventBase) -> bool:
    """An event reporting a node's halt: an interrupt, or a final, unrouted node error."""
    if type(e) is InterruptEvent:
        return True
    return (type(e) is ErrorEvent and e.task_id is not None and not e.will_retry
            and e.routed_to is None)


def terminal(e: EventBase) -> bool:
    """A task's result: ``node_end``, ``interrupt`` or a final ``error``."""
    return type(e) in (NodeEnd, InterruptEvent) or (
        type(e) is ErrorEvent and e.task_id is not None and not e.will_retry
    )



def short(e: EventBase) -> str:
    data = e.model_dump(mode="json", exclude={"run_id", "time"})
    kind = data.pop("type", "?")
    keep = {k: v for k, v in data.items() if v not in (None, False, [], {})}
    return f"{kind} " + " ".join(f"{k}={v!r}" for k, v in keep.items())

