"""Subgraphs: a compiled graph used as a node, with its own state schema mapped to the
parent's, checkpoints namespaced under the parent task, and child interrupts surfacing in the
parent with the ``<task_id>/`` key prefix (seed 001), resumable from the parent."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Command,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    InvalidArgument,
    NodeFailed,
    Reducer,
    Resume,
    SQLiteCheckpointStore,
    Subgraph,
    VirtualClock,
    interrupt,
)
from pytest_graphflow.invariants import assert_invariants

pytestmark = pytest.mark.anyio


class Child(BaseModel):
    text: str = ""
    verdict: str = ""


class Parent(BaseModel):
    draft: str = ""
    verdict: str = ""
    log: Annotated[list[str], Reducer(operator.add)] = []


calls: list[str] = []


async def polish(state: Child) -> dict[str, Any]:
    calls.append("polish")
    await anyio.sleep(3)  # virtual time, inside the child
    return {"text": state.text.upper()}


def approve(state: Child) -> dict[str, Any]:
    calls.append("approve")
    return {"verdict": interrupt({"text": state.text}, id="ok")}


def child_graph() -> Any:
    c = Graph("review", Child)
    c.node("polish", polish).node("approve", approve, effect="human")
    c.edge(START, "polish").edge("polish", "approve").edge("approve", END)
    return c.compile()


def parent_graph(node: Any = None) -> Any:
    p = Graph("publish", Parent)
    p.node("plan", lambda s: {"log": ["plan"]})
    p.node("review", node if node is not None else Subgraph(
        child_graph(), input={"text": "draft"}, output={"draft": "text", "verdict": "verdict"}))
    p.node("ship", lambda s: {"log": [f"ship:{s.draft}:{s.verdict}"]})
    p.edge(START, "plan").edge("plan", "review").edge("review", "ship").edge("ship", END)
    return p.compile()


async def test_a_child_interrupt_surfaces_in_the_parent_and_resumes_from_it_over_sqlite(
    tmp_path: Path,
) -> None:
    calls.clear()
    path = tmp_path / "runs.db"
    graph = parent_graph()
    rt = GraphRuntime(store=SQLiteCheckpointStore(path), clock=VirtualClock(), seed=4)
    first = await rt.atrace(graph, {"draft": "hello"})
    paused = first.result
    assert paused.status == "interrupted"
    ((key, pending),) = paused.interrupts.items()
    review_task = first.events.of_type("node_start")[1].task_id
    # Seed 001: "inside a child graph, prefixed with the subgraph node's "<task_id>/""
    assert key.startswith(f"{review_task}/task-")
    assert key.endswith(":ok")
    assert (pending.node, pending.task_id, pending.id) == ("review", review_task, "ok")
    assert pending.payload == {"text": "HELLO"}
    # the child's checkpoints are namespaced under the parent task
    child_cps = await rt.store.list(thread_id=f"{paused.thread_id}/{review_task}")
    assert child_cps[-1].status == "interrupted"
    assert child_cps[-1].graph_id == "review"

    # another process: a fresh runtime over the same file, given the graph
    fresh = GraphRuntime(store=SQLiteCheckpointStore(path), clock=VirtualClock(), seed=4)
    second = await fresh.aresume_trace(paused.run_id, Resume(answers={key: "approved"}),
                                       graph=graph)
    done = second.result
    assert done.status == "completed"
    assert done.data == {"draft": "HELLO", "verdict": "approved",
                         "log": ["plan", "ship:HELLO:approved"]}
    assert calls == ["polish", "approve", "approve"]  # polish is not run again
    assert_invariants([*first.events, *second.events], graph=graph)


async def test_default_mapping_shares_the_keys_both_schemas_define() -> None:
    class Inner(BaseModel):
        verdict: str = ""
        note: str = ""

    inner = Graph("inner", Inner)
    inner.node("judge", lambda s: {"verdict": "ok", "note": "not in the parent"})
    inner.edge(START, "judge").edge("judge", END)
    graph = parent_graph(inner.compile())  # a CompiledGraph as the node: the defaults
    result = await GraphRuntime(clock=VirtualClock(), seed=1).ainvoke(graph, {"verdict": "?"})
    assert result.data["verdict"] == "ok"
    assert result.data["log"] == ["plan", "ship::ok"]


async def test_the_parents_on_interrupt_hook_sees_the_prefixed_key() -> None:
    seen: list[str] = []

    def hook(pending: Any) -> str:
        seen.append(pending.key)
        return "auto"

    result = await GraphRuntime(clock=VirtualClock(), seed=1).ainvoke(
        parent_graph(), {"draft": "x"}, on_interrupt=hook)
    assert result.data["verdict"] == "auto"
    assert len(seen) == 1
    assert "/task-" in seen[0]


async def test_command_to_the_parent_routes_the_parent_from_inside_the_child() -> None:
    def escalate(state: Child) -> Command:
        return Command(graph=Command.PARENT, goto="manual", update={"log": ["escalated"]})

    inner = Graph("escalating", Child)
    inner.node("escalate", escalate).node("never", lambda s: {"text": "never"})
    inner.edge(START, "escalate").edge("escalate", "never").edge("never", END)
    p = Graph("parent-routes", Parent)
    p.node("review", inner.compile(), destinations=["manual"])
    p.node("ship", lambda s: {"log": ["ship"]}).node("manual", lambda s: {"log": ["manual"]})
    p.edge(START, "review").edge("review", "ship").edge("ship", END).edge("manual", END)
    result = await GraphRuntime(clock=VirtualClock(), seed=1).ainvoke(p.compile())
    assert result.status == "completed"
    assert result.data["log"] == ["escalated", "manual"]


async def test_command_to_the_parent_in_a_top_level_graph_fails_the_run() -> None:
    g = Graph("no-parent", Child)
    g.node("a", lambda s: Command(graph=Command.PARENT, goto="x"))
    g.edge(START, "a").edge("a", END)
    result = await GraphRuntime(clock=VirtualClock(), seed=1).ainvoke(g.compile())
    assert result.status == "failed"
    assert "has no parent to route" in str(result.error)


async def test_a_failing_child_fails_the_subgraph_node() -> None:
    def boom(state: Child) -> None:
        raise ValueError("child broke")

    inner = Graph("broken-child", Child)
    inner.node("boom", boom).edge(START, "boom").edge("boom", END)
    result = await GraphRuntime(store=InMemoryCheckpointStore(), clock=VirtualClock(),
                                seed=1).ainvoke(parent_graph(inner.compile()))
    assert result.status == "failed"
    assert isinstance(result.error, NodeFailed)
    assert result.error.node == "review"
    assert isinstance(result.error.__cause__, NodeFailed)
    assert "child broke" in str(result.error)


async def test_same_seed_same_bytes_with_a_subgraph() -> None:
    def hook(pending: Any) -> str:
        return "yes"

    async def once() -> str:
        trace = await GraphRuntime(clock=VirtualClock(), seed=9).atrace(
            parent_graph(), {"draft": "d"}, on_interrupt=hook)
        return trace.to_json()

    assert await once() == await once()


def test_subgraph_arguments_are_checked() -> None:
    with pytest.raises(InvalidArgument, match="pass a CompiledGraph"):
        Subgraph(Graph("raw", Child))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="Subgraph\\(input=3\\)"):
        Subgraph(child_graph(), input=3)  # type: ignore[arg-type]


async def test_the_childs_events_reach_the_parents_stream_with_their_path() -> None:
    calls.clear()
    rt = GraphRuntime(clock=VirtualClock(), seed=4)
    trace = await rt.atrace(parent_graph(), {"draft": "hi"})
    forwarded = [e for e in trace.events.of_type("custom") if e.channel == "subgraph"]
    assert {e.node for e in forwarded} == {"review"}
    seen = [(tuple(e.value["path"]), e.value["event"]["type"]) for e in forwarded]
    assert seen[0] == (("review",), "run_start")
    assert (("review", "polish"), "node_end") in seen
    assert (("review", "approve"), "interrupt") in seen
    assert seen[-1] == (("review",), "run_end")
    assert_invariants(trace.events, graph=parent_graph())


async def test_a_nested_subgraph_prefixes_the_outer_node_to_the_path() -> None:
    inner = Graph("leaf", Child)
    inner.node("leaf", lambda s: {"verdict": "ok"}).edge(START, "leaf").edge("leaf", END)
    middle = Graph("middle", Child)
    middle.node("inner", inner.compile()).edge(START, "inner").edge("inner", END)
    outer = Graph("outer", Parent)
    outer.node("mid", middle.compile()).edge(START, "mid").edge("mid", END)
    trace = await GraphRuntime(clock=VirtualClock(), seed=4).atrace(outer.compile())
    paths = {tuple(e.value["path"]) for e in trace.events.of_type("custom")}
    assert ("mid", "inner", "leaf") in paths
    assert trace.result.data["verdict"] == "ok"
