"""Sync nodes in a batch with async nodes take no task of their own under the scheduler: one
coroutine in the batch's body runs each when the seeded scheduler hands it the baton.

What a user relies on stays: the start order follows the seed (the same on asyncio and trio,
byte for byte), each sync node's context-variable changes stay its own, and a run timeout
still cuts the batch while its async node sleeps.
"""

from __future__ import annotations

import operator
from contextvars import ContextVar
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, Reducer, RunTimedOut, VirtualClock

MARK: ContextVar[str] = ContextVar("graphflow_hosted_mark", default="unset")
CALLS: list[str] = []
"""The order the node functions are called in (what a node with side effects sees)."""


class S(BaseModel):
    seen: Annotated[list[str], Reducer(operator.add)] = []


def _sync(name: str) -> Any:
    def node(state: S) -> dict[str, Any]:
        CALLS.append(name)
        before = MARK.get()
        MARK.set(f"set by {name}")
        return {"seen": [f"{name}:{before}"]}

    node.__name__ = name
    return node


def _async(name: str, seconds: float) -> Any:
    async def node(state: S) -> dict[str, Any]:
        CALLS.append(name)
        await anyio.sleep(seconds)
        return {"seen": [f"{name}:{MARK.get()}"]}

    node.__name__ = name
    return node


def mixed(sleep: float = 1.0) -> Any:
    """One batch: two async nodes and three sync nodes, then a sync node after it."""
    g = Graph("hosted", S)
    first = ["a1", "s1", "a2", "s2", "s3"]
    for name in first:
        g.node(name, _async(name, sleep) if name.startswith("a") else _sync(name))
    g.node("after", _sync("after"))
    g.edge(START, first).edge(first, "after").edge("after", END)
    return g.compile()


def _call_order(seed: int, backend: str = "asyncio") -> list[str]:
    CALLS.clear()
    GraphRuntime(clock=VirtualClock(), seed=seed, backend=backend).invoke(mixed(), {})
    return [c for c in CALLS if c != "after"]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_mixed_batch_starts_in_the_seeded_order_on_both_backends(seed: int) -> None:
    logs = {}
    for backend in ("asyncio", "trio"):
        rt = GraphRuntime(clock=VirtualClock(), seed=seed, backend=backend)
        trace = rt.trace(mixed(), {})
        assert trace.result.status == "completed"
        logs[backend] = [e.model_dump_json() for e in trace.events]
    assert logs["asyncio"] == logs["trio"]
    again = GraphRuntime(clock=VirtualClock(), seed=seed).trace(mixed(), {})
    assert [e.model_dump_json() for e in again.events] == logs["asyncio"]


def test_the_seed_decides_when_the_sync_nodes_are_called() -> None:
    orders = {seed: _call_order(seed) for seed in range(6)}
    # The sync nodes are picked among the ready tasks by the seed, like the async ones.
    assert len({tuple(o) for o in orders.values()}) > 1
    assert all(sorted(o) == ["a1", "a2", "s1", "s2", "s3"] for o in orders.values())
    for seed, order in orders.items():  # the same seed, the same order, on both backends
        assert _call_order(seed) == order
        assert _call_order(seed, "trio") == order


def test_each_sync_nodes_context_changes_stay_its_own() -> None:
    token = MARK.set("caller")
    try:
        result = GraphRuntime(clock=VirtualClock(), seed=0).invoke(mixed(), {})
        assert MARK.get() == "caller"
    finally:
        MARK.reset(token)
    # Every node of the batch, and the node after it, sees the caller's value: none sees
    # another's change.
    assert sorted(result.data["seen"]) == sorted(
        f"{n}:caller" for n in ["a1", "s1", "a2", "s2", "s3", "after"])


def test_a_run_timeout_cuts_the_batch_while_its_async_nodes_sleep() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    trace = rt.trace(mixed(sleep=3600), {}, timeout=10)
    assert trace.result.status == "failed"
    assert isinstance(trace.result.error, RunTimedOut)
    assert rt.clock.elapsed == 10.0
    ended = sorted(e.node for e in trace.events if e.type == "node_end")
    assert ended == ["s1", "s2", "s3"]  # the sync nodes ran before time moved


def test_the_call_orders_are_those_of_a_task_per_node() -> None:
    """The orders from before the sync nodes were hosted (a task per node), kept."""
    assert _call_order(0) == ["s1", "a1", "s3", "s2", "a2"]
    assert _call_order(4) == ["a2", "s2", "a1", "s3", "s1"]
