"""Issue 3 — budgets (seed 004): ``max_supersteps`` -> ``SuperstepLimit``, a run ``timeout``
on the runtime's clock -> ``RunTimedOut``; both resumable with a new budget."""

from __future__ import annotations

import operator
import time
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphflowError,
    GraphRuntime,
    InvalidArgument,
    Reducer,
    RunTimedOut,
    SuperstepLimit,
    VirtualClock,
)

pytestmark = pytest.mark.anyio


class S(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []
    n: int = 0


def loop_graph() -> Any:
    g = Graph("loop", S)
    g.node("loop", lambda s: {"n": s.n + 1})
    g.edge(START, "loop")
    g.branch("loop", lambda s: "again" if s.n < 20 else "done", {"again": "loop", "done": END})
    return g.compile()


async def test_superstep_limit_names_scheduled_nodes_and_resumes_with_bigger_budget() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    trace = await rt.atrace(loop_graph(), {}, max_supersteps=5)

    result = trace.result
    assert result.status == "failed"
    err = result.error
    assert isinstance(err, SuperstepLimit)
    assert err.scheduled == ["loop"]
    assert err.limit == 5
    assert "loop" in str(err)
    assert "5" in str(err)
    assert result.data["n"] == 5
    assert [e.error_type for e in trace.events if e.type == "error"] == ["SuperstepLimit"]
    assert trace.events[-1].type == "run_end"
    assert trace.events[-1].status == "failed"
    with pytest.raises(SuperstepLimit):
        result.raise_for_status()

    resumed = await rt.aresume(result.run_id, max_supersteps=100)
    assert resumed.status == "completed"
    assert resumed.data["n"] == 20
    assert resumed.run_id == result.run_id


async def test_superstep_limit_from_runtime_default_names_every_scheduled_node() -> None:
    g = Graph("fan", S)
    g.node("a", lambda s: {"n": 1})
    g.node("b", lambda s: {"log": ["b"]})
    g.node("c", lambda s: {"log": ["c"]})
    g.edge(START, "a")
    g.edge("a", ["b", "c"])
    g.edge("b", END)
    g.edge("c", END)
    rt = GraphRuntime(clock=VirtualClock(), seed=0, max_supersteps=1)
    result = await rt.ainvoke(g.compile(), {})

    assert result.status == "failed"
    assert isinstance(result.error, SuperstepLimit)
    assert result.error.scheduled == ["b", "c"]
    assert "'b'" in str(result.error)
    assert "'c'" in str(result.error)

    resumed = await rt.aresume(result.run_id, max_supersteps=10)
    assert resumed.status == "completed"
    assert resumed.data == {"log": ["b", "c"], "n": 1}


def timeout_graph(calls: list[str]) -> Any:
    def pre(s: S) -> dict[str, Any]:
        calls.append("pre")
        return {"n": 1}

    async def slow(s: S) -> dict[str, Any]:
        calls.append("slow")
        await anyio.sleep(100)
        return {"log": ["slow"]}

    async def fast(s: S) -> dict[str, Any]:
        calls.append("fast")
        await anyio.sleep(1)
        return {"log": ["fast"]}

    g = Graph("timeout", S)
    g.node("pre", pre)
    g.node("slow", slow)
    g.node("fast", fast)
    g.edge(START, "pre")
    g.edge("pre", ["slow", "fast"])
    g.edge("slow", END)
    g.edge("fast", END)
    return g.compile()


async def test_timeout_on_virtual_clock_then_resume_with_new_budget() -> None:
    calls: list[str] = []
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    t0 = time.perf_counter()
    trace = await rt.atrace(timeout_graph(calls), {}, timeout=10)
    real = time.perf_counter() - t0

    result = trace.result
    assert result.status == "failed"
    assert isinstance(result.error, RunTimedOut)
    assert result.error.run_id == result.run_id
    assert rt.clock.elapsed == 10.0  # measured on the virtual clock
    assert real < 5.0  # a generous bound for loaded machines: a real hour cannot pass
    assert sorted(calls) == ["fast", "pre", "slow"]
    assert "RunTimedOut" in [e.error_type for e in trace.events if e.type == "error"]
    # the checkpoint left keeps the finished task's result
    cp = await rt.store.latest(result.run_id)
    assert cp is not None
    assert [o.node for o in cp.completed.values()] == ["fast"]

    resumed = await rt.aresume_trace(result.run_id, timeout=1000)

    assert resumed.result.status == "completed"
    assert resumed.result.data == {"log": ["slow", "fast"], "n": 1}
    assert calls.count("pre") == 1
    assert calls.count("fast") == 1
    assert calls.count("slow") == 2
    fast_end = [e for e in resumed.events if e.type == "node_end" and e.node == "fast"]
    assert len(fast_end) == 1
    assert fast_end[0].replayed is True
    assert rt.clock.elapsed == 110.0


async def test_resume_under_the_same_budget_times_out_again_without_rerunning() -> None:
    calls: list[str] = []
    rt = GraphRuntime(clock=VirtualClock(), seed=0, timeout=10)
    first = await rt.ainvoke(timeout_graph(calls), {})
    again = await rt.aresume(first.run_id)

    assert isinstance(first.error, RunTimedOut)
    assert isinstance(again.error, RunTimedOut)
    assert calls.count("fast") == 1
    assert calls.count("pre") == 1
    assert calls.count("slow") == 2
    done = await rt.aresume(first.run_id, timeout=500)
    assert done.status == "completed"
    assert calls.count("fast") == 1


BAD_BUDGETS = [
    {"max_supersteps": 0},
    {"max_supersteps": -3},
    {"max_supersteps": 1.5},
    {"max_supersteps": True},
    {"max_supersteps": "10"},
    {"timeout": 0},
    {"timeout": -1},
    {"timeout": "10"},
    {"timeout": True},
    {"timeout": float("nan")},
]


@pytest.mark.parametrize("kwargs", BAD_BUDGETS, ids=repr)
def test_bad_budget_in_runtime_constructor(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        GraphRuntime(clock=VirtualClock(), seed=0, **kwargs)


@pytest.mark.parametrize("kwargs", BAD_BUDGETS, ids=repr)
async def test_bad_budget_per_run(kwargs: dict[str, Any]) -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    graph = loop_graph()
    with pytest.raises(InvalidArgument):
        await rt.ainvoke(graph, {}, **kwargs)
    with pytest.raises(InvalidArgument):
        rt.stream(graph, {}, **kwargs)
    paused = await rt.ainvoke(graph, {}, max_supersteps=2)
    with pytest.raises(InvalidArgument):
        await rt.aresume(paused.run_id, **kwargs)


async def test_infinite_timeout_is_no_limit_or_invalid_argument() -> None:
    # inf is > 0: it either means "no limit" or is refused as a caller error; it must not
    # surface as an arithmetic error from inside the run.
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    try:
        result = await rt.ainvoke(loop_graph(), {}, timeout=float("inf"))
    except InvalidArgument:
        return
    assert result.status == "completed"


@pytest.mark.parametrize("option", ["max_steps", "deadline", "recursion_limit"])
async def test_unknown_run_options_are_invalid_argument(option: str) -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    graph = loop_graph()
    with pytest.raises(InvalidArgument) as info:
        await rt.ainvoke(graph, {}, **{option: 1})
    assert option in str(info.value)
    with pytest.raises(InvalidArgument):
        rt.stream(graph, {}, **{option: 1})
    with pytest.raises(InvalidArgument):
        await rt.start(graph, {}, **{option: 1})
    paused = await rt.ainvoke(graph, {}, max_supersteps=2)
    with pytest.raises(InvalidArgument):
        await rt.aresume(paused.run_id, **{option: 1})
    assert issubclass(InvalidArgument, GraphflowError)


def test_unknown_run_option_sync(anyio_backend: str) -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0, backend=anyio_backend)
    with pytest.raises(InvalidArgument):
        rt.invoke(loop_graph(), {}, budget=3)
