"""A node returning several ``Command``s: their updates apply in order and their targets are
all followed (each still declared in ``destinations=``)."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Command,
    Graph,
    GraphRuntime,
    Reducer,
    UnknownRoute,
    UpdateRejected,
    VirtualClock,
)

pytestmark = pytest.mark.anyio


class State(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []
    n: int = 0


def graph(result: Any) -> Any:
    g = Graph("commands", State)
    g.node("pick", lambda s: result, destinations=["a", "b"])
    g.node("a", lambda s: {"log": ["a"]}).node("b", lambda s: {"log": ["b"]})
    g.edge(START, "pick").edge("pick", END).edge("a", END).edge("b", END)
    return g.compile()


async def test_several_commands_merge_updates_in_order_and_follow_every_target() -> None:
    result = [Command(update={"log": ["one"], "n": 1}, goto="a"),
              Command(update={"log": ["two"]}, goto=["b", "a"])]
    rt = GraphRuntime(clock=VirtualClock(), seed=1)
    trace = await rt.atrace(graph(result))
    assert trace.result.data == {"log": ["one", "two", "a", "b"], "n": 1}
    (end,) = trace.events.of_type("node_end")[:1]
    assert end.goto == ["a", "b"]
    assert end.patch == {"log": ["one", "two"], "n": 1}


async def test_commands_without_goto_keep_the_static_edges() -> None:
    result = (Command(update={"n": 2}), Command(update={"log": ["x"]}))
    done = await GraphRuntime(clock=VirtualClock(), seed=1).ainvoke(graph(result))
    assert done.data == {"log": ["x"], "n": 2}


@pytest.mark.parametrize(
    ("result", "error", "match"),
    [
        ([Command(update={"n": 1}), Command(update={"n": 2})], UpdateRejected,
         "two of the node's Commands wrote it"),
        ([Command(goto="a"), Command(goto="nowhere")], UnknownRoute, "'nowhere'"),
    ],
    ids=["plain-key-twice", "undeclared-target"],
)
async def test_bad_command_lists_fail_the_run(result: Any, error: type[Exception],
                                              match: str) -> None:
    done = await GraphRuntime(clock=VirtualClock(), seed=1).ainvoke(graph(result))
    assert done.status == "failed"
    assert isinstance(done.error, error)
    assert match in str(done.error)
