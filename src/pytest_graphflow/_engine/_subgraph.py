"""Running a :class:`~.._graph._subgraph.Subgraph` node: a child run namespaced under the
parent task, whose interrupts surface in the parent with a ``"<task_id>/"`` key prefix.

The child's thread is recorded in the parent's checkpoints while the task is pending, so a
resume continues the same child; a leg that travelled back in the parent's history gives the
task a fresh child thread instead. A child's breakpoint pauses the parent
(:class:`~._task.ChildPaused`); a child stream that raises ends the parent's run with that
exception (:class:`~._task.ChildRaised`, C6/C7).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from .._graph._builder import Command, CompiledGraph
from .._graph._node import NodeContext, Resume, _InterruptSignal
from .._records._events import Breakpoint, Interrupt
from .._records._ids import derived_hex
from ..errors import GraphExecutionError
from ._host import RunIds
from ._run_state import STEPPING, RunState
from ._stream import RunStream
from ._task import CHILD_THREAD, ChildPaused, ChildRaised, ParentCommand

if TYPE_CHECKING:
    from .._graph._subgraph import Subgraph

__all__ = ["ChildRuntime", "ParentCommand", "run_subgraph"]


class ChildRuntime(Protocol):
    """What a subgraph node runs its child on (a ``GraphRuntime``)."""

    def stream(self, graph: CompiledGraph, input: Mapping[str, Any] | BaseModel | None = ...,
               *, thread_id: str | None = ...) -> RunStream:
        """Start a child run and stream its events."""
        ...

    def resume_stream(self, run_or_checkpoint_id: str, resume: Resume | None = ..., *,
                      graph: CompiledGraph | None = ...) -> RunStream:
        """Resume a child run and stream its events."""
        ...


ChildRuntimes = Callable[[RunState, Callable[[Interrupt], object] | None, RunIds], ChildRuntime]
"""Makes the runtime of a child run (``_runtime.child_runtime``): from the parent leg, the
child's interrupt hook and its run ids."""


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


async def _forwarded(stream: RunStream, ctx: NodeContext) -> Any:
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
    run: RunState, sub: Subgraph, state: BaseModel, ctx: NodeContext, *,
    runtime: ChildRuntimes,
) -> object:
    """Run (or resume) the child of ``sub`` for the task of ``ctx``; return the node's result.

    ``runtime`` makes the child's runtime (passed in: this module cannot import it).
    The child's run ends one of four ways, and the subgraph node with it: completed (the
    node's patch, or the child's ``Command(graph=PARENT)``); paused at interrupts (every one
    surfaces, prefixed); paused for a breakpoint (the parent pauses, nothing to answer);
    failed (the node fails). A child whose stream raised — a save the store refused (C6), an
    edge function that threw (C7) — ends the parent's run with that same exception.
    """
    record = ctx._record
    # An expansion task's item is its child's input (as LangGraph's Send to a subgraph);
    # checked here, so an item that cannot be one fails the node.
    item = sub.item_input(ctx.node, record.item) if record.has_item else None
    token = None
    stepping = STEPPING.set(False)  # the child runs its whole course within the step
    try:
        thread = await _child_thread(run, ctx.task_id)
        token = CHILD_THREAD.set(thread)
        outcome = await _drive(run, sub, state, ctx, thread, runtime, item)
    except Exception as exc:
        raise ChildRaised(exc) from None
    finally:
        if token is not None:
            CHILD_THREAD.reset(token)
        STEPPING.reset(stepping)
    data, status, error, pending, paused, command = outcome
    if status == "interrupted" and pending:
        # Every pending child interrupt surfaces at once; answer them together or some of
        # them (Resume(partial=True)): the child resumes with the answers it got.
        first, *more = (_prefixed(p, ctx) for p in pending)
        raise _InterruptSignal(first, more)
    if status == "interrupted":  # the child paused for a breakpoint: so does the parent
        raise ChildPaused(Breakpoint(
            when=paused.when if paused is not None else "after",
            nodes=[f"{ctx.node}/{n}" for n in (paused.nodes if paused is not None else [])]))
    if status != "completed":
        raise error if error is not None else GraphExecutionError(
            f"the child graph {sub.graph.graph_id!r} of node {ctx.node!r} ended {status}")
    if command is not None:  # a child node returned Command(graph=Command.PARENT, ...)
        return Command(update=command["update"], goto=command["goto"])
    final = sub.graph.codec.model_of(data)
    return sub.patch(final, run.spec.graph.keys)


