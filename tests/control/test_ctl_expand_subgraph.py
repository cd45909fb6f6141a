"""Issue 23 (8): an ``Expand`` (LangGraph's ``Send``) whose target is a subgraph node passes
each item to its child as the child's input, as LangGraph does with ``Send`` to a subgraph
node. Before, the item was dropped silently: every child started from the parent's state, so
all of them got the same input."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Expand,
    Graph,
    GraphRuntime,
    InvalidArgument,
    NodeFailed,
    Reducer,
    Subgraph,
    VirtualClock,
)

pytestmark = pytest.mark.anyio


class Child(BaseModel):
    topic: str = ""
    joke: str = ""


class Parent(BaseModel):
    topic: str = "parent"
    subjects: list[Any] = []
    jokes: Annotated[list[str], Reducer(operator.add)] = []


def child() -> Any:
    c = Graph("joke", Child)
    c.node("write", lambda s: {"joke": f"a joke about {s.topic}"})
    c.edge(START, "write").edge("write", END)
    return c.compile()


def parent(sub: Any, *, route: bool = False) -> Any:
    p = Graph("jokes", Parent)
    fan = lambda s: Expand("joke", [{"topic": t} if isinstance(t, str) else t  # noqa: E731
                                    for t in s.subjects])
    if route:  # an edge function's Expand (LangGraph's conditional edge returning Sends)
        p.node("plan", lambda s: None)
        p.branch("plan", fan, ["joke"])
    else:
        p.node("plan", fan, destinations=["joke"])
    p.node("joke", sub)
    p.edge(START, "plan").edge("joke", END)
    return p.compile()


def collecting(s: Child) -> dict[str, Any]:
    return {"jokes": [s.joke]}


@pytest.mark.parametrize("route", [False, True], ids=["node-expand", "route-expand"])
@pytest.mark.parametrize("seed", [0, 1, 7])
async def test_each_expansion_item_is_its_child_s_input(route: bool, seed: int) -> None:
    graph = parent(Subgraph(child(), output=collecting), route=route)
    rt = GraphRuntime(clock=VirtualClock(), seed=seed)
    result = await rt.ainvoke(graph, {"subjects": ["cats", "dogs", "owls"]})
    assert result.status == "completed"
    # In item order; each child got its own item, not the parent's topic.
    assert result.data["jokes"] == ["a joke about cats", "a joke about dogs", "a joke about owls"]


async def test_a_task_without_an_item_still_maps_the_parent_s_state() -> None:
    """The passing twin: a plain edge into the subgraph node keeps the parent-state mapping."""
    p = Graph("plain", Parent)
    p.node("joke", Subgraph(child(), output=collecting))
    p.edge(START, "joke").edge("joke", END)
    result = await GraphRuntime(clock=VirtualClock(), seed=0).ainvoke(p.compile())
    assert result.data["jokes"] == ["a joke about parent"]


BAD_ITEMS = [
    ("not-a-dict", 3, "a dict of the child's state keys"),
    ("unknown-key", {"subject": "cats"}, "'subject'"),
]


@pytest.mark.parametrize(("item", "says"), [(i, s) for _, i, s in BAD_ITEMS],
                         ids=[name for name, _, _ in BAD_ITEMS])
async def test_an_item_that_cannot_be_the_child_s_input_fails_the_node(item: Any, says: str
                                                                       ) -> None:
    graph = parent(Subgraph(child(), output=collecting))
    result = await GraphRuntime(clock=VirtualClock(), seed=0).ainvoke(
        graph, {"subjects": [item]})
    assert result.status == "failed"
    assert isinstance(result.error, NodeFailed)
    cause = result.error.__cause__
    assert isinstance(cause, InvalidArgument)
    assert "node 'joke'" in str(cause)
    assert says in str(cause)
