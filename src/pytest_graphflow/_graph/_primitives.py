"""The values a graph is built from: reducers, node results and policies (SPEC §1).

``Reducer`` (how writes to a key combine), the node results ``Command`` and ``Expand``, the
``Retry`` policy, and the effect classes and checkpoint policies a graph names.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from ..errors import InvalidArgument

__all__ = [
    "EFFECTS",
    "POLICIES",
    "REPLAYED_EFFECTS",
    "CheckpointPolicy",
    "Command",
    "EffectClass",
    "Expand",
    "Reducer",
    "Retry",
]


EffectClass = Literal["pure", "read", "write", "external", "human"]
EFFECTS: frozenset[str] = frozenset({"pure", "read", "write", "external", "human"})
REPLAYED_EFFECTS: frozenset[str] = frozenset({"write", "external", "human"})
CheckpointPolicy = Literal["every_step", "on_halt", "never"]
POLICIES: frozenset[str] = frozenset({"every_step", "on_halt", "never"})
_PURE_REDUCERS: tuple[Any, ...] = (operator.add, operator.or_, operator.concat, max, min)


@dataclass(frozen=True)
class Reducer:
    """How parallel (and sequential) writes to one state key combine.

    Put it in the field's ``Annotated`` metadata::

        items: Annotated[list[str], Reducer(operator.add)] = []

    A bare two-argument function in the metadata (``Annotated[list[str], operator.add]``,
    LangGraph's spelling) declares the same reducer.

    ``fn(current, update)`` receives the key's current value and a node's update, both in
    their JSON form, and returns the new value. The writes of a parallel batch are folded in
    declared node order (item order for an expansion), so a reducer that is not commutative
    gives a result that depends on declaration order — never on scheduling.

    Attributes:
        fn: the merge function.
        identity: the reducer's identity element, if it has one (used by reducer-law checks).
    """

    fn: Callable[[Any, Any], Any]
    identity: Any = field(default=None)
    has_identity: bool = field(default=False)

    @property
    def pure(self) -> bool:
        """Whether ``fn`` is a builtin that neither mutates its arguments nor can turn JSON
        values into non-JSON ones (``operator.add``, ``operator.or_``, ``max``, ``min``).
        The runtime skips defensive copies and re-checks for these."""
        return self.fn in _PURE_REDUCERS

    @classmethod
    def with_identity(cls, fn: Callable[[Any, Any], Any], identity: Any) -> Reducer:
        """A reducer whose ``identity`` element is declared (``Reducer.with_identity(add, [])``)."""
        return cls(fn, identity, True)


@dataclass(frozen=True)
class Command:
    """A node result that updates state and picks the node's next targets itself.

    ``goto`` replaces the node's static edges and branches. Every target must be declared in
    ``g.node(..., destinations=[...])``; another target fails the run with ``UnknownRoute``.
    In a subgraph, ``graph=Command.PARENT`` ends the child run and hands ``update`` (in the
    parent's keys) and ``goto`` to the parent's subgraph node.
    """

    PARENT: ClassVar[str] = "__parent__"

    update: Mapping[str, Any] | None = None
    goto: str | Sequence[str] | None = None
    graph: str | None = None


@dataclass(frozen=True)
class Expand:
    """A node result that schedules one task of ``node`` per item as the next batch.

    Each task reads its item as ``ctx.item``; their patches merge in item order. The
    checkpoint saved before the expansion does not list the expanding node as completed
    (``ctx.checkpoint_id_before`` names it).
    """

    node: str
    items: Sequence[Any]
    update: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Retry:
    """Retry policy of a node, waited on the runtime's clock.

    Args:
        attempts: how many tries in all, the first included (>= 1).
        backoff: the first delay in seconds (>= 0).
        factor: each further delay is multiplied by this (>= 1).
        max_delay: a cap on one delay, or ``None``.
        retry_on: exception classes that are retried; others fail the node at once.
    """

    attempts: int = 3
    backoff: float = 1.0
    factor: float = 2.0
    max_delay: float | None = None
    retry_on: tuple[type[BaseException], ...] = (Exception,)

    def __post_init__(self) -> None:
        if not isinstance(self.attempts, int) or isinstance(self.attempts, bool):
            raise InvalidArgument(f"Retry(attempts={self.attempts!r}): attempts must be an "
                                  "int >= 1")
        if self.attempts < 1:
            raise InvalidArgument(f"Retry(attempts={self.attempts!r}): attempts must be >= 1 "
                                  "(it counts the first try)")
        if not 0 <= self.backoff < math.inf:
            raise InvalidArgument(f"Retry(backoff={self.backoff!r}): backoff must be a finite "
                                  "number of seconds >= 0")
        if not 1 <= self.factor < math.inf:
            raise InvalidArgument(f"Retry(factor={self.factor!r}): factor must be finite and >= 1")
        if self.max_delay is not None and not 0 <= self.max_delay < math.inf:
            raise InvalidArgument(f"Retry(max_delay={self.max_delay!r}): max_delay must be >= 0 "
                                  "or None")
        retry_on = self.retry_on if isinstance(self.retry_on, tuple) else (self.retry_on,)
        for cls in retry_on:
            if not (isinstance(cls, type) and issubclass(cls, BaseException)):
                raise InvalidArgument(f"Retry(retry_on={self.retry_on!r}): every entry must be "
                                      "an exception class")
        object.__setattr__(self, "retry_on", retry_on)

    def delay(self, failed_attempt: int) -> float:
        """The wait after attempt ``failed_attempt`` (1-based) failed."""
        d = self.backoff * self.factor ** (failed_attempt - 1)
        return d if self.max_delay is None else min(d, self.max_delay)

