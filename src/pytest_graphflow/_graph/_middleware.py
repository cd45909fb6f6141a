"""Middleware and guardrails: hooks a graph or a runtime declares around node tasks.

A :class:`Middleware` has an ``id`` and up to three hooks — ``before``, ``wrap`` and
``after`` — around every node task, or only around the ``nodes`` it names. A
:class:`Guardrail` checks a node's patch and answers :class:`Allow`, :class:`Block` or
:class:`Rewrite`. The runtime calls them (``_engine/_hooks``); this module only declares them
and checks the declarations.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import FunctionType
from typing import Any

from .._records._checks import check_id
from ..errors import InvalidArgument

__all__ = ["Allow", "Block", "Guardrail", "Middleware", "Rewrite", "checked_hooks",
           "is_async_hook", "is_coroutine_function", "sync_wrap_problems"]


def is_async_hook(fn: Any) -> bool:
    """Whether calling ``fn`` gives a coroutine (an ``async def``, or an object whose
    ``__call__`` is one)."""
    if type(fn) is FunctionType and "__call__" not in fn.__dict__:
        # A plain function (every node of a generated graph): its ``__call__`` is the
        # function type's own, never a coroutine function; its code object answers.
        return is_coroutine_function(fn)
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return call is not None and inspect.iscoroutinefunction(call)


_COROUTINE_MARK = getattr(inspect, "_is_coroutine_mark", None)
"""What ``inspect.markcoroutinefunction`` (Python 3.12+) sets on a function it marks."""


def is_coroutine_function(fn: Any) -> bool:
    """``inspect.iscoroutinefunction(fn)``, read from a plain function's code object (and
    its 3.12 mark) without the ~10 calls ``inspect`` makes to unwrap what it could be."""
    if type(fn) is not FunctionType:
        return inspect.iscoroutinefunction(fn)
    if fn.__code__.co_flags & inspect.CO_COROUTINE:
        return True
    return _COROUTINE_MARK is not None \
        and fn.__dict__.get("_is_coroutine_marker") is _COROUTINE_MARK


def _nodes(nodes: Iterable[str] | str | None, where: str) -> frozenset[str] | None:
    if nodes is None:
        return None
    if isinstance(nodes, str):
        nodes = [nodes]
    try:
        names = list(nodes)
    except TypeError:
        raise InvalidArgument(f"{where}: nodes={nodes!r} must be a node name, a list of node "
                              "names, or None for every node") from None
    if not names or not all(isinstance(n, str) and n for n in names):
        raise InvalidArgument(f"{where}: nodes={names!r} must name at least one node (strings); "
                              "pass None for every node")
    return frozenset(names)


@dataclass(frozen=True, slots=True, init=False)
class Middleware:
    """Hooks around node tasks, each run inside the task (its virtual clock, its seeded
    randomness, its events).

    Each hook takes the node's input state and its :class:`NodeContext` first; any may be
    ``async def``:

    * ``before(state, ctx)``: returns ``None`` (the input stands) or a new input — a state
      model, or a dict of fields to change on it.
    * ``wrap(state, ctx, call_next)``: calls the node (and the middleware inside this one)
      with ``call_next(state)``, which returns the node's result — or does not call it; what
      ``wrap`` returns is the result (a patch dict, ``None``, a ``Command``...). An async
      ``wrap`` awaits ``call_next(state)``; a sync one may wrap only sync nodes and hooks.
    * ``after(state, ctx, result)``: returns ``None`` (the result stands) or a new result.

    A hook that throws fails the run with :class:`~pytest_graphflow.errors.MiddlewareFailed`
    (the hook's exception as ``__cause__``); ``recover`` re-runs only that task. Every hook
    call is a ``custom`` event on channel ``"middleware"`` with value
    ``{"middleware": id, "hook": "before" | "wrap" | "after"}``.

    Args:
        id: names the middleware in events and errors (the stores' id rule).
        before, wrap, after: the hooks; at least one.
        nodes: the nodes it applies to (a name or a list); ``None`` (the default) for every
            node task.

    Raises:
        InvalidArgument: a bad id, no hook, a hook that is not callable, bad ``nodes``.
    """

    id: str
    before: Callable[..., Any] | None
    wrap: Callable[..., Any] | None
    after: Callable[..., Any] | None
    nodes: frozenset[str] | None

    def __init__(
        self,
        id: str,
        *,
        before: Callable[..., Any] | None = None,
        wrap: Callable[..., Any] | None = None,
        after: Callable[..., Any] | None = None,
        nodes: Iterable[str] | str | None = None,
    ) -> None:
        check_id(id, "id", "Middleware")
        where = f"Middleware({id!r})"
        hooks = {"before": before, "wrap": wrap, "after": after}
        if all(h is None for h in hooks.values()):
            raise InvalidArgument(f"{where}: give at least one hook (before=, wrap= or after=)")
        for name, hook in hooks.items():
            if hook is not None and not callable(hook):
                raise InvalidArgument(f"{where}: {name}={hook!r} is not callable; pass a "
                                      f"function {name}(state, ctx{_EXTRA[name]})")
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "before", before)
        object.__setattr__(self, "wrap", wrap)
        object.__setattr__(self, "after", after)
        object.__setattr__(self, "nodes", _nodes(nodes, where))

    def applies_to(self, node: str) -> bool:
        """Whether the middleware runs around tasks of ``node``."""
        return self.nodes is None or node in self.nodes


_EXTRA = {"before": "", "wrap": ", call_next", "after": ", result", "check": ", patch"}


@dataclass(frozen=True, slots=True)
class Allow:
    """A guardrail's answer: the node's patch stands."""


@dataclass(frozen=True, slots=True)
class Block:
    """A guardrail's answer: the node's result is refused, and its turn retracted.

    The node's patch is not applied and the checkpoint of its turn is never kept: the
    ``custom`` event on channel ``"guardrail"`` names the id it was given, and that id is in
    no history (looking it up raises ``CheckpointNotFound``). The task fails with
    :class:`~pytest_graphflow.errors.GuardrailBlocked`: it takes the node's ``on_error``
    route if it has one, else the run fails, resumable from the turn before.

    Args:
        reason: why, for the event, the error and a failure route's ``ctx.failure``.
    """

    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason:
            raise InvalidArgument(f"Block(reason={self.reason!r}): give the reason as text")


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A guardrail's answer: the node's patch is replaced by ``patch`` (checked as the node's
    own: declared writes, known keys)."""

    patch: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.patch, Mapping):
            raise InvalidArgument(f"Rewrite(patch={self.patch!r}): the patch must be a dict "
                                  "of state keys to values")


@dataclass(frozen=True, slots=True, init=False)
class Guardrail:
    """A check on a node's result, run inside the task after the node (and its middleware).

    ``check(state, ctx, patch)`` — sync or ``async def`` — gets the node's input state, its
    :class:`NodeContext` and its patch (a dict, or ``None``), and returns :class:`Allow`,
    :class:`Block` or :class:`Rewrite`. Guardrails run in order; a rewrite is what the next
    one checks. Each check is a ``custom`` event on channel ``"guardrail"`` with value
    ``{"guardrail": id, "decision": "allow" | "block" | "rewrite", ...}`` (a block adds
    ``reason``, the refused ``patch`` and the retracted ``checkpoint_id``). A check that
    throws, or returns anything else, fails the run with ``MiddlewareFailed`` naming it.

    Args:
        id: names the guardrail in events and errors (the stores' id rule).
        check: the check.
        nodes: the nodes it checks (a name or a list); ``None`` (the default) for every node.

    Raises:
        InvalidArgument: a bad id, a check that is not callable, bad ``nodes``.
    """

    id: str
    check: Callable[..., Any]
    nodes: frozenset[str] | None

    def __init__(self, id: str, check: Callable[..., Any], *,
                 nodes: Iterable[str] | str | None = None) -> None:
        check_id(id, "id", "Guardrail")
        where = f"Guardrail({id!r})"
        if not callable(check):
            raise InvalidArgument(f"{where}: check={check!r} is not callable; pass a function "
                                  "check(state, ctx, patch) returning Allow(), Block(reason) "
                                  "or Rewrite(patch)")
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "check", check)
        object.__setattr__(self, "nodes", _nodes(nodes, where))

    def applies_to(self, node: str) -> bool:
        """Whether the guardrail checks tasks of ``node``."""
        return self.nodes is None or node in self.nodes