async def _child_thread(run: RunState, task_id: str) -> str:
    """The child thread of a subgraph task: the one a checkpoint of this task recorded;
    else ``"<parent thread>/<task_id>"`` — unless this leg travelled back in time (resumed
    from a checkpoint that is not its run's latest) and that thread holds a child run of the
    abandoned timeline: then a fresh one, ``"<parent thread>/<task_id>~<n>"``. A recorded
    thread under another parent thread (the parent checkpoint is a fork) is forked along,
    so the fork's child never advances the original's. A child copied that way, or found to
    have moved on since the parent's checkpoint it is resumed from, continues from the
    child checkpoint it was paused at then (the parent checkpoint records it)."""
    thread = run.child_threads.get(task_id)
    source: str | None = None
    spec = run.spec
    if thread and thread.startswith(f"{run.thread_id}/"):
        if not spec.time_travel:
            return thread
        source = await _paused_at(run, task_id, thread)
        if source is None:  # the child has not moved since (or its checkpoint is gone)
            return thread
    elif thread:
        source = await _paused_at(run, task_id, thread, or_latest=True)
    base = f"{run.thread_id}/{task_id}"
    fresh = thread is not None or spec.time_travel
    store: Any = spec.store
    mine, n = base, 1
    while fresh and await store.list(thread_id=mine):
        n += 1
        mine = f"{base}~{n}"
    if source is not None:  # the child as it stood, copied under this thread
        await store.fork(source, thread_id=mine)
    run.child_threads[task_id] = mine
    return mine


async def _paused_at(run: RunState, task_id: str, thread: str, *, or_latest: bool = False
                     ) -> str | None:
    """The child checkpoint of ``task_id`` the parent's checkpoint recorded, when the child
    on ``thread`` has moved past it (and it is still stored); else, with ``or_latest``, the
    child's latest checkpoint; else ``None``."""
    found = await run.spec.store.list(thread_id=thread)
    latest = found[-1].id if found else None
    at = run.child_checkpoints.get(task_id)
    if at is not None and at != latest and any(cp.id == at for cp in found):
        return at
    return latest if or_latest else None


async def _drive(run: RunState, sub: Subgraph, state: BaseModel, ctx: NodeContext,
                 thread: str, runtime: ChildRuntimes, item: dict[str, Any] | None
                 ) -> tuple[Any, ...]:
    """Start, resume or read back the child run on ``thread``: what it came to. A fresh
    child starts from ``item`` (an expansion task's) or else from the parent's state."""
    prefix = f"{ctx.task_id}/"
    hook = run.on_interrupt
    child_hook = None if hook is None else (lambda pending: hook(_prefixed(pending, ctx)))
    rt = runtime(run, child_hook, _ChildIds(run.run_id, ctx.task_id))
    store = run.spec.store
    found = await store.list(thread_id=thread)
    last = found[-1] if found else None
    if last is None:
        child_input = item if item is not None else sub.child_input(state, run.spec.graph.keys)
        result = await _forwarded(rt.stream(sub.graph, child_input, thread_id=thread), ctx)
    elif last.status == "completed":  # the task runs again: the child already finished
        return last.state, "completed", None, [], None, last.metadata.get("parent_command")
    else:
        answers = {k[len(prefix):]: v for k, v in run.answers.items() if k.startswith(prefix)}
        keys = {i.key for i in last.interrupts}
        mine = {k: v for k, v in answers.items() if k in keys}
        if last.status == "interrupted" and last.interrupts and not mine:
            run.child_checkpoints[ctx.task_id] = last.id
            return last.state, "interrupted", None, list(last.interrupts), None, None
        resume = Resume(answers=mine, partial=True) if mine else None
        result = await _forwarded(rt.resume_stream(last.run_id, resume, graph=sub.graph), ctx)
    if result.checkpoint_id is not None:
        run.child_checkpoints[ctx.task_id] = result.checkpoint_id
    command = None
    if result.status == "completed" and result.checkpoint_id is not None:
        final = await store.get(result.checkpoint_id)
        command = None if final is None else final.metadata.get("parent_command")
    return (result.data, result.status, result.error, list(result.interrupts.values()),
            result.breakpoint, command)
