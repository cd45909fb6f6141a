"""Issue 3 — expansions: ``Expand(node, items)`` (seed 000, SPEC §1, C7)."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Expand,
    Graph,
    GraphRuntime,
    GraphValidationError,
    Reducer,
    UnknownRoute,
    VirtualClock,
)

pytestmark = pytest.mark.anyio

# Item "x" sleeps longest, "y" shortest: tasks finish in another order than the items.
SLEEPS = {"x": 3, "y": 1, "z": 2}


class S(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []
    n: int = 0
    total: int = 0


def build(calls: dict[str, Any], *, effect: str = "pure") -> Any:
    calls.setdefault("fan", 0)
    calls.setdefault("items", [])

    def fan(s: S) -> Expand:
        calls["fan"] += 1
        return Expand("work", ["x", "y", "z"], update={"n": s.n + 1})

    async def work(s: S, ctx: Any) -> dict[str, Any]:
        calls["items"].append((ctx.item, ctx.checkpoint_id_before, ctx.task_id, ctx.step))
        await anyio.sleep(SLEEPS[ctx.item])
        return {"log": [ctx.item]}

    def after(s: S) -> dict[str, Any]:
        return {"total": len(s.log)}

    g = Graph("expand", S)
    g.node("fan", fan, effect=effect, destinations=["work"])  # type: ignore[arg-type]
    g.node("work", work)
    g.node("after", after)
    g.edge(START, "fan")
    g.edge("work", "after")
    g.edge("after", END)
    return g.compile()


@pytest.mark.parametrize("seed", [0, 1, 7])
async def test_one_task_per_item_each_sees_its_item_patches_merge_in_item_order(
    seed: int,
) -> None:
    calls: dict[str, Any] = {}
    rt = GraphRuntime(clock=VirtualClock(), seed=seed)
    trace = await rt.atrace(build(calls), {})

    assert trace.result.status == "completed"
    # one task per item, each reading its own item, all in the same (next) superstep
    assert sorted(i for i, *_ in calls["items"]) == ["x", "y", "z"]
    assert len({tid for _, _, tid, _ in calls["items"]}) == 3
    assert {step for *_, step in calls["items"]} == {1}
    starts = [e for e in trace.events if e.type == "node_start" and e.node == "work"]
    assert len(starts) == 3
    assert len({e.task_id for e in starts}) == 3
    # patches merge in item order, whatever order the tasks finished in
    assert trace.result.data["log"] == ["x", "y", "z"]
    assert [e.patch for e in trace.events if e.type == "node_end" and e.node == "work"] == [
        {"log": ["x"]}, {"log": ["y"]}, {"log": ["z"]},
    ]
    # Expand's own update applied; the expanded tasks ran in parallel (3 s, not 6 s)
    assert trace.result.data["n"] == 1
    assert trace.result.data["total"] == 3
    assert rt.clock.elapsed == 3.0
    # the edge fan -> work is visible
    assert any(e.type == "edge_transition" and e.source == "fan" and e.target == "work"
               for e in trace.events)


@pytest.mark.parametrize("effect", ["pure", "external"])
async def test_checkpoint_before_expansion_does_not_list_expanding_node_as_completed(
    effect: str,
) -> None:
    calls: dict[str, Any] = {}
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    trace = await rt.atrace(build(calls, effect=effect), {})

    befores = {before for _, before, _, _ in calls["items"]}
    assert len(befores) == 1
    (before_id,) = befores
    assert before_id is not None
    saved = [e.checkpoint_id for e in trace.events if e.type == "checkpoint_saved"]
    assert before_id in saved
    # saved before any expanded task started
    seq_saved = next(e.seq for e in trace.events
                     if e.type == "checkpoint_saved" and e.checkpoint_id == before_id)
    first_work = min(e.seq for e in trace.events if e.type == "node_start" and e.node == "work")
    assert seq_saved < first_work

    cp = await rt.store.get(before_id)
    assert cp is not None
    assert cp.run_id == trace.result.run_id
    fan_task = next(e.task_id for e in trace.events if e.type == "node_start" and e.node == "fan")
    assert "fan" not in cp.visited
    assert fan_task not in cp.completed
    assert all(o.node != "fan" for o in cp.completed.values())
    assert "fan" in [t.node for t in cp.tasks]  # the expanding node is still to run
    assert cp.state["n"] == 0  # the expanding node's update is not in it


@pytest.mark.parametrize("effect", ["pure", "external"])
async def test_resume_from_checkpoint_before_expansion_reruns_expanding_node(
    effect: str,
) -> None:
    calls: dict[str, Any] = {}
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    first = await rt.ainvoke(build(calls, effect=effect), {})
    before_id = calls["items"][0][1]
    assert calls["fan"] == 1

    trace = await rt.aresume_trace(before_id)

    assert calls["fan"] == 2  # re-run, not replayed, whatever its effect class
    fan_end = [e for e in trace.events if e.type == "node_end" and e.node == "fan"]
    assert len(fan_end) == 1
    assert fan_end[0].replayed is False
    assert len([e for e in trace.events if e.type == "node_start" and e.node == "work"]) == 3
    assert trace.result.status == "completed"
    assert trace.result.data == first.data


async def test_expand_of_unknown_node_fails_with_unknown_route() -> None:
    def fan(s: S) -> Expand:
        return Expand("nope", [1, 2])

    g = Graph("bad-expand", S)
    g.node("fan", fan, destinations=["work"])
    g.node("work", lambda s: None)
    g.edge(START, "fan")
    g.edge("work", END)
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    trace = await rt.atrace(g.compile(), {})

    assert trace.result.status == "failed"
    err = trace.result.error
    cause = err if isinstance(err, UnknownRoute) else getattr(err, "__cause__", None)
    assert isinstance(cause, UnknownRoute), repr(err)
    assert cause.node == "fan"
    assert cause.target == "nope"
    assert "nope" in str(err)
    assert not [e for e in trace.events if e.type == "node_start" and e.node == "work"]
    assert [e.node for e in trace.events if e.type == "error"] == ["fan"]


async def test_expand_of_node_not_in_destinations_fails_with_unknown_route() -> None:
    def fan(s: S) -> Expand:
        return Expand("other", [1])

    g = Graph("undeclared-expand", S)
    g.node("fan", fan, destinations=["work"])
    g.node("work", lambda s: None)
    g.node("other", lambda s: None)
    g.edge(START, "fan")
    g.edge("fan", "other")
    g.edge("work", END)
    g.edge("other", END)
    result = await GraphRuntime(clock=VirtualClock(), seed=0).ainvoke(g.compile(), {})

    assert result.status == "failed"
    err = result.error
    cause = err if isinstance(err, UnknownRoute) else getattr(err, "__cause__", None)
    assert isinstance(cause, UnknownRoute)
    assert cause.target == "other"


def test_destinations_naming_unknown_node_fail_validation() -> None:
    g = Graph("bad-destinations", S)
    g.node("fan", lambda s: None, destinations=["ghost"])
    g.edge(START, "fan")
    g.edge("fan", END)
    with pytest.raises(GraphValidationError) as info:
        g.compile()
    assert any("ghost" in p and "fan" in p for p in info.value.problems)
