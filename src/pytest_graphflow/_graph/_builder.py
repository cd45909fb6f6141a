"""The graph builder: nodes, edges, joins, branches, validation and compilation (SPEC §1)."""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import math
import operator
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from ..errors import GraphValidationError, InvalidArgument
from ._names import END, START

__all__ = [
    "END",
    "START",
    "Command",
    "CompiledGraph",
    "EffectClass",
    "Expand",
    "Graph",
    "Reducer",
    "Retry",
]


EffectClass = Literal["pure", "read", "write", "external", "human"]
EFFECTS: frozenset[str] = frozenset({"pure", "read", "write", "external", "human"})
REPLAYED_EFFECTS: frozenset[str] = frozenset({"write", "external", "human"})
CheckpointPolicy = Literal["every_step", "on_halt", "never"]
POLICIES: frozenset[str] = frozenset({"every_step", "on_halt", "never"})

_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]+\Z")
_PURE_REDUCERS: tuple[Any, ...] = (operator.add, operator.or_, operator.concat, max, min)


@dataclass(frozen=True)
class Reducer:
    """How parallel (and sequential) writes to one state key combine.

    Put it in the field's ``Annotated`` metadata::

        items: Annotated[list[str], Reducer(operator.add)] = []

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


def _arity(fn: Callable[..., Any], what: str) -> int:
    """How many positional arguments ``fn`` takes: 1 ``(state)`` or 2 ``(state, ctx)``."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature: assume (state)
        return 1
    params = [p for p in sig.parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values()):
        return 2
    required = [p for p in params if p.default is p.empty]
    if len(params) >= 2:
        return 2
    if len(required) == 1 or len(params) == 1:
        return 1
    raise InvalidArgument(f"{what} must take (state) or (state, ctx); got signature {sig}")


