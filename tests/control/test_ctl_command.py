"""Issue 3 — ``Command(goto=...)`` routing and its replay rule (seed 000, SPEC §1, C9)."""

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
    Resume,
    UnknownRoute,
    VirtualClock,
    interrupt,
)

pytestmark = pytest.mark.anyio


class S(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []


def leaf(name: str) -> Any:
    def fn(s: S) -> dict[str, Any]:
        return {"log": [name]}

    return fn


def router_graph(goto: Any) -> Any:
    """``a`` has a static edge to ``y`` but picks its target itself with ``goto``."""
    g = Graph("goto", S)
    g.node("a", lambda s: Command(update={"log": ["a"]}, goto=goto), destinations=["x", "y"])
    g.node("x", leaf("x"))
    g.node("y", leaf("y"))
    g.edge(START, "a")
    g.edge("a", "y")
    g.edge("x", END)
    g.edge("y", END)
    return g.compile()


async def test_goto_replaces_static_edges() -> None:
    trace = await GraphRuntime(clock=VirtualClock(), seed=0).atrace(router_graph("x"), {})

    assert trace.result.status == "completed"
    assert trace.result.data["log"] == ["a", "x"]
    edges = [(e.source, e.target) for e in trace.events if e.type == "edge_transition"]
    assert ("a", "x") in edges
    assert ("a", "y") not in edges
    end_a = next(e for e in trace.events if e.type == "node_end" and e.node == "a")
    assert end_a.patch == {"log": ["a"]}


async def test_goto_list_fans_out_to_a_parallel_batch() -> None:
    trace = await GraphRuntime(clock=VirtualClock(), seed=0).atrace(router_graph(["y", "x"]), {})

    assert trace.result.status == "completed"
    # one batch; patches merged in declared order (x before y), whatever order goto named
    assert trace.result.data["log"] == ["a", "x", "y"]
    steps = {e.node: e.step for e in trace.events if e.type == "node_start"}
    assert steps["x"] == steps["y"] == steps["a"] + 1


async def test_goto_end_finishes_the_run() -> None:
    trace = await GraphRuntime(clock=VirtualClock(), seed=0).atrace(router_graph(END), {})

    assert trace.result.status == "completed"
    assert trace.result.data["log"] == ["a"]
    assert not [e for e in trace.events if e.type == "node_start" and e.node in ("x", "y")]


@pytest.mark.parametrize("target", ["z", "nowhere"])
async def test_goto_to_undeclared_node_is_unknown_route(target: str) -> None:
    g = Graph("bad-goto", S)
    g.node("a", lambda s: Command(goto=target), destinations=["x"])
    g.node("x", leaf("x"))
    g.node("z", leaf("z"))
    g.edge(START, "a")
    g.edge(START, "z")
    g.edge("x", END)
    g.edge("z", END)
    trace = await GraphRuntime(clock=VirtualClock(), seed=0).atrace(g.compile(), {})

    assert trace.result.status == "failed"
    err = trace.result.error
    cause = err if isinstance(err, UnknownRoute) else getattr(err, "__cause__", None)
    assert isinstance(cause, UnknownRoute), repr(err)
    assert cause.node == "a"
    assert cause.target == target
    assert target in str(err)
    assert "a" in str(err)
    errors = [e for e in trace.events if e.type == "error"]
    assert errors
    assert errors[0].node == "a"
    assert not [e for e in trace.events if e.type == "node_start" and e.node == "x"]


async def test_replayed_external_node_goes_to_its_recorded_target() -> None:
    """A (external) picks x itself; sibling B interrupts; on resume A is replayed -> x."""
    calls = {"a": 0, "b": 0}

    def a(s: S) -> Command:
        calls["a"] += 1
        # Were A called again it would pick y: the replay must not re-decide.
        return Command(update={"log": ["a"]}, goto="x" if calls["a"] == 1 else "y")

    def b(s: S) -> dict[str, Any]:
        calls["b"] += 1
        answer = interrupt("ok?", id="ok")
        return {"log": [f"b:{answer}"]}

    g = Graph("replay-goto", S)
    g.node("start", lambda s: None)
    g.node("a", a, effect="external", destinations=["x", "y"])
    g.node("b", b)
    g.node("x", leaf("x"))
    g.node("y", leaf("y"))
    g.edge(START, "start")
    g.edge("start", ["a", "b"])
    g.edge("a", "y")  # the static edge a replay must not fall back to
    g.edge("b", END)
    g.edge("x", END)
    g.edge("y", END)
    graph = g.compile()

    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    first = await rt.atrace(graph, {})
    assert first.result.status == "interrupted"
    assert calls == {"a": 1, "b": 1}

    resumed = await rt.aresume_trace(first.result.run_id, Resume("yes"))

    assert calls["a"] == 1  # A's function is not called again
    end_a = [e for e in resumed.events if e.type == "node_end" and e.node == "a"]
    assert len(end_a) == 1
    assert end_a[0].replayed is True
    assert end_a[0].patch == {"log": ["a"]}
    edges = [(e.source, e.target) for e in resumed.events if e.type == "edge_transition"]
    assert ("a", "x") in edges
    assert ("a", "y") not in edges
    ran = [e.node for e in resumed.events if e.type == "node_start"]
    assert "x" in ran
    assert "y" not in ran
    assert resumed.result.status == "completed"
    assert resumed.result.data["log"] == ["a", "b:yes", "x"]
