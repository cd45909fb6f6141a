"""Issue 3 — ``stream(mode=...)`` views of seed 001 (updates, values, custom/tokens, debug,
terminal interrupt/final) and copies: mutating an event or item changes nothing in the run."""

from __future__ import annotations

import gc
import operator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    InvalidArgument,
    Reducer,
    Resume,
    StreamEvent,
    VirtualClock,
    emit,
    interrupt,
)

pytestmark = pytest.mark.anyio


class S(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []
    n: int = 0
    d: dict[str, list[int]] = {}


def a(s: S, ctx: Any) -> dict[str, Any]:
    value = {"k": [1]}
    emit(value)
    value["k"].append(2)  # after emit: the emitted copy must not see this
    ctx.emit("tok-1", channel="tokens")
    emit("tok-2", channel="tokens")
    return {"log": ["a"], "d": {"k": [1]}}


def b(s: S) -> dict[str, Any]:
    return {"log": ["b"], "n": 1}


def c(s: S) -> dict[str, Any]:
    return {"log": ["c"]}


def ask(s: S) -> dict[str, Any]:
    answer = interrupt({"q": "n?"}, id="ask")
    return {"n": answer}


def build(with_interrupt: bool) -> Any:
    g = Graph("modes", S)
    g.node("a", a)
    g.node("b", b)
    g.node("c", c)
    g.edge(START, "a")
    g.edge("a", ["b", "c"])
    if with_interrupt:
        g.node("ask", ask, effect="human")
        g.edge(["b", "c"], "ask")
        g.edge("ask", END)
    else:
        g.edge("b", END)
        g.edge("c", END)
    return g.compile()


def field(data: Any, name: str) -> Any:
    """Read a terminal item's data field, whether it is an object or a mapping."""
    return data[name] if isinstance(data, dict) else getattr(data, name)


async def collect(rt: GraphRuntime, graph: Any, mode: str) -> list[Any]:
    return [item async for item in rt.stream(graph, {}, mode=mode)]


async def test_updates_mode_gives_each_tasks_update() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    items = await collect(rt, build(False), "updates")

    assert all(isinstance(i, StreamEvent) for i in items)
    assert [i.mode for i in items] == ["updates"] * 3 + ["final"]
    ups = items[:3]
    assert [(i.node, i.data, i.step) for i in ups] == [
        ("a", {"log": ["a"], "d": {"k": [1]}}, 0),
        ("b", {"log": ["b"], "n": 1}, 1),
        ("c", {"log": ["c"]}, 1),
    ]
    run_id = ups[0].run_id
    assert all(i.run_id == run_id and i.task_id and i.task_id.startswith("task-") for i in ups)
    # checkpoint_id: the checkpoint to load the superstep's state at
    history = {cp.id: cp for cp in await rt.history(run_id)}
    assert history[ups[0].checkpoint_id].state["log"] == ["a"]
    assert ups[1].checkpoint_id == ups[2].checkpoint_id
    assert history[ups[1].checkpoint_id].state["log"] == ["a", "b", "c"]


async def test_values_mode_gives_state_after_each_superstep() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    items = await collect(rt, build(False), "values")

    assert [i.mode for i in items] == ["values", "values", "final"]
    assert [i.data for i in items[:2]] == [
        {"log": ["a"], "n": 0, "d": {"k": [1]}},
        {"log": ["a", "b", "c"], "n": 1, "d": {"k": [1]}},
    ]
    assert [i.step for i in items[:2]] == [0, 1]
    assert all(i.node is None and i.task_id is None for i in items)
    final = items[-1]
    assert field(final.data, "state") == items[1].data
    assert field(final.data, "thread_id").startswith("thread-")
    assert final.checkpoint_id == (await rt.store.latest(final.run_id)).id


async def test_custom_mode_gives_emitted_values_and_tokens() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    items = await collect(rt, build(False), "custom")

    assert [(i.mode, i.data, i.node) for i in items[:-1]] == [
        ("custom", {"k": [1]}, "a"),
        ("tokens", "tok-1", "a"),
        ("tokens", "tok-2", "a"),
    ]
    assert all(i.task_id is not None and i.step == 0 for i in items[:-1])
    assert items[-1].mode == "final"


async def test_debug_mode_covers_every_event_and_state_merges() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    graph = build(False)
    events = await collect(rt, graph, "events")
    rt2 = GraphRuntime(clock=VirtualClock(), seed=0)
    items = await collect(rt2, graph, "debug")

    debug = [i for i in items if i.mode == "debug"]
    as_events = [i.data for i in debug if i.data.get("type") != "state_merge"]
    assert as_events == [e.model_dump(mode="json") for e in events]
    merges = [i for i in debug if i.data.get("type") == "state_merge"]
    assert [m.data["state"]["log"] for m in merges] == [["a"], ["a", "b", "c"]]
    assert items[-1].mode == "final"


async def test_terminal_interrupt_item_carries_state_thread_and_interrupts() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    items = await collect(rt, build(True), "updates")

    last = items[-1]
    assert last.mode == "interrupt"
    assert last.node is None
    assert last.task_id is None
    assert field(last.data, "state")["log"] == ["a", "b", "c"]
    assert field(last.data, "thread_id").startswith("thread-")
    interrupts = field(last.data, "interrupts")
    (key,) = interrupts
    assert interrupts[key].key == key
    assert interrupts[key].node == "ask"
    assert interrupts[key].payload == {"q": "n?"}
    assert last.checkpoint_id == (await rt.store.latest(last.run_id)).id

    after = [i async for i in rt.resume_stream(last.run_id, Resume(7), mode="values")]
    assert after[-1].mode == "final"
    assert field(after[-1].data, "state")["n"] == 7


async def test_terminal_items_data_have_seed_001_attributes() -> None:
    # seed 001: FinalEventData(state, thread_id), InterruptEventData(state, thread_id,
    # interrupts) — read as attributes.
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    final = (await collect(rt, build(False), "values"))[-1]
    assert final.data.state["log"] == ["a", "b", "c"]
    assert final.data.thread_id.startswith("thread-")
    paused = (await collect(rt, build(True), "values"))[-1]
    assert paused.data.state["log"] == ["a", "b", "c"]
    assert len(paused.data.interrupts) == 1


async def test_trace_views_match_stream_modes() -> None:
    graph = build(False)
    trace = await GraphRuntime(clock=VirtualClock(), seed=0).atrace(graph, {})
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    ups = [i for i in await collect(rt, graph, "updates") if i.mode == "updates"]
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    vals = [i for i in await collect(rt, graph, "values") if i.mode == "values"]

    assert [(u.node, u.data, u.task_id, u.step) for u in trace.events.updates()] == [
        (u.node, u.data, u.task_id, u.step) for u in ups
    ]
    assert trace.events.values() == [v.data for v in vals]


def test_unknown_stream_mode_is_invalid_argument() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    with pytest.raises(InvalidArgument) as info:
        rt.stream(build(False), {}, mode="tokens")  # type: ignore[arg-type]
    assert "mode" in str(info.value)
    del info
    gc.collect()  # a half-built stream must not complain when collected


# ---------------------------------------------------------------- copies


def _poison(obj: Any) -> None:
    """Mutate every list/dict reachable from ``obj`` (state, patch and data shapes)."""
    if isinstance(obj, dict):
        for value in list(obj.values()):
            _poison(value)
        obj["poison"] = ["x"]
    elif isinstance(obj, list):
        for value in obj:
            _poison(value)
        obj.append("HACK")


@pytest.mark.parametrize("mode", ["events", "updates", "values", "custom", "debug"])
async def test_mutating_streamed_items_changes_nothing(mode: str) -> None:
    graph = build(False)
    oracle = await GraphRuntime(clock=VirtualClock(), seed=0).ainvoke(graph, {})
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    stream = rt.stream(graph, {}, mode=mode)
    async for item in stream:
        if mode == "events":
            for name in ("patch", "state"):
                if getattr(item, name, None) is not None:
                    _poison(getattr(item, name))
        else:
            data = item.data
            if isinstance(data, (dict, list)):
                _poison(data)
            else:
                _poison(getattr(data, "state", None))
    result = stream.result()

    assert result.data == oracle.data
    assert result.state.model_dump(mode="json") == oracle.data
    history = await rt.history(result.run_id)
    assert history[-1].state == oracle.data
    assert all("poison" not in cp.state and "HACK" not in cp.state["log"] for cp in history)


async def test_mutating_a_node_end_patch_does_not_change_what_is_replayed() -> None:
    def ext(s: S) -> dict[str, Any]:
        return {"log": ["ext"]}

    def pause(s: S) -> dict[str, Any]:
        interrupt("go?", id="go")
        return {"log": ["pause"]}

    g = Graph("replay-copy", S)
    g.node("ext", ext, effect="external")
    g.node("pause", pause)
    g.edge(START, ["ext", "pause"])
    g.edge("ext", END)
    g.edge("pause", END)
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    run_id = None
    async for event in rt.stream(g.compile(), {}):
        run_id = event.run_id
        if event.type == "node_end":
            event.patch["log"].append("HACK")
    assert run_id is not None

    result = await rt.aresume(run_id, Resume(True))

    assert result.data["log"] == ["ext", "pause"]


async def test_mutating_run_end_state_does_not_change_result_or_store() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    stream = rt.stream(build(False), {})
    async for event in stream:
        if event.type == "run_end":
            event.state["log"].append("HACK")
    result = stream.result()

    assert result.data["log"] == ["a", "b", "c"]
    latest = await rt.store.latest(result.run_id)
    assert latest is not None
    assert latest.state["log"] == ["a", "b", "c"]