def _is_async(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return call is not None and inspect.iscoroutinefunction(call)


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


def _as_list(value: str | Sequence[str], what: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return list(value)
    raise InvalidArgument(f"{what} must be a node name or a list of node names, got {value!r}")


def _reducers_of(model: type[BaseModel]) -> dict[str, Reducer]:
    found: dict[str, Reducer] = {}
    for name, info in model.model_fields.items():
        for meta in info.metadata:
            if isinstance(meta, Reducer):
                found[name] = meta
    return found


class Graph:
    """A graph under construction; ``compile()`` checks it and returns a :class:`CompiledGraph`.

    Args:
        graph_id: the graph's name; checkpoints record it.
        state: the pydantic model of the graph's state. Its values must round-trip through
            JSON. A field annotated with ``Reducer(...)`` merges parallel writes.
    """

    def __init__(self, graph_id: str, state: type[BaseModel]) -> None:
        if not isinstance(graph_id, str) or not graph_id:
            raise InvalidArgument(f"Graph(graph_id={graph_id!r}): graph_id must be a non-empty str")
        if not (isinstance(state, type) and issubclass(state, BaseModel)):
            raise InvalidArgument(f"Graph({graph_id!r}, state={state!r}): state must be a "
                                  "pydantic BaseModel subclass")
        self.graph_id = graph_id
        self.state = state
        self._nodes: dict[str, NodeSpec] = {}
        self._problems: list[str] = []
        self._edges: list[tuple[str, str]] = []
        self._joins: list[Join] = []
        self._branches: list[Branch] = []

    def node(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        effect: EffectClass = "pure",
        retry: Retry | None = None,
        on_error: str | None = None,
        writes: Iterable[str] | None = None,
        checkpoint: bool = False,
        destinations: Iterable[str] | None = None,
    ) -> Graph:
        """Add a node.

        Args:
            name: unique node name (letters, digits, ``_ . -``).
            fn: ``fn(state)`` or ``fn(state, ctx)``, sync or async, returning ``None``, a patch
                dict, a :class:`Command` or an :class:`Expand`.
            effect: ``pure``/``read`` nodes re-run on resume; ``write``/``external``/``human``
                nodes that completed are replayed from their recorded output (C9).
            retry: a :class:`Retry` policy.
            on_error: a node to route to when this node fails (after its retries).
            writes: the keys the node may write; another key fails the run (``UndeclaredWrite``).
            checkpoint: save a checkpoint after this node's step whatever the policy.
            destinations: targets the node may pick at run time (``Command.goto``, ``Expand``).

        Returns:
            the graph, so calls can chain.
        """
        if isinstance(fn, CompiledGraph):
            from ._subgraph import Subgraph

            fn = Subgraph(fn)
        if not callable(fn):
            raise InvalidArgument(f"g.node({name!r}, fn={fn!r}): fn must be callable")
        if effect not in EFFECTS:
            raise InvalidArgument(f"g.node({name!r}, effect={effect!r}): effect must be one of "
                                  f"{sorted(EFFECTS)}")
        if retry is not None and not isinstance(retry, Retry):
            raise InvalidArgument(f"g.node({name!r}, retry={retry!r}): pass a Retry(...)")
        if not isinstance(name, str):
            raise InvalidArgument(f"g.node(name={name!r}): a node name must be a str")
        if name in (START, END):
            self._problems.append(f"node {name!r}: the name is reserved; pick another name")
            return self
        if not _NAME_RE.match(name):
            self._problems.append(f"node {name!r}: names may use letters, digits, '_', '.' and "
                                  "'-' only")
        if name in self._nodes:
            self._problems.append(f"node {name!r}: declared twice; node names must be unique")
            return self
        self._nodes[name] = NodeSpec(
            name=name,
            fn=fn,
            index=len(self._nodes),
            arity=_arity(fn, f"node {name!r}"),
            is_async=_is_async(fn),
            effect=effect,
            retry=retry,
            on_error=on_error,
            writes=None if writes is None else frozenset(writes),
            checkpoint=bool(checkpoint),
            destinations=tuple(destinations or ()),
        )
        return self

    def edge(self, source: str | Sequence[str], target: str | Sequence[str]) -> Graph:
        """Add static edges.

        ``edge("a", "b")`` runs ``b`` after ``a``; ``edge("a", ["b", "c"])`` fans out (``b`` and
        ``c`` run as one parallel batch); ``edge(["b", "c"], "join")`` makes ``join`` wait for
        both ``b`` and ``c``.
        """
        sources = _as_list(source, "edge source")
        targets = _as_list(target, "edge target")
        if len(sources) > 1:
            for t in targets:
                self._joins.append(Join(t, tuple(sources)))
        else:
            for t in targets:
                self._edges.append((sources[0], t))
        return self

    def branch(
        self,
        source: str,
        route: Callable[..., Any],
        targets: Mapping[Hashable, str] | Sequence[str],
    ) -> Graph:
        """Add a conditional edge.

        ``route(state)`` or ``route(state, ctx)`` runs right after ``source``, on the state it
        ran on with its own patch applied, and returns a key of ``targets`` (a mapping) or a
        target name (a list), or a list of them for a fan-out. A route that raises ends the
        run with that exception (C7).
        """
        if not callable(route):
            raise InvalidArgument(f"g.branch({source!r}, route={route!r}): route must be callable")
        if isinstance(targets, Mapping):
            mapping: Mapping[Hashable, str] | None = dict(targets)
            names = tuple(dict.fromkeys(targets.values()))
        elif isinstance(targets, Sequence) and not isinstance(targets, str):
            mapping = None
            names = tuple(targets)
        else:
            raise InvalidArgument(f"g.branch({source!r}, targets={targets!r}): targets must be a "
                                  "mapping of route keys to nodes or a list of nodes")
        self._branches.append(
            Branch(source, route, _arity(route, f"branch from {source!r}"), mapping, names)
        )
        return self

    def compile(
        self,
        *,
        checkpoint_policy: CheckpointPolicy = "every_step",
        interrupt_before: Iterable[str] = (),
        interrupt_after: Iterable[str] = (),
    ) -> CompiledGraph:
        """Check the structure and return the runnable graph.

        Args:
            checkpoint_policy: ``every_step`` (default), ``on_halt`` or ``never``.
            interrupt_before: breakpoints: every run pauses before a batch holding one of
                these nodes runs (resume it without a ``Resume``).
            interrupt_after: breakpoints: every run pauses after a batch holding one of these
                nodes committed.

        Raises:
            GraphValidationError: listing every structural problem at once.
        """
        if checkpoint_policy not in POLICIES:
            raise InvalidArgument(f"compile(checkpoint_policy={checkpoint_policy!r}): use one of "
                                  f"{sorted(POLICIES)}")
        problems = list(self._problems)
        nodes = self._nodes
        before = _as_list(list(interrupt_before), "interrupt_before")
        after = _as_list(list(interrupt_after), "interrupt_after")
        for what, names in (("interrupt_before", before), ("interrupt_after", after)):
            for name in names:
                if name not in nodes:
                    problems.append(f"compile({what}=...): unknown node {name!r}")
        keys = set(self.state.model_fields)

        def known(name: str, where: str) -> bool:
            if name in nodes or name == END:
                return True
            problems.append(f"{where}: unknown node {name!r}")
            return False

        for src, dst in self._edges:
            where = f"edge {src!r} -> {dst!r}"
            if src == END:
                problems.append(f"{where}: END has no outgoing edges")
            elif src != START:
                known(src, where)
            if dst == START:
                problems.append(f"{where}: START cannot be an edge target")
            else:
                known(dst, where)
        for j in self._joins:
            where = f"join {list(j.sources)} -> {j.target!r}"
            for s in j.sources:
                if s in (START, END):
                    problems.append(f"{where}: {s!r} cannot be a join source")
                else:
                    known(s, where)
            known(j.target, where)
        for b in self._branches:
            where = f"branch from {b.source!r}"
            if b.source != START:
                known(b.source, where)
            if not b.targets:
                problems.append(f"{where}: no targets; pass a mapping or a list of nodes")
            for t in b.targets:
                known(t, f"{where}: branch target")
        for spec in nodes.values():
            if spec.on_error is not None:
                known(spec.on_error, f"node {spec.name!r} on_error")
            for d in spec.destinations:
                known(d, f"node {spec.name!r} destinations")
            if spec.writes is not None:
                for k in sorted(spec.writes - keys):
                    problems.append(f"node {spec.name!r} writes: unknown state key {k!r}")

        succ: dict[str, list[str]] = {}
        for src, dst in self._edges:
            succ.setdefault(src, []).append(dst)
        for b in self._branches:
            succ.setdefault(b.source, []).extend(b.targets)
        for j in self._joins:
            for s in j.sources:
                succ.setdefault(s, []).append(j.target)
        for spec in nodes.values():
            if spec.on_error:
                succ.setdefault(spec.name, []).append(spec.on_error)
            succ.setdefault(spec.name, []).extend(spec.destinations)

        for j in self._joins:
            for s in j.sources:
                source = nodes.get(s)
                if source is None or source.on_error is None or source.on_error not in nodes:
                    continue
                if s not in reachable(source.on_error, succ):
                    problems.append(
                        f"node {s!r} on_error {source.on_error!r}: {s!r} feeds join "
                        f"{list(j.sources)} -> {j.target!r}, but a failure routed to "
                        f"{source.on_error!r} never arrives there and nothing leads back to "
                        f"{s!r}, so the join would starve (JoinStarved) after the fallback "
                        f"ran; route the failure back to {s!r} (a retry loop), give {s!r} a "
                        "Retry instead, or join on the fallback's result in a node of its own"
                    )
        if not succ.get(START):
            problems.append("START: the graph has no entry; add g.edge(START, <first node>)")
        reach = reachable(START, succ)
        for name in nodes:
            if name not in reach:
                problems.append(f"node {name!r}: unreachable from START")
        pred: dict[str, list[str]] = {}
        for src, dsts in succ.items():
            for d in dsts:
                pred.setdefault(d, []).append(src)
        finishing = reachable(END, pred)
        for name in nodes:
            if name in reach and name not in finishing:
                problems.append(f"node {name!r}: no path to END")
        if problems:
            raise GraphValidationError(self.graph_id, problems)
        compiled = CompiledGraph(self, checkpoint_policy)
        compiled.interrupt_before = frozenset(before)
        compiled.interrupt_after = frozenset(after)
        return compiled


def reachable(start: str, succ: Mapping[str, Sequence[str]]) -> set[str]:
    """Every node reachable from ``start`` in the successor table ``succ`` (itself too)."""
    seen = {start}
    todo = [start]
    while todo:
        for nxt in succ.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


class CompiledGraph:
    """A validated graph, ready to run. Build one with :meth:`Graph.compile`.

    Attributes:
        graph_id: the graph's name.
        revision: a stable hash of the structure; checkpoints record it.
        state_model: the pydantic state model.
        checkpoint_policy: ``every_step``, ``on_halt`` or ``never``.
        interrupt_before: nodes every run pauses before (breakpoints).
        interrupt_after: nodes every run pauses after (breakpoints).
    """

    def __init__(self, graph: Graph, checkpoint_policy: str) -> None:
        self.interrupt_before: frozenset[str] = frozenset()
        self.interrupt_after: frozenset[str] = frozenset()
        self.graph_id = graph.graph_id
        self.state_model = graph.state
        self.checkpoint_policy = checkpoint_policy
        self.nodes: dict[str, NodeSpec] = dict(graph._nodes)
        self.keys: frozenset[str] = frozenset(graph.state.model_fields)
        self.reducers: dict[str, Reducer] = _reducers_of(graph.state)
        self.joins: tuple[Join, ...] = tuple(graph._joins)
        edges: dict[str, list[str]] = {}
        for src, dst in graph._edges:
            if dst not in edges.setdefault(src, []):
                edges[src].append(dst)
        self.edges: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in edges.items()}
        branches: dict[str, list[Branch]] = {}
        for b in graph._branches:
            branches.setdefault(b.source, []).append(b)
        self.branches: dict[str, tuple[Branch, ...]] = {k: tuple(v) for k, v in branches.items()}
        joins_from: dict[str, list[Join]] = {}
        for j in self.joins:
            for s in j.sources:
                joins_from.setdefault(s, []).append(j)
        self.joins_from: dict[str, tuple[Join, ...]] = {k: tuple(v) for k, v in joins_from.items()}
        self.every_step = checkpoint_policy == "every_step"
        self.revision = self._revision()
        from ._schema import StateCodec

        self.codec = StateCodec(graph.state)
        self.codec.checked_on_write = frozenset(
            k for k in self.keys if k not in self.reducers or self.reducers[k].pure)

    def _revision(self) -> str:
        structure = {
            "graph_id": self.graph_id,
            "state": sorted(self.keys),
            "reducers": sorted(self.reducers),
            "nodes": [
                [n.name, n.effect, sorted(n.writes) if n.writes is not None else None,
                 n.on_error, list(n.destinations), n.checkpoint,
                 None if n.retry is None else [n.retry.attempts, n.retry.backoff, n.retry.factor,
                                               n.retry.max_delay]]
                for n in self.nodes.values()
            ],
            "edges": sorted([s, d] for s, ds in self.edges.items() for d in ds),
            "joins": sorted([list(j.sources), j.target] for j in self.joins),
            "branches": sorted([b.source, list(b.targets)] for bs in self.branches.values()
                               for b in bs),
        }
        digest = hashlib.sha256(json.dumps(structure, sort_keys=True).encode()).hexdigest()
        return f"rev-{digest[:16]}"

    def with_policy(self, checkpoint_policy: CheckpointPolicy) -> CompiledGraph:
        """The same graph (same structure and ``revision``) under another checkpoint policy.

        Raises:
            InvalidArgument: for an unknown policy.
        """
        if checkpoint_policy not in POLICIES:
            raise InvalidArgument(f"with_policy({checkpoint_policy!r}): use one of "
                                  f"{sorted(POLICIES)}")
        if checkpoint_policy == self.checkpoint_policy:
            return self
        twin = copy.copy(self)
        twin.checkpoint_policy = checkpoint_policy
        twin.every_step = checkpoint_policy == "every_step"
        return twin

    def step(self, runtime: Any, input: Any = None, *, run_id: str | None = None,
             resume: Any = None, **options: Any) -> Any:
        """Run one superstep of this graph on ``runtime`` (a ``GraphRuntime``); see
        ``GraphRuntime.step``: start a run, or continue ``run_id`` by one superstep.

        Returns:
            the ``GraphResult`` after that superstep (``interrupted`` with a ``breakpoint``
            while the run has more to do).
        """
        return runtime.step(self, input, run_id=run_id, resume=resume, **options)

    def allowed_targets(self, node: str) -> tuple[str, ...]:
        """Every target ``node`` may reach: static edges, branch targets, destinations."""
        spec = self.nodes[node]
        out = list(self.edges.get(node, ()))
        for b in self.branches.get(node, ()):
            out.extend(b.targets)
        out.extend(spec.destinations)
        return tuple(dict.fromkeys(out))

    def mermaid(self, *, path: Sequence[tuple[str, str]] | None = None) -> str:
        """The graph as a Mermaid flowchart; ``path`` edges taken by a run are drawn bold."""
        from ._mermaid import render

        return render(self, path=path)

    def __repr__(self) -> str:
        return (f"<CompiledGraph {self.graph_id!r} {self.revision} "
                f"nodes={list(self.nodes)}>")
