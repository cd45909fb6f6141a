"""The graph builder: ``Graph`` — nodes, edges, joins and branches — and its compilation
(SPEC §1). The values graphs are built from are in ``_primitives``, the structure checks in
``_validate``, the compiled graph in ``_compiled``; they are re-exported here, where the
package imports them from.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from types import FunctionType
from typing import Any

from pydantic import BaseModel

from .._records._checks import check_id
from ..errors import GraphValidationError, InvalidArgument
from ._compiled import CompiledGraph
from ._deadlines import TimeoutAnswer, check_on_timeout
from ._middleware import Guardrail, Middleware, checked_hooks, is_async_hook, sync_wrap_problems
from ._names import END, START
from ._primitives import (
    EFFECTS,
    POLICIES,
    REPLAYED_EFFECTS,
    CheckpointPolicy,
    Command,
    EffectClass,
    Expand,
    Reducer,
    Retry,
)
from ._reducers import reducers_of
from ._specs import Branch, Join, NodeSpec
from ._validate import reachable, structure_problems

__all__ = [
    "EFFECTS",
    "END",
    "POLICIES",
    "REPLAYED_EFFECTS",
    "START",
    "Branch",
    "CheckpointPolicy",
    "Command",
    "CompiledGraph",
    "EffectClass",
    "Expand",
    "Graph",
    "Join",
    "NodeSpec",
    "Reducer",
    "Retry",
    "node_names",
    "reachable",
]

_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]+\Z")


def _arity(fn: Callable[..., Any], what: str) -> int:
    """How many positional arguments ``fn`` takes: 1 ``(state)`` or 2 ``(state, ctx)``."""
    if type(fn) is FunctionType:
        found = _code_arity(fn)
        if found:
            return found
    return _signature_arity(fn, what)


def _signature_arity(fn: Callable[..., Any], what: str) -> int:
    """:func:`_arity` as ``inspect.signature`` gives it (any callable; the reference rule
    :func:`_code_arity` follows for plain functions)."""
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


def _code_arity(fn: FunctionType) -> int:
    """:func:`_arity` of a plain function read from its code object, as
    ``inspect.signature`` would give it (a generated graph's compile asks it of every node
    and route: the signature costs about 55 calls, this one). 0: ask the signature (a
    function that declares another signature, or takes no positional argument)."""
    attrs = fn.__dict__
    if attrs and ("__wrapped__" in attrs or "__signature__" in attrs):
        return 0
    code = fn.__code__
    if code.co_flags & _VARARGS:
        return 2
    params = code.co_argcount
    if params >= 2:
        return 2
    if params == 1:
        return 1
    return 0


_VARARGS = inspect.CO_VARARGS

_is_async = is_async_hook


def node_names(value: str | Iterable[str], what: str) -> list[str]:
    """``value`` as a list of node names: one name (a str) or an iterable of them — the one
    rule for edges and for breakpoints, at compile time and per run.

    Raises:
        InvalidArgument: for anything else, naming ``what``.
    """
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray)):
        names = list(value)
        if all(isinstance(v, str) for v in names):
            return names
    raise InvalidArgument(f"{what}={value!r:.80}: pass a node name or a list of node names")


class Graph:
    """A graph under construction; ``compile()`` checks it and returns a :class:`CompiledGraph`.

    Args:
        graph_id: the graph's name; checkpoints record it. Any printable text of 1 to 512
            characters (the stores' rule for every id).
        state: the pydantic model of the graph's state. Its values must round-trip through
            JSON. A field annotated with ``Reducer(fn)`` — or with a bare two-argument
            function, ``Annotated[list[str], operator.add]`` — merges its writes with it.
        middleware: :class:`Middleware` around this graph's node tasks, outermost first
            (inside a runtime's own middleware); see ``docs/middleware.md``.
        guardrails: :class:`Guardrail` checks of its nodes' results, in order (after a
            runtime's own guardrails).

    Raises:
        InvalidArgument: a bad ``graph_id`` or ``state``; callable ``Annotated`` metadata
            that cannot be a reducer, or two reducers on one field; ``middleware`` or
            ``guardrails`` that are not lists of them, or an id used twice.
    """

    def __init__(
        self,
        graph_id: str,
        state: type[BaseModel],
        *,
        middleware: Iterable[Middleware] | None = None,
        guardrails: Iterable[Guardrail] | None = None,
    ) -> None:
        # The stores' one id rule: an id they would refuse mid-run is refused here.
        check_id(graph_id, "graph_id", "Graph")
        if not (isinstance(state, type) and issubclass(state, BaseModel)):
            raise InvalidArgument(f"Graph({graph_id!r}, state={state!r}): state must be a "
                                  "pydantic BaseModel subclass")
        self.graph_id = graph_id
        self.state = state
        self._reducers = reducers_of(state, f"Graph({graph_id!r}, state={state.__name__})")
        self._nodes: dict[str, NodeSpec] = {}
        self._problems: list[str] = []
        self._edges: list[tuple[str, str]] = []
        self._joins: list[Join] = []
        self._branches: list[Branch] = []
        self.middleware, self.guardrails = checked_hooks(middleware, guardrails,
                                                         f"Graph({graph_id!r})")

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
        sources = node_names(source, "edge source")
        targets = node_names(target, "edge target")
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
        interrupt_before: str | Iterable[str] = (),
        interrupt_after: str | Iterable[str] = (),
        on_timeout: str | TimeoutAnswer | None = None,
    ) -> CompiledGraph:
        """Check the structure and return the runnable graph.

        Args:
            checkpoint_policy: ``every_step`` (default), ``on_halt`` or ``never``.
            interrupt_before: breakpoints: every run pauses before a batch holding one of
                these nodes runs (resume it without a ``Resume``). A node name or a list.
            interrupt_after: breakpoints: every run pauses after a batch holding one of these
                nodes committed. A node name or a list.
            on_timeout: what an expired question (``interrupt(..., deadline=...)``) does:
                the name of a node the asking task goes to (as if it returned
                ``Command(goto=node)``, with no patch), or ``TimeoutAnswer(value)``, the
                answer its ``interrupt()`` returns. ``None``: the run fails with
                ``DeadlineExpired``. Not part of ``revision``.

        Raises:
            GraphValidationError: listing every structural problem at once.
            InvalidArgument: ``on_timeout`` is neither a node name nor a ``TimeoutAnswer``.
        """
        if checkpoint_policy not in POLICIES:
            raise InvalidArgument(f"compile(checkpoint_policy={checkpoint_policy!r}): use one of "
                                  f"{sorted(POLICIES)}")
        before = node_names(interrupt_before, "interrupt_before")
        after = node_names(interrupt_after, "interrupt_after")
        route = check_on_timeout(on_timeout)
        problems = structure_problems(self, before, after, route) + self._hook_problems()
        if problems:
            raise GraphValidationError(self.graph_id, problems)
        compiled = CompiledGraph(self, checkpoint_policy)
        compiled.on_timeout = route
        compiled.interrupt_before = frozenset(before)
        compiled.interrupt_after = frozenset(after)
        return compiled

    def _hook_problems(self) -> list[str]:
        """Middleware and guardrails naming nodes the graph lacks, and sync wraps around
        async code."""
        problems = []
        hooks: list[Middleware | Guardrail] = [*self.middleware, *self.guardrails]
        for hook in hooks:
            kind = "middleware" if isinstance(hook, Middleware) else "guardrail"
            for name in sorted(hook.nodes or ()):
                if name not in self._nodes:
                    problems.append(f"{kind} {hook.id!r}: nodes names {name!r}, which is not "
                                    "a node of the graph; name one of its nodes")
        for spec in self._nodes.values():
            chain = [m for m in self.middleware if m.applies_to(spec.name)]
            problems.extend(sync_wrap_problems(chain, spec.name, spec.is_async))
        return problems
