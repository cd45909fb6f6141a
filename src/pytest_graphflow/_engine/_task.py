"""Running one task: the node call, its retries, its result and its edges."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import replace as dataclass_replace
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from .._graph._builder import END, Command, CompiledGraph, Expand, NodeSpec
from .._graph._deadlines import TimeoutSignal
from .._graph._node import CURRENT_TASK, EdgeContext, NodeContext, Visited, _InterruptSignal
from .._records._checkpoint import TaskRecord
from .._records._events import Breakpoint
from .._records._json import NotJSONError, to_json_value
from .._time._clock import Clock
from .._time._entropy import ENTROPY
from .._time._wallclock import NODE_CLOCK
from ..errors import (
    DeadlineExpired,
    GraphExecutionError,
    GraphflowError,
    MiddlewareFailed,
    UnknownKey,
    UnknownRoute,
    UpdateRejected,
)
from ._hooks import NodeHooks
from ._merge import merge_patches, normalize_patch
from ._outcome import Outcome

__all__ = ["CHILD_THREAD", "ChildPaused", "ChildRaised", "Outcome", "ParentCommand",
           "decide_edges", "execute", "route_expand"]


_PLAIN_RESULTS = (dict, type(None), Command, Expand)

CHILD_THREAD: ContextVar[str | None] = ContextVar("graphflow_child_thread", default=None)
"""The thread of the child run a subgraph node is running (set around it): a node of that run
may return ``Command(graph=Command.PARENT, ...)``."""


async def execute(
    graph: CompiledGraph,
    spec: NodeSpec,
    record: TaskRecord,
    make_input: Callable[[], BaseModel],
    ctx: NodeContext,
    clock: Clock,
    sleep: Callable[[float], Awaitable[None]],
    state: dict[str, Any],
    hooks: NodeHooks | None = None,
) -> Outcome:
    """Run the node of ``record`` (with retries) through its ``hooks`` (middleware and
    guardrails, see ``_hooks``), then decide its edges."""
    out = Outcome(record, spec)
    out.custom = ctx._custom
    out.artifacts = ctx._artifacts
    out.started_at = clock.now()
    fn = spec.fn
    attempt = 1
    model = make_input()
    while True:
        ctx.attempt = attempt
        attempt_start = clock.now() if attempt > 1 else out.started_at
        try:
            if hooks is not None:
                result = await hooks.call(spec, model, ctx)
            else:
                result = fn(model, ctx) if spec.arity == 2 else fn(model)
                if spec.is_async or (type(result) not in _PLAIN_RESULTS
                                     and inspect.isawaitable(result)):
                    result = await result
            if isinstance(result, Exception):
                # A node that returns a failure failed (seed 004: "A node returned a
                # failure or threw"): it is retried and reported as if it had raised it.
                raise result
            break
        except BaseException as exc:
            if not failed(graph, spec, out, ctx, exc, attempt, clock, model):
                raise
            if out.kind != "retry":
                # The error's traceback keeps this frame: without ``out`` (which keeps the
                # error), so the two make no reference cycle left to the collector.
                box = [out]
                del out
                return box.pop()
            out.kind = "cancelled"
            out.failed_attempts = [*out.failed_attempts, (attempt_start, clock.now(), exc)]
            retry = spec.retry
            assert retry is not None
            await sleep(retry.delay(attempt))
            attempt += 1
            ctx._used = None  # a new attempt runs the node from the top
            ctx._tool = None  # its tool calls count from 0 again (recorded ones replay)
            model = make_input()
    if out.failed_attempts:  # their errors' tracebacks keep this frame: not ``out`` (above)
        box = [out]
        del out
        return await settle(graph, spec, box.pop(), result, ctx, clock, state, hooks, model,
                            attempt)
    return await settle(graph, spec, out, result, ctx, clock, state, hooks, model, attempt)


async def in_task_scope(ctx: NodeContext, clock: Clock, wall_clock: bool, owns_entropy: bool,
                        rest: Awaitable[Outcome]) -> Outcome:
    """Await ``rest`` (the body of ``ctx``'s task) with the task's context set: the current
    task, the wall clock read from ``clock`` (``wall_clock``), the node's seeded entropy
    (``owns_entropy``). The lean step's hot call sets the same three inline."""
    t1 = CURRENT_TASK.set(ctx)
    t2 = NODE_CLOCK.set(clock) if wall_clock else None  # type: ignore[arg-type]
    t3 = ENTROPY.set(ctx) if owns_entropy else None
    try:
        return await rest
    finally:
        if t3 is not None:
            ENTROPY.reset(t3)
        if t2 is not None:
            NODE_CLOCK.reset(t2)
        CURRENT_TASK.reset(t1)

async def finish_inline(
    graph: CompiledGraph,
    spec: NodeSpec,
    out: Outcome,
    result: Any,
    ctx: NodeContext,
    clock: Clock,
    state: dict[str, Any],
    model: BaseModel,
) -> Outcome:
    """What :func:`execute` does with a sync node's first call (no hooks, no retry policy)
    once it returned ``result``: await an awaitable, fail on a returned exception, and
    settle the rest (the lean step's way back to the general path)."""
    try:
        if type(result) not in _PLAIN_RESULTS and inspect.isawaitable(result):
            result = await result
        if isinstance(result, Exception):
            raise result
    except BaseException as exc:
        if not failed(graph, spec, out, ctx, exc, 1, clock, model):
            raise
        assert out.kind != "retry"  # an inline node has no retry policy
        return out
    return await settle(graph, spec, out, result, ctx, clock, state, None, model, 1)


def failed(
    graph: CompiledGraph,
    spec: NodeSpec,
    out: Outcome,
    ctx: NodeContext,
    exc: BaseException,
    attempt: int,
    clock: Clock,
    model: Any,
) -> bool:
    """Fill in ``out`` for an exception the node's attempt ``attempt`` raised: ``False`` for
    one that is not the task's to report (it propagates); ``out.kind == "retry"`` when the
    node's retry policy takes it (the caller sleeps and runs it again)."""
    if isinstance(exc, _InterruptSignal):  # first, the most common (no kind below is one)
        if ctx._tool is not None and ctx._tool.failure is not None:
            _tool_failed(out, ctx, attempt, clock)
            return True
        if exc.interrupt.deadline is not None \
                and CHILD_THREAD.get() == ctx._leg.thread_id:
            out.kind = "error"  # a child run's question is fired as the parent's
            out.error = GraphExecutionError(
                f"node {spec.name!r} of a subgraph asked {exc.interrupt.id!r} with a "
                "deadline: deadlines are kept and fired for a top-level run only; ask "
                "with deadline= in a node of the parent graph")
        else:
            out.kind = "interrupt"
            out.interrupt = exc.interrupt
            out.more = exc.more
    elif isinstance(exc, ChildRaised):
        # Not a failure of the node: the run ends with that exception (C6/C7), after
        # the batch ran to the end, the first in declared order (see _after_batch).
        out.kind = "edge_error"
        out.error = exc.error
    elif isinstance(exc, ChildPaused):
        out.kind = "interrupt"  # no question: the run pauses as for a breakpoint
        out.breakpoint = exc.breakpoint
    elif isinstance(exc, TimeoutSignal):
        expire(graph, out, exc.key, ctx.run_id, attempt, clock.now())
        return True
    elif isinstance(exc, MiddlewareFailed):  # the hook's failure, not the node's: no retry
        if ctx._tool is not None and ctx._tool.failure is not None:
            _tool_failed(out, ctx, attempt, clock)
            return True
        out.kind = "error"
        out.error = exc
        out.fatal = True
    elif isinstance(exc, Exception):
        if ctx._tool is not None and ctx._tool.failure is not None:
            _tool_failed(out, ctx, attempt, clock)
            return True
        unknown = _unknown_read(graph, spec, model, exc)
        if unknown is not None:
            out.kind = "error"
            out.error = unknown
        else:
            retry = spec.retry
            if retry is not None and attempt < retry.attempts \
                    and isinstance(exc, retry.retry_on):
                out.kind = "retry"
                return True
            out.kind = "error"
            out.error = exc
            out.user_error = True
    else:
        return False
    out.attempt = attempt
    out.finished_at = clock.now()
    return True


async def settle(
    graph: CompiledGraph,
    spec: NodeSpec,
    out: Outcome,
    result: Any,
    ctx: NodeContext,
    clock: Clock,
    state: dict[str, Any],
    hooks: NodeHooks | None,
    model: BaseModel,
    attempt: int,
) -> Outcome:
    """The rest of a task whose node returned ``result``: its tools' updates, the patch
    checked, its guardrails, then its edges."""
    tools = ctx._tool
    if tools is not None:
        if tools.failure is not None:  # the node caught the ToolFailed: the task fails
            return _tool_failed(out, ctx, attempt, clock)
        if tools.updates:
            result = with_tool_updates(graph, spec.name, tools.updates, result)
    out.attempt = attempt
    out.finished_at = clock.now()
    try:
        if type(result) is dict:  # the common result: a patch
            out.patch = normalize_patch(graph, spec.name, result)
        else:
            _take_result(graph, spec, result, out)
    except ParentCommand as exc:
        leg = ctx._leg
        if CHILD_THREAD.get() != leg.thread_id:
            out.kind = "error"  # a top-level graph has no parent to route
            out.error = exc
            return out
        # The child run ends here, completed; the parent's subgraph node takes the command.
        leg.hand_to_parent(exc.command)
        out.patch = None
        out.goto = []
        out.targets = []
        out.kind = "done"
        return out
    except GraphflowError as exc:
        out.kind = "error"
        out.error = exc
        return out
    if hooks is not None and hooks.guardrails \
            and not await hooks.guard(graph, spec, model, ctx, out):
        return out  # blocked, or a check failed
    out.kind = "done"
    if out.goto is None and out.expand is None:
        if spec.name in graph.branches:
            await decide_edges(graph, spec, out, state, ctx._visited, ctx.step)
        else:  # static edges only: what decide_edges does, without a coroutine
            out.targets = list(dict.fromkeys(graph.edges.get(spec.name, ())))
    return out


def expire(graph: CompiledGraph, out: Outcome, key: str, run_id: str, attempt: int,
           now: datetime) -> None:
    """The task asked a question whose deadline passed (``interrupt_expired``): it goes to
    the graph's ``on_timeout`` node (done, no patch, as a ``Command(goto=...)``), or, with no
    route, fails the run with ``DeadlineExpired`` (a failure no ``on_error`` takes)."""
    out.attempt = attempt
    out.finished_at = now
    route = graph.on_timeout
    if isinstance(route, str):
        out.kind = "done"
        out.patch = None
        out.goto = [route]
        out.targets = [route]
        return
    out.kind = "error"
    out.error = DeadlineExpired(run_id, key, unrouted=True)
    out.fatal = True
def _tool_failed(out: Outcome, ctx: NodeContext, attempt: int, clock: Clock) -> Outcome:
    """The task failed with its ``ToolFailed`` (not retried; its ``on_error`` route takes
    it), whatever the node made of it."""
    out.kind = "error"
    out.error = ctx._tool.failure
    out.attempt = attempt
    out.finished_at = clock.now()
    return out


def with_tool_updates(graph: CompiledGraph, node: str, updates: list[dict[str, Any]],
                      result: Any) -> Any:
    """The node's result with its tools' updates merged in before its own update: a key
    with a reducer folds them in order, any other key takes the last write."""
    merged: dict[str, Any] = {}
    for update in updates:
        _fold(graph, node, merged, update)
    if result is None or type(result) is dict:
        _fold(graph, node, merged, result or {})
        return merged
    if isinstance(result, (Command, Expand)):
        own = dict(result.update) if result.update else {}
        _fold(graph, node, merged, own)
        return dataclass_replace(result, update=merged)
    if isinstance(result, (list, tuple)) and result \
            and all(isinstance(r, Command) for r in result):
        return [Command(update=merged), *result]
    return result  # not a result a node may give: refused as it is


def _fold(graph: CompiledGraph, node: str, into: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        reducer = graph.reducers.get(key)
        if key in into and reducer is not None:
            try:
                into[key] = to_json_value(reducer.fn(into[key], value))
            except Exception as exc:
                raise UpdateRejected(node, key, f"its reducer raised {type(exc).__name__} "
                                                f"folding a tool's update: {exc}") from exc
        else:
            into[key] = value


def _unknown_read(
    graph: CompiledGraph, spec: NodeSpec, model: Any, exc: Exception
) -> UnknownKey | None:
    """An ``UnknownKey`` when ``exc`` is the node reading a key its state does not define.

    That is the graph's mistake, not a failure worth retrying (seed 004: "A key was read or
    written that the graph did not register").
    """
    if not isinstance(exc, AttributeError) or exc.obj is not model or exc.name is None \
            or exc.name in graph.keys:
        return None
    unknown = UnknownKey(spec.name, exc.name, sorted(graph.keys), read=True)
    unknown.__cause__ = exc
    return unknown


class ParentCommand(GraphExecutionError):
    """A node of a subgraph returned ``Command(graph=Command.PARENT, ...)``: the child run
    ends here and the parent's subgraph node takes the command (internal signal; in a graph
    that does not run as a subgraph it fails the run)."""

    def __init__(self, node: str, command: Command) -> None:
        self.node = node
        self.command = command
        super().__init__(
            f"node {node!r} returned Command(graph=Command.PARENT, goto={command.goto!r}): "
            "control goes to the parent graph's subgraph node (a graph that does not run as "
            "a subgraph has no parent to route)"
        )


class ChildRaised(Exception):
    """A subgraph's child run raised instead of ending: a save its store refused (C6) or an
    edge function that threw (C7). The parent's run ends with ``error`` itself, as it would
    for its own save or edge (internal signal; never retried, never wrapped)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class ChildPaused(BaseException):
    """A subgraph's child run paused for a breakpoint: the parent pauses too, with nothing to
    answer, and a resume without a ``Resume`` continues the child (internal signal)."""

    def __init__(self, breakpoint: Breakpoint) -> None:
        super().__init__(f"{breakpoint.when}: {breakpoint.nodes}")
        self.breakpoint = breakpoint


def _commands(graph: CompiledGraph, node: str, commands: Sequence[Command]) -> Command:
    """Several ``Command``s a node returned, as one: updates in order, targets unioned.

    A key without a reducer written by two of them is rejected (which should win?); a key
    with one folds the updates with it in order (exact for an associative reducer such as
    ``operator.add``).
    """
    update: dict[str, Any] = {}
    goto: list[str] = []
    any_goto = False
    for command in commands:
        patch = normalize_patch(graph, node, command.update) or {}
        for key, value in patch.items():
            if key not in update:
                update[key] = value
                continue
            reducer = graph.reducers.get(key)
            if reducer is None:
                raise UpdateRejected(node, key, "two of the node's Commands wrote it and it has "
                                                "no reducer; write it from one Command")
            try:
                update[key] = to_json_value(reducer.fn(update[key], value))
            except Exception as exc:
                raise UpdateRejected(node, key, f"its reducer raised {type(exc).__name__}: "
                                                f"{exc}") from exc
        if command.goto is not None:
            any_goto = True
            goto.extend([command.goto] if isinstance(command.goto, str) else command.goto)
    return Command(update=update, goto=list(dict.fromkeys(goto)) if any_goto else None)


def _take_result(graph: CompiledGraph, spec: NodeSpec, result: Any, out: Outcome) -> None:
    node = spec.name
    if isinstance(result, (list, tuple)) and result \
            and all(isinstance(r, Command) for r in result):
        result = _commands(graph, node, result)
    if isinstance(result, Command) and result.graph is not None:
        if result.graph != Command.PARENT:
            raise UnknownRoute(node, f"graph={result.graph!r}", ["graph=Command.PARENT"],
                               listed="the graph a node may name",
                               fix="Use graph=Command.PARENT (from a subgraph's node) or "
                                   "leave graph unset.")
        raise ParentCommand(node, result)
    if isinstance(result, Command):
        out.patch = normalize_patch(graph, node, result.update)
        if result.goto is not None:
            goto = [result.goto] if isinstance(result.goto, str) else list(result.goto)
            allowed = graph.allowed_targets(node)
            for target in goto:
                if target != END and target not in allowed:
                    raise UnknownRoute(node, target, allowed)
            out.goto = goto
            out.targets = list(dict.fromkeys(goto))
    elif isinstance(result, Expand):
        out.patch = normalize_patch(graph, node, result.update)
        if result.node not in graph.nodes or result.node not in spec.destinations:
            raise UnknownRoute(node, result.node, spec.destinations)
        if isinstance(result.items, (str, bytes)) or not isinstance(result.items, Sequence):
            raise UpdateRejected(node, "<expand>", "Expand items must be a list")
        try:
            items = [to_json_value(i) for i in result.items]
        except NotJSONError as exc:
            raise UpdateRejected(node, "<expand>", f"an Expand item has no JSON form: {exc}") \
                from None
        out.expand = {"node": result.node, "items": items}
    else:
        out.patch = normalize_patch(graph, node, result)


async def decide_edges(
    graph: CompiledGraph,
    spec: NodeSpec,
    out: Outcome,
    state: dict[str, Any],
    visited: Visited,
    step: int,
) -> None:
    """Decide the static and conditional targets of a completed (or replayed) task.

    A replayed task that picked its target itself keeps its recorded ``goto``/``expand``.
    An edge function that raises makes the outcome an ``edge_error`` (C7).
    """
    if out.goto is not None:
        out.targets = list(dict.fromkeys(out.goto))
        return
    if out.expand is not None and not out.route_expand:
        return
    out.expand = None  # a route's expansion is decided again
    node = spec.name
    targets = list(graph.edges.get(node, ()))
    branches = graph.branches.get(node)
    if branches:
        try:
            merged = merge_patches(graph, state, [(node, out.patch)], parallel=False)
            merged, view = graph.codec.validate(merged, [(node, out.patch)])
            out.merged = merged
            if view is None:
                view = graph.codec.model_of(merged)
        except GraphflowError as exc:
            out.kind = "error"
            out.error = exc
            return
        ectx = EdgeContext(node, visited, step)
        token = CURRENT_TASK.set(None)  # edge functions run outside the node (no interrupt)
        try:
            for branch in branches:
                try:
                    picked = branch.route(view, ectx) if branch.arity == 2 else branch.route(view)
                    if inspect.isawaitable(picked):
                        picked = await picked
                except Exception as exc:
                    out.kind = "edge_error"
                    out.error = exc
                    return
                if not _pick(branch, node, picked, out, targets):
                    return
        finally:
            CURRENT_TASK.reset(token)
    out.targets = list(dict.fromkeys(targets))


def route_expand(node: str, expand: Expand, allowed: Sequence[str]) -> dict[str, Any]:
    """An ``Expand`` an edge function returned, checked: its node must be one the route may
    pick, and it carries no update (edge functions do not write state)."""
    if expand.node not in allowed:
        raise UnknownRoute.from_branch(node, expand.node, list(allowed))
    if expand.update:
        raise UpdateRejected(node, "<expand>", "an edge function's Expand cannot carry an "
                                               "update; edge functions do not write state")
    if isinstance(expand.items, (str, bytes)) or not isinstance(expand.items, Sequence):
        raise UpdateRejected(node, "<expand>", "Expand items must be a list")
    try:
        items = [to_json_value(i) for i in expand.items]
    except NotJSONError as exc:
        raise UpdateRejected(node, "<expand>", f"an Expand item has no JSON form: {exc}") \
            from None
    return {"node": expand.node, "items": items}


def _pick(branch: Any, node: str, picked: Any, out: Outcome, targets: list[str]) -> bool:
    """Resolve what a branch function returned into targets; ``False`` on an unknown route."""
    picks = list(picked) if isinstance(picked, (list, tuple)) else [picked]
    for key in picks:
        if isinstance(key, Expand):
            # Seed 000's expansions, from an edge function: one task per item next batch.
            try:
                if out.expand is not None:
                    raise UpdateRejected(node, "<expand>", "a route may return one Expand")
                out.expand = route_expand(node, key, branch.targets)
            except GraphflowError as exc:
                out.kind = "error"
                out.error = exc
                return False
            out.route_expand = True
            continue
        if branch.mapping is not None:
            if key not in branch.mapping:
                out.kind = "error"
                out.error = UnknownRoute.from_branch(node, key, [str(k) for k in branch.mapping],
                                                     key=True)
                return False
            target = branch.mapping[key]
        else:
            target = key
            if target not in branch.targets and target != END:
                out.kind = "error"
                out.error = UnknownRoute.from_branch(node, target, branch.targets)
                return False
        targets.append(target)
    return True

