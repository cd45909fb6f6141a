"""Under the scheduler, the first async node of a batch runs in the batch's own task (a lone
node always does), not in a task of its own: what the node can see stays as a task of its own
gives it.

The node's context-variable changes stay its own, lone or beside another node (a later node
sees the value from before); a cancellation still reaches it (a run timeout mid-sleep); its
sleeps move virtual time exactly as a node of a parallel batch's do.
"""

from __future__ import annotations

import operator
from contextvars import ContextVar
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    Reducer,
    RunTimedOut,
    VirtualClock,
)

pytestmark = pytest.mark.anyio

MARK: ContextVar[str] = ContextVar("graphflow_test_mark", default="unset")


class S(BaseModel):
    seen: Annotated[list[str], Reducer(operator.add)] = []


async def setter(state: S) -> dict[str, Any]:
    MARK.set("set by setter")
    await anyio.sleep(1)
    return {"seen": [f"setter:{MARK.get()}"]}


async def twin(state: S) -> dict[str, Any]:
    await anyio.sleep(2)
    return {"seen": ["twin"]}


def reader(state: S) -> dict[str, Any]:
    return {"seen": [f"reader:{MARK.get()}"]}


async def async_reader(state: S) -> dict[str, Any]:
    return {"seen": [f"async_reader:{MARK.get()}"]}


def graph(parallel: bool) -> Any:
    g = Graph("lone" if not parallel else "pair", S)
    g.node("setter", setter)
    g.node("reader", reader)
    g.node("async_reader", async_reader)
    first = ["setter", "twin"] if parallel else ["setter"]
    if parallel:
        g.node("twin", twin)
    g.edge(START, first)
    g.edge(first, "reader")
    g.edge("reader", "async_reader").edge("async_reader", END)
    return g.compile()


@pytest.mark.parametrize("parallel", [False, True], ids=["lone", "parallel"])
async def test_an_async_nodes_context_changes_stay_its_own(parallel: bool) -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    token = MARK.set("caller")
    try:
        result = await rt.ainvoke(graph(parallel), {})
        assert MARK.get() == "caller"  # the caller's context is untouched
    finally:
        MARK.reset(token)
    seen = [s for s in result.data["seen"] if s != "twin"]
    assert seen == ["setter:set by setter", "reader:caller", "async_reader:caller"]


async def test_a_run_timeout_cancels_a_lone_sleeping_node() -> None:
    async def sleeper(state: S) -> dict[str, Any]:
        await anyio.sleep(3600)
        return {"seen": ["woke"]}

    g = Graph("lone-timeout", S)
    g.node("sleeper", sleeper)
    g.edge(START, "sleeper").edge("sleeper", END)
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    trace = await rt.atrace(g.compile(), {}, timeout=10)
    assert trace.result.status == "failed"
    assert isinstance(trace.result.error, RunTimedOut)
    assert rt.clock.elapsed == 10.0  # cut mid-sleep, on the virtual clock
    assert [e.type for e in trace.events if e.type in ("node_end", "error")] == ["error"]


@pytest.mark.parametrize("parallel", [False, True], ids=["lone", "parallel"])
async def test_a_lone_nodes_sleeps_move_virtual_time_as_in_a_batch(parallel: bool) -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    result = await rt.ainvoke(graph(parallel), {})
    assert result.status == "completed"
    assert rt.clock.elapsed == (2.0 if parallel else 1.0)  # the batch's longest sleep


@pytest.mark.parametrize("parallel", [False, True], ids=["lone", "parallel"])
def test_a_child_task_of_the_node_sleeps_on_the_loop(anyio_backend: str, parallel: bool
                                                      ) -> None:
    """A task the node starts itself takes no turns in the batch: its sleep is the loop's
    (virtual on the loop the sync API runs), whichever task the node runs in."""

    async def parent(state: S) -> dict[str, Any]:
        seen: list[str] = []

        async def child() -> None:
            await anyio.sleep(5)
            seen.append("child")

        async with anyio.create_task_group() as tg:
            tg.start_soon(child)
            await anyio.sleep(1)
            seen.append("parent")
        return {"seen": seen}

    g = Graph("child-task", S)
    g.node("parent", parent)
    first = ["parent", "twin"] if parallel else ["parent"]
    if parallel:
        g.node("twin", twin)
    g.edge(START, first).edge(first, END)
    rt = GraphRuntime(clock=VirtualClock(), seed=0, backend=anyio_backend)
    result = rt.invoke(g.compile(), {})
    assert result.status == "completed"
    assert [s for s in result.data["seen"] if s != "twin"] == ["parent", "child"]
    # The node's own sleep moves time to 1 s before the child starts; its 5 s run from there.
    assert rt.clock.elapsed == 6.0
