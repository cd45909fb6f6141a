"""What a graph is made of once declared: its nodes, conditional edges and joins, and the
two views of a graph that validating, compiling and drawing read (internal).

These live apart from :mod:`._builder` so that :mod:`._compiled`, :mod:`._validate` and
:mod:`._mermaid` can name them without importing the builder that imports them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

if TYPE_CHECKING:
    from ._middleware import Guardrail, Middleware
    from ._primitives import Reducer, Retry

__all__ = ["Branch", "DeclaredGraph", "DrawnGraph", "Join", "NodeSpec"]


@dataclass(frozen=True)
class NodeSpec:
    """A node as declared: its function and its contract (internal)."""

    name: str
    fn: Callable[..., Any]
    index: int
    arity: int
    is_async: bool
    effect: str
    retry: Retry | None
    on_error: str | None
    writes: frozenset[str] | None
    checkpoint: bool
    destinations: tuple[str, ...]


@dataclass(frozen=True)
class Branch:
    """A conditional edge (internal)."""

    source: str
    route: Callable[..., Any]
    arity: int
    mapping: Mapping[Hashable, str] | None
    targets: tuple[str, ...]


@dataclass(frozen=True)
class Join:
    """A join: ``target`` runs once every source has arrived (internal)."""

    target: str
    sources: tuple[str, ...]
    key: str = field(default="", compare=False)
    """The join's key in a checkpoint's arrivals table."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{'+'.join(self.sources)}->{self.target}")

    def __hash__(self) -> int:
        # Hashed once per process: a batch of N sources looks its join up N times, and
        # hashing the sources each time cost O(N) a lookup.
        found: int | None = self.__dict__.get("_hash")
        if found is None:
            found = hash((self.target, self.sources))
            object.__setattr__(self, "_hash", found)
        return found

    @property
    def source_set(self) -> frozenset[str]:
        """``sources`` as a set, built once: a batch checks its arrivals against it."""
        found: frozenset[str] | None = self.__dict__.get("_source_set")
        if found is None:
            found = frozenset(self.sources)
            object.__setattr__(self, "_source_set", found)
        return found

    def __getstate__(self) -> dict[str, Any]:
        # A string's hash differs between processes: a copy hashes itself again.
        return {k: v for k, v in self.__dict__.items() if k not in ("_hash", "_source_set")}


class DeclaredGraph(Protocol):
    """A graph as its builder holds it: what :func:`._validate.structure_problems` and
    :class:`._compiled.CompiledGraph` read (``_builder.Graph`` is the one implementation)."""

    @property
    def graph_id(self) -> str: ...
    @property
    def state(self) -> type[BaseModel]: ...
    @property
    def middleware(self) -> tuple[Middleware, ...]: ...
    @property
    def guardrails(self) -> tuple[Guardrail, ...]: ...
    @property
    def _nodes(self) -> Mapping[str, NodeSpec]: ...
    @property
    def _reducers(self) -> Mapping[str, Reducer]: ...
    @property
    def _edges(self) -> Sequence[tuple[str, str]]: ...
    @property
    def _joins(self) -> Sequence[Join]: ...
    @property
    def _branches(self) -> Sequence[Branch]: ...
    @property
    def _problems(self) -> Sequence[str]: ...


class DrawnGraph(Protocol):
    """A compiled graph as :mod:`._mermaid` draws it: nodes, edges, branches and joins."""

    @property
    def nodes(self) -> Mapping[str, NodeSpec]: ...
    @property
    def edges(self) -> Mapping[str, tuple[str, ...]]: ...
    @property
    def branches(self) -> Mapping[str, tuple[Branch, ...]]: ...
    @property
    def joins(self) -> tuple[Join, ...]: ...