def checked_hooks(
    middleware: Iterable[Middleware] | None, guardrails: Iterable[Guardrail] | None, where: str
) -> tuple[tuple[Middleware, ...], tuple[Guardrail, ...]]:
    """``middleware=`` and ``guardrails=`` as given to a graph or a runtime, checked: the
    right types, and ids unique among them."""
    found: list[tuple[Any, ...]] = []
    for name, value, kind in (("middleware", middleware, Middleware),
                              ("guardrails", guardrails, Guardrail)):
        if value is None:
            found.append(())
            continue
        items = tuple(value) if not isinstance(value, (str, bytes, kind)) else None
        if items is None or not all(isinstance(i, kind) for i in items):
            raise InvalidArgument(f"{where}: {name}={value!r} must be a list of "
                                  f"{kind.__name__} objects")
        found.append(items)
    ids = [h.id for items in found for h in items]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise InvalidArgument(f"{where}: the middleware and guardrail ids {twice} are used "
                              "twice; give each hook its own id (events and errors name it)")
    return found[0], found[1]


def sync_wrap_problems(chain: Iterable[Middleware], node: str, node_async: bool) -> list[str]:
    """A sync ``wrap`` cannot call anything async inside it: one problem per such wrap."""
    problems = []
    layers = list(chain)
    for i, m in enumerate(layers):
        if m.wrap is None or is_async_hook(m.wrap):
            continue
        inner = [h for mm in layers[i + 1:] for h in (mm.before, mm.wrap, mm.after)
                 if h is not None]
        if node_async or any(is_async_hook(h) for h in inner):
            problems.append(
                f"node {node!r}: the sync wrap of middleware {m.id!r} wraps async code (the "
                "node or an inner hook); make the wrap async def and await call_next(state)")
    return problems
