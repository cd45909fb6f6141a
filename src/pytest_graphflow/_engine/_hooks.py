"""Middleware and guardrails around one task: the hook point of ``_task.execute``.

A leg builds one :class:`HookTable` (the runtime's hooks, then the graph's) when any hook is
declared; ``execute`` asks it for the node's :class:`NodeHooks`, calls the node through
:meth:`NodeHooks.call` and checks its patch with :meth:`NodeHooks.guard`. Hooks run inside
the task — its context, virtual clock and seeded randomness — so a replayed task (C9) runs
none of them, and a task run again on resume runs them again, exactly like its node. Each
hook call is a ``custom`` event of the task (channel ``"middleware"`` or ``"guardrail"``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .._graph._middleware import (
    Allow,
    Block,
    Guardrail,
    Middleware,
    Rewrite,
    is_async_hook,
    sync_wrap_problems,
)
from ..errors import GraphflowError, GuardrailBlocked, InvalidArgument, MiddlewareFailed
from ._merge import normalize_patch

if TYPE_CHECKING:
    from .._graph._builder import CompiledGraph, NodeSpec
    from .._graph._node import NodeContext
    from ._outcome import Outcome

__all__ = ["HookTable", "NodeHooks", "hook_table"]

MIDDLEWARE_CHANNEL = "middleware"
GUARDRAIL_CHANNEL = "guardrail"


class HookTable:
    """The hooks of each node of one graph under one runtime (a leg holds one)."""

    __slots__ = ("_by_node",)

    def __init__(self, by_node: dict[str, NodeHooks]) -> None:
        self._by_node = by_node

    def get(self, node: str) -> NodeHooks | None:
        """The hooks around tasks of ``node``, or ``None`` when it has none."""
        return self._by_node.get(node)


def hook_table(
    graph: CompiledGraph, middleware: Sequence[Middleware], guardrails: Sequence[Guardrail]
) -> HookTable | None:
    """The hooks of ``graph``'s nodes: the runtime's (outermost, checked first), then the
    graph's; ``None`` when neither declares any (the common case costs nothing).

    Raises:
        InvalidArgument: an id both the runtime and the graph use, or a sync wrap of the
            runtime around async code.
    """
    chain = (*middleware, *graph.middleware)
    checks = (*guardrails, *graph.guardrails)
    if not chain and not checks:
        return None
    ids = [m.id for m in chain] + [g.id for g in checks]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise InvalidArgument(f"graph {graph.graph_id!r} and the runtime both use the middleware "
                              f"or guardrail ids {twice}; give each hook its own id")
    by_node: dict[str, NodeHooks] = {}
    for name, spec in graph.nodes.items():
        layers = tuple(m for m in chain if m.applies_to(name))
        guards = tuple(g for g in checks if g.applies_to(name))
        if not layers and not guards:
            continue
        problems = sync_wrap_problems(layers, name, spec.is_async)
        if problems:
            raise InvalidArgument(f"graph {graph.graph_id!r}: " + "; ".join(problems))
        by_node[name] = NodeHooks(layers, guards, spec.is_async)
    return HookTable(by_node)


class NodeHooks:
    """The middleware layers (outermost first) and guardrails around one node's tasks."""

    __slots__ = ("_sync_from", "guardrails", "is_async", "layers")

    def __init__(self, layers: tuple[Middleware, ...], guardrails: tuple[Guardrail, ...],
                 node_async: bool) -> None:
        self.layers = layers
        self.guardrails = guardrails
        # _sync_from[i]: layers i.. and the node are all sync (a sync wrap there may call in).
        sync_from = [not node_async]
        for m in reversed(layers):
            hooks = (m.before, m.wrap, m.after)
            sync_from.append(sync_from[-1] and not any(
                h is not None and is_async_hook(h) for h in hooks))
        self._sync_from = tuple(reversed(sync_from))
        self.is_async = not self._sync_from[0] or any(is_async_hook(g.check)
                                                      for g in guardrails)
        """Some hook is async: the task runs as an async task, never inline."""

    async def call(self, spec: NodeSpec, state: BaseModel, ctx: NodeContext) -> Any:
        """Call the node through the middleware layers; its raw result.

        Raises:
            MiddlewareFailed: a hook threw (its exception as ``__cause__``).
            Exception: the node's own exception, as the node raised it (retried as usual).
        """
        call = _Call(self, spec, ctx)
        try:
            return await call.layer(0, state)
        except Exception as exc:
            failed = call.failure(exc)
            if failed is exc:
                raise
            raise failed from exc

    async def guard(self, graph: CompiledGraph, spec: NodeSpec, state: BaseModel,
                    ctx: NodeContext, out: Outcome) -> bool:
        """Run the guardrails over the outcome's patch, in order; ``False`` when the task
        failed instead: a ``Block`` (``GuardrailBlocked``; the patch dropped, the turn's
        checkpoint id taken and never written), a check that threw or answered something
        else (``MiddlewareFailed``, fatal), or a rewrite the node could not have written
        (``UndeclaredWrite``, ``UnknownKey``, ``UpdateRejected``)."""
        patch = out.patch
        for g in self.guardrails:
            try:
                answer = g.check(state, ctx, patch)
                if inspect.isawaitable(answer):
                    answer = await answer
                if not isinstance(answer, (Allow, Block, Rewrite)):
                    raise TypeError(f"guardrail {g.id!r} returned {answer!r}; return Allow(), "
                                    "Block(reason) or Rewrite(patch)")
            except Exception as exc:
                failed = MiddlewareFailed(g.id, "check", ctx.node, ctx.task_id, exc)
                failed.__cause__ = exc
                return _failed(out, failed, fatal=True)
            value: dict[str, Any] = {"guardrail": g.id}
            if isinstance(answer, Block):
                cid = ctx._leg.next_checkpoint_id()  # the turn's checkpoint, never written
                value.update(decision="block", reason=answer.reason, patch=patch,
                             checkpoint_id=cid)
                ctx._custom.append((GUARDRAIL_CHANNEL, value))
                out.patch = None
                return _failed(out, GuardrailBlocked(g.id, ctx.node, ctx.task_id,
                                                     answer.reason, cid))
            if isinstance(answer, Rewrite):
                try:
                    patch = normalize_patch(graph, spec.name, dict(answer.patch))
                except GraphflowError as exc:
                    return _failed(out, exc)
                value.update(decision="rewrite", patch=patch)
            else:
                value["decision"] = "allow"
            ctx._custom.append((GUARDRAIL_CHANNEL, value))
        out.patch = patch
        return True


