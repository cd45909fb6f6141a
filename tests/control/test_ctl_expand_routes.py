"""Expansions from an edge function or from START, and a route returning node names and an
expansion together (seed 000's expansions, decided by an edge)."""

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
    NodeContext,
    Reducer,
    Resume,
    UnknownRoute,
    UpdateRejected,
    VirtualClock,
    interrupt,
)
from pytest_graphflow.invariants import assert_invariants

pytestmark = pytest.mark.anyio


class S(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []
    items: list[int] = [1, 2, 3]


def work(state: S, ctx: NodeContext) -> dict[str, Any]:
    return {"log": [f"w{ctx.item}"]}


def runtime() -> GraphRuntime:
    return GraphRuntime(clock=VirtualClock(), seed=2)


async def test_a_route_returns_a_node_and_an_expansion_together() -> None:
    calls: list[str] = []

    def plan(state: S) -> dict[str, Any]:
        calls.append("plan")
        return {"log": ["plan"]}

    g = Graph("route-expand", S)
    g.node("plan", plan).node("audit", lambda s: {"log": ["audit"]}).node("w", work)
    g.node("done", lambda s: {"log": ["done"]})
    g.branch("plan", lambda s: ["audit", Expand("w", s.items)], ["audit", "w"])
    g.edge(START, "plan").edge("audit", END).edge("w", "done").edge("done", END)
    graph = g.compile()
    trace = await runtime().atrace(graph)
    assert trace.result.status == "completed"
    assert trace.result.data["log"] == ["plan", "audit", "w1", "w2", "w3", "done"]
    starts = [(e.node, e.step) for e in trace.events.of_type("node_start")]
    assert starts[1:5] == [("audit", 1), ("w", 1), ("w", 1), ("w", 1)]
    assert_invariants(trace.events, graph=graph)


async def test_an_expansion_from_start() -> None:
    g = Graph("start-expand", S)
    g.node("w", work)
    g.branch(START, lambda s: Expand("w", [10, 20]), ["w"])
    g.edge("w", END)
    result = await runtime().ainvoke(g.compile())
    assert result.data["log"] == ["w10", "w20"]


async def test_a_route_expansion_keeps_the_nodes_static_edges_and_join_arrivals() -> None:
    g = Graph("expand-join", S)
    g.node("a", lambda s: {"log": ["a"]}).node("b", lambda s: {"log": ["b"]})
    g.node("w", work).node("z", lambda s: {"log": ["z"]})
    g.edge(START, ["a", "b"]).edge(["a", "b"], "z").edge("z", END).edge("w", END)
    g.branch("a", lambda s: Expand("w", [7]), ["w"])
    result = await runtime().ainvoke(g.compile())
    assert result.status == "completed"
    assert result.data["log"] == ["a", "b", "w7", "z"]


async def test_a_replayed_node_decides_its_route_expansion_again() -> None:
    """C9: a completed ``write`` node of a halted batch is replayed from its output; its
    route is decided again on resume, so the expansion it picked still happens."""
    calls: list[str] = []

    def save(state: S) -> dict[str, Any]:
        calls.append("save")
        return {"log": ["saved"]}

    g = Graph("replay-expand", S)
    g.node("save", save, effect="write")
    g.node("ask", lambda s: {"log": [interrupt("ok?", id="ok")]}, effect="human")
    g.node("w", work)
    g.edge(START, ["save", "ask"]).edge("ask", END).edge("w", END)
    g.branch("save", lambda s: Expand("w", [1, 2]), ["w"])
    rt = runtime()
    paused = await rt.ainvoke(g.compile())
    assert paused.status == "interrupted"
    done = await rt.aresume(paused.run_id, Resume("yes"))
    assert calls == ["save"]
    assert done.data["log"] == ["saved", "yes", "w1", "w2"]


@pytest.mark.parametrize(
    ("route", "error", "match"),
    [
        (lambda s: Expand("other", [1]), UnknownRoute, "'other'"),
        (lambda s: Expand("w", [1], update={"log": ["x"]}), UpdateRejected, "cannot carry"),
        (lambda s: [Expand("w", [1]), Expand("w", [2])], UpdateRejected, "one Expand"),
        (lambda s: Expand("w", "abc"), UpdateRejected, "must be a list"),
    ],
    ids=["undeclared-target", "with-update", "two-expands", "string-items"],
)
async def test_bad_route_expansions_fail_the_run(route: Any, error: type[Exception],
                                                 match: str) -> None:
    g = Graph("bad-route-expand", S)
    g.node("a", lambda s: None).node("w", work).node("other", lambda s: None)
    g.edge(START, "a").edge("w", END).edge("other", END)
    g.branch("a", route, ["w", END])
    g.edge("a", "other")
    result = await runtime().ainvoke(g.compile())
    assert result.status == "failed"
    assert isinstance(result.error, error)
    assert match in str(result.error)
