"""Wrapping a compiled graph's node functions: call logs and Hypothesis-drawn start orders.

Both wrappers return a *copy* of the graph with the same structure and revision, so a
checkpoint written by one resumes with the other. The wrapped functions take ``(state, ctx)``
whatever the original took, and keep its sync/async nature where they can (the schedule gate
must be ``async``).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..._engine._task import ChildPaused
from ..._graph._builder import CompiledGraph, NodeSpec
from ..._graph._node import NodeContext, _InterruptSignal

__all__ = ["CallLog", "NodeCall", "Schedule", "record_calls", "task_number"]


def task_number(task_id: str) -> int:
    """The counter at the end of a task id (``task-<run>-7`` -> 7): declared order in a batch."""
    tail = task_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _replace_nodes(
    graph: CompiledGraph, wrap: Callable[[NodeSpec], tuple[Callable[..., Any], bool]]
) -> CompiledGraph:
    new = copy.copy(graph)
    nodes: dict[str, NodeSpec] = {}
    for name, spec in graph.nodes.items():
        fn, is_async = wrap(spec)
        nodes[name] = dataclasses.replace(spec, fn=fn, arity=2, is_async=is_async)
    new.nodes = nodes
    return new


def _call(spec: NodeSpec, state: Any, ctx: NodeContext) -> Any:
    return spec.fn(state, ctx) if spec.arity == 2 else spec.fn(state)


# --------------------------------------------------------------------------- call logs


@dataclass
class NodeCall:
    """One call of a node function.

    Attributes:
        node: the node.
        task_id: its task.
        step: the superstep.
        attempt: the try (1-based).
        leg: :attr:`CallLog.leg` when the call started (which leg of a run made it).
        outcome: ``"running"``, then ``"ok"``, ``"failed"``, ``"interrupted"`` or
            ``"cancelled"``.
    """

    node: str
    task_id: str
    step: int
    attempt: int
    leg: int = 0
    outcome: str = "running"


@dataclass
class CallLog:
    """Every node call of the instrumented graph, in start order.

    Attributes:
        calls: the calls.
        leg: a number the driver of a run bumps between legs (resumes, recoveries).
    """

    calls: list[NodeCall] = field(default_factory=list)
    leg: int = 0

    def completed(self, node: str | None = None) -> list[NodeCall]:
        """Calls that returned normally (of ``node``, or of every node)."""
        return [c for c in self.calls if c.outcome == "ok" and (node is None or c.node == node)]

    def start_orders(self, leg: int | None = None) -> dict[int, list[NodeCall]]:
        """First attempts by step, in the order they started (one leg, or all)."""
        out: dict[int, list[NodeCall]] = {}
        for c in self.calls:
            if c.attempt == 1 and (leg is None or c.leg == leg):
                out.setdefault(c.step, []).append(c)
        return out


def record_calls(graph: CompiledGraph, log: CallLog) -> CompiledGraph:
    """A copy of ``graph`` whose node calls are appended to ``log``."""

    def wrap(spec: NodeSpec) -> tuple[Callable[..., Any], bool]:
        def begin(ctx: NodeContext) -> NodeCall:
            call = NodeCall(spec.name, ctx.task_id, ctx.step, ctx.attempt, log.leg)
            log.calls.append(call)
            return call

        def fail(call: NodeCall, exc: BaseException) -> None:
            if isinstance(exc, (_InterruptSignal, ChildPaused)):  # a subgraph's breakpoint
                call.outcome = "interrupted"
            elif isinstance(exc, anyio.get_cancelled_exc_class()):
                call.outcome = "cancelled"
            else:
                call.outcome = "failed"

        async def finish_async(call: NodeCall, awaitable: Awaitable[Any]) -> Any:
            try:
                result = await awaitable
            except BaseException as exc:
                fail(call, exc)
                raise
            call.outcome = "ok"
            return result

        if spec.is_async:
            async def async_wrapper(state: Any, ctx: NodeContext) -> Any:
                call = begin(ctx)
                try:
                    awaitable = _call(spec, state, ctx)
                except BaseException as exc:
                    fail(call, exc)
                    raise
                return await finish_async(call, awaitable)

            return async_wrapper, True

        def sync_wrapper(state: Any, ctx: NodeContext) -> Any:
            call = begin(ctx)
            try:
                result = _call(spec, state, ctx)
            except BaseException as exc:
                fail(call, exc)
                raise
            if inspect.isawaitable(result):
                return finish_async(call, result)
            call.outcome = "ok"
            return result

        return sync_wrapper, False

    return _replace_nodes(graph, wrap)


# --------------------------------------------------------------------------- schedules


@dataclass
class _Batch:
    arrived: list[tuple[int, str]] = field(default_factory=list)
    order: list[str] | None = None
    turn: int = 0
    closed: bool = False


@dataclass(frozen=True)
class Schedule:
    """Start orders for a run's parallel batches (draw them with ``strategies.schedules``).

    Attributes:
        orders: for the n-th parallel batch a run executes (a resumed batch keeps its order),
            the order its tasks' node functions start in, as positions in declared order
            (``(2, 0, 1)``: the third node first). A batch of another size keeps the
            positions it has, then the rest in declared order; batches past the last order
            start in declared order.
    """

    orders: tuple[tuple[int, ...], ...] = ()

    def order_for(self, n: int, size: int) -> list[int]:
        """The start order (positions) of the ``n``-th parallel batch, of ``size`` tasks."""
        order = self.orders[n] if n < len(self.orders) else ()
        head = [p for p in order if p < size]
        return head + [p for p in range(size) if p not in head]

    def apply(self, graph: CompiledGraph) -> CompiledGraph:
        """A copy of ``graph`` whose parallel batches start in this schedule's orders.

        Every node function is wrapped in an ``async`` gate: on its first attempt a task
        announces itself and yields once (under the runtime's virtual-clock scheduler every
        task of the batch is then waiting at the gate), then waits its turn. Needs a
        :class:`~pytest_graphflow.VirtualClock`; the wrapped graph has the same revision.
        """
        batches: dict[tuple[str, int], _Batch] = {}
        # (run id, step) -> which order; a resumed or repeated run reuses its batches' orders.
        counter: dict[tuple[str, int], int] = {}

        def wrap(spec: NodeSpec) -> tuple[Callable[..., Any], bool]:
            async def gated(state: Any, ctx: NodeContext) -> Any:
                if ctx.attempt == 1:
                    await self._gate(batches, counter, ctx)
                result = _call(spec, state, ctx)
                if inspect.isawaitable(result):
                    result = await result
                return result

            return gated, True

        return _replace_nodes(graph, wrap)

    async def _gate(
        self, batches: dict[tuple[str, int], _Batch], counter: dict[tuple[str, int], int],
        ctx: NodeContext,
    ) -> None:
        key = (ctx.run_id, ctx.step)
        batch = batches.get(key)
        if batch is None or batch.closed or batch.order is not None:
            batch = batches[key] = _Batch()
        batch.arrived.append((task_number(ctx.task_id), ctx.task_id))
        await anyio.sleep(0)  # every other task of the batch reaches the gate meanwhile
        if batch.order is None:
            members = [t for _, t in sorted(batch.arrived)]
            if len(members) > 1:
                n = counter.setdefault(key, sum(1 for r, _ in counter if r == ctx.run_id))
                positions = self.order_for(n, len(members))
                batch.order = [members[p] for p in positions]
            else:
                batch.order = members
        while batch.order[batch.turn] != ctx.task_id:
            await anyio.sleep(0)
        batch.turn += 1
        if batch.turn == len(batch.order):
            batch.closed = True

    def __repr__(self) -> str:
        return f"Schedule(orders={self.orders!r})"