def _failed(out: Outcome, error: GraphflowError, *, fatal: bool = False) -> bool:
    out.kind = "error"
    out.error = error
    out.fatal = fatal
    return False


class _Call:
    """One call of a node through its middleware, remembering whose exceptions are whose."""

    __slots__ = ("ctx", "hook_errors", "hooks", "node_errors", "spec")

    def __init__(self, hooks: NodeHooks, spec: NodeSpec, ctx: NodeContext) -> None:
        self.hooks = hooks
        self.spec = spec
        self.ctx = ctx
        self.node_errors: list[BaseException] = []
        self.hook_errors: list[tuple[BaseException, str, str]] = []

    def failure(self, exc: Exception) -> Exception:
        """The node's own exception as itself; any other as the hook's ``MiddlewareFailed``."""
        if any(exc is e for e in self.node_errors):
            return exc
        found = next(((mid, hook) for e, mid, hook in self.hook_errors if e is exc), None)
        mid, hook = found if found is not None else (self.hooks.layers[0].id, "wrap")
        failed = MiddlewareFailed(mid, hook, self.ctx.node, self.ctx.task_id, exc)
        failed.__cause__ = exc
        return failed

    def _known(self, exc: BaseException) -> bool:
        return any(exc is e for e in self.node_errors) or any(
            exc is e for e, _, _ in self.hook_errors)

    def _record(self, exc: BaseException, m: Middleware, hook: str) -> None:
        if not self._known(exc):
            self.hook_errors.append((exc, m.id, hook))

    def _emit(self, m: Middleware, hook: str) -> None:
        self.ctx._custom.append((MIDDLEWARE_CHANNEL, {"middleware": m.id, "hook": hook}))

    def _node_sync(self, state: BaseModel) -> Any:
        spec = self.spec
        try:
            return spec.fn(state, self.ctx) if spec.arity == 2 else spec.fn(state)
        except Exception as exc:
            self.node_errors.append(exc)
            raise

    async def _node(self, state: BaseModel) -> Any:
        spec = self.spec
        try:
            result = spec.fn(state, self.ctx) if spec.arity == 2 else spec.fn(state)
            if spec.is_async or inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            self.node_errors.append(exc)
            raise
        return result

    def _input(self, state: BaseModel, new: Any, m: Middleware) -> BaseModel:
        if new is None:
            return state
        if isinstance(new, BaseModel):
            return new
        if isinstance(new, dict):
            unknown = sorted(str(k) for k in new if k not in type(state).model_fields)
            if unknown:
                raise TypeError(f"middleware {m.id!r}: before returned fields {unknown} that "
                                f"the state {type(state).__name__} does not define; change "
                                "only its fields")
            return state.model_copy(update=new)
        raise TypeError(f"middleware {m.id!r}: before returned {new!r}; return None, a state "
                        "model or a dict of fields to change")

    def layer_sync(self, i: int, state: BaseModel) -> Any:
        """Layers ``i``.. and the node, all sync (what a sync wrap's ``call_next`` runs)."""
        layers = self.hooks.layers
        if i == len(layers):
            return self._node_sync(state)
        m = layers[i]
        if m.before is not None:
            self._emit(m, "before")
            try:
                state = self._input(state, m.before(state, self.ctx), m)
            except Exception as exc:
                self._record(exc, m, "before")
                raise
        if m.wrap is not None:
            self._emit(m, "wrap")
            try:
                result = m.wrap(state, self.ctx, lambda s=state: self.layer_sync(i + 1, s))
            except Exception as exc:
                self._record(exc, m, "wrap")
                raise
        else:
            result = self.layer_sync(i + 1, state)
        if m.after is not None:
            self._emit(m, "after")
            try:
                new = m.after(state, self.ctx, result)
            except Exception as exc:
                self._record(exc, m, "after")
                raise
            if new is not None:
                result = new
        return result

    async def layer(self, i: int, state: BaseModel) -> Any:
        """Layers ``i``.. and the node."""
        if self.hooks._sync_from[i]:
            return self.layer_sync(i, state)
        layers = self.hooks.layers
        if i == len(layers):
            return await self._node(state)
        m = layers[i]
        if m.before is not None:
            self._emit(m, "before")
            try:
                state = self._input(state, await _maybe(m.before(state, self.ctx)), m)
            except Exception as exc:
                self._record(exc, m, "before")
                raise
        if m.wrap is not None:
            self._emit(m, "wrap")
            call_next: Callable[..., Awaitable[Any]] = \
                lambda s=state: self.layer(i + 1, s)  # noqa: E731
            try:
                result = await _maybe(m.wrap(state, self.ctx, call_next))
            except Exception as exc:
                self._record(exc, m, "wrap")
                raise
        else:
            result = await self.layer(i + 1, state)
        if m.after is not None:
            self._emit(m, "after")
            try:
                new = await _maybe(m.after(state, self.ctx, result))
            except Exception as exc:
                self._record(exc, m, "after")
                raise
            if new is not None:
                result = new
        return result


async def _maybe(value: Any) -> Any:
    """``value``, awaited if a hook gave an awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value
