"""Running a :class:`~.._graph._subgraph.Subgraph` node: a child run namespaced under the
parent task, whose interrupts surface in the parent with a ``"<task_id>/"`` key prefix."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .._graph._builder import Command
from .._graph._node import NodeContext, Resume, _InterruptSignal
from .._records._events import Interrupt
from .._records._ids import derived_hex
from ..errors import GraphExecutionError
from ._task import ParentCommand

if TYPE_CHECKING:
    from .._graph._subgraph import Subgraph
    from ._run_state import RunState

__all__ = ["ParentCommand", "run_subgraph"]


class _ChildIds:
    """Run ids of a parent task's child runs, derived from the parent run and task."""

    def __init__(self, run_id: str, task_id: str) -> None:
        self._parts = (run_id, task_id)
        self._n = 0

    def run_hex(self) -> str:
        self._n += 1
        return derived_hex("subgraph", *self._parts, self._n)


def _prefixed(pending: Interrupt, ctx: NodeContext) -> Interrupt:
    return Interrupt(key=f"{ctx.task_id}/{pending.key}", id=pending.id, node=ctx.node,
                     task_id=ctx.task_id, payload=pending.payload)


async def _forwarded(stream: Any, ctx: NodeContext) -> Any:
    """Drain a child leg's stream, forwarding each event to the parent as a ``custom`` event
    on channel ``"subgraph"``: ``{"path": [subgraph node, child node...], "event": wire}``
    (a nested subgraph's forwarded events get the outer node prepended to their path)."""
    async for event in stream:
        wire = event.model_dump(mode="json")
        if wire["type"] == "custom" and wire.get("channel") == "subgraph":
            inner = wire["value"]
            ctx.emit({"path": [ctx.node, *inner["path"]], "event": inner["event"]},
                     channel="subgraph")
            continue
        path = [ctx.node] if wire["node"] is None else [ctx.node, wire["node"]]
        ctx.emit({"path": path, "event": wire}, channel="subgraph")
    return stream.result()


async def run_subgraph(
    run: RunState, sub: Subgraph, state: BaseModel, ctx: NodeContext, *, runtime: Any
) -> Any:
    """Run (or resume) the child of ``sub`` for the task of ``ctx``; return the node's result.

    ``runtime`` is the ``GraphRuntime`` class (passed in: this module cannot import it).
    """
    GraphRuntime = runtime

    prefix = f"{ctx.task_id}/"
    thread = f"{run.thread_id}/{ctx.task_id}"
    hook = run.on_interrupt
    child_hook = None if hook is None else (lambda pending: hook(_prefixed(pending, ctx)))
    rt = GraphRuntime(store=run.store, clock=run.clock, seed=run.seed, tenant_id=run.tenant_id,
                      max_supersteps=run.max_supersteps, on_interrupt=child_hook)
    rt._ids = _ChildIds(run.run_id, ctx.task_id)
    found = await run.store.list(thread_id=thread)
    last = found[-1] if found else None
    if last is None:
        result = await _forwarded(rt.stream(
            sub.graph, sub.child_input(state, run.graph.keys), thread_id=thread), ctx)
        data, status, error, pending = result.data, result.status, result.error, \
            list(result.interrupts.values())
    elif last.status == "completed":  # the task runs again: the child already finished
        data, status, error, pending = last.state, "completed", None, []
    else:
        answers = {k[len(prefix):]: v for k, v in run.answers.items() if k.startswith(prefix)}
        keys = {i.key for i in last.interrupts}
        mine = {k: v for k, v in answers.items() if k in keys}
        if last.status == "interrupted" and last.interrupts and not mine:
            data, status, error, pending = last.state, "interrupted", None, last.interrupts
        else:
            resume = Resume(answers=mine, partial=True) if mine else None
            result = await _forwarded(
                rt.resume_stream(last.run_id, resume, graph=sub.graph), ctx)
            data, status, error, pending = result.data, result.status, result.error, \
                list(result.interrupts.values())
    if status == "interrupted" and pending:
        # One pending interrupt surfaces at a time; answering it resumes the child, which
        # pauses again with the next one.
        raise _InterruptSignal(_prefixed(pending[0], ctx))
    if status == "interrupted":  # paused for a breakpoint of the child: continue it
        raise GraphExecutionError(f"the child graph {sub.graph.graph_id!r} of node {ctx.node!r} "
                                  "paused for a breakpoint; breakpoints of a child graph are "
                                  "not supported, set them on the parent")
    if status != "completed":
        cause = getattr(error, "__cause__", None) if error is not None else None
        if isinstance(error, ParentCommand) or isinstance(cause, ParentCommand):
            command = error.command if isinstance(error, ParentCommand) else cause.command  # type: ignore[union-attr]
            return Command(update=command.update, goto=command.goto)
        raise error if error is not None else GraphExecutionError(
            f"the child graph {sub.graph.graph_id!r} of node {ctx.node!r} ended {status}")
    final = sub.graph.codec.model_of(data)
    return sub.patch(final, run.graph.keys)
