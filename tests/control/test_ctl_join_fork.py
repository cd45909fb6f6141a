"""Issue 3 — ``JoinStarved``; fork and time travel (``store.fork``, ``history``, resume from
an earlier checkpoint id)."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    CheckpointNotFound,
    Graph,
    GraphRuntime,
    JoinStarved,
    Reducer,
    VirtualClock,
)

pytestmark = pytest.mark.anyio


class S(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []
    n: int = 0


def step(name: str, calls: list[str]) -> Any:
    def fn(s: S) -> dict[str, Any]:
        calls.append(name)
        return {"log": [name], "n": s.n + 1}

    return fn


def logger(name: str, calls: list[str]) -> Any:
    def fn(s: S) -> dict[str, Any]:
        calls.append(name)
        return {"log": [name]}

    return fn


# ---------------------------------------------------------------- JoinStarved


async def test_join_starved_names_the_join_and_missing_sources() -> None:
    calls: list[str] = []
    g = Graph("starve", S)
    g.node("a", step("a", calls))
    g.node("b", step("b", calls))
    g.node("c", step("c", calls))
    g.node("j", step("j", calls))
    g.edge(START, "a")
    g.branch("a", lambda s: ["b"], ["b", "c"])  # never takes c
    g.edge(["b", "c"], "j")
    g.edge("j", END)
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    trace = await rt.atrace(g.compile(), {})

    result = trace.result
    assert result.status == "failed"
    err = result.error
    assert isinstance(err, JoinStarved)
    assert err.join == "j"
    assert err.missing == ["c"]
    assert err.arrived == ["b"]
    assert "'j'" in str(err)
    assert "'c'" in str(err)
    assert calls == ["a", "b"]
    assert [e.error_type for e in trace.events if e.type == "error"] == ["JoinStarved"]
    assert trace.events[-1].type == "run_end"
    assert trace.events[-1].status == "failed"
    assert rt.run_record(result.run_id).error["error_type"] == "JoinStarved"


async def test_join_fed_by_all_sources_runs_once() -> None:
    calls: list[str] = []
    g = Graph("join", S)
    for name in "abcj":
        g.node(name, logger(name, calls))
    g.edge(START, "a")
    g.branch("a", lambda s: ["b", "c"], ["b", "c"])
    g.edge(["b", "c"], "j")
    g.edge("j", END)
    result = await GraphRuntime(clock=VirtualClock(), seed=0).ainvoke(g.compile(), {})

    assert result.status == "completed"
    assert calls.count("j") == 1
    assert result.data["log"] == ["a", "b", "c", "j"]


# ---------------------------------------------------------------- fork and time travel


def chain(calls: list[str]) -> Any:
    g = Graph("chain", S)
    for name in "abc":
        g.node(name, step(name, calls))
    g.edge(START, "a")
    g.edge("a", "b")
    g.edge("b", "c")
    g.edge("c", END)
    return g.compile()


async def test_history_lists_the_runs_checkpoints_oldest_first() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    trace = await rt.atrace(chain([]), {})
    run_id = trace.result.run_id

    history = await rt.history(run_id)

    saved = [e.checkpoint_id for e in trace.events if e.type == "checkpoint_saved"]
    assert [cp.id for cp in history] == saved
    assert len(history) >= 3
    assert all(cp.run_id == run_id for cp in history)
    assert [cp.state["log"] for cp in history][-1] == ["a", "b", "c"]
    assert history[-1].id == trace.result.checkpoint_id
    assert await rt.history("run-does-not-exist") == []


async def test_fork_with_patched_state_then_resume_the_fork() -> None:
    calls: list[str] = []
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    original = await rt.ainvoke(chain(calls), {})
    history = await rt.history(original.run_id)
    after_a = next(cp for cp in history if cp.state["log"] == ["a"])
    calls.clear()

    fork_run = await rt.store.fork(after_a.id, patch_state={"n": 100})

    assert isinstance(fork_run, str)
    assert fork_run != original.run_id
    forked = await rt.store.latest(fork_run)
    assert forked is not None
    assert forked.state == {"log": ["a"], "n": 100}
    assert forked.thread_id != original.thread_id

    resumed = await rt.aresume(fork_run)

    assert resumed.status == "completed"
    assert resumed.run_id == fork_run
    assert calls == ["b", "c"]  # continues from the fork point
    assert resumed.data == {"log": ["a", "b", "c"], "n": 102}
    # the original run is untouched
    latest = await rt.store.latest(original.run_id)
    assert latest is not None
    assert latest.state == {"log": ["a", "b", "c"], "n": 3}
    assert [cp.id for cp in await rt.history(original.run_id)] == [cp.id for cp in history]


async def test_fork_resumed_by_a_fresh_runtime_given_the_graph() -> None:
    calls: list[str] = []
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    graph = chain(calls)
    original = await rt.ainvoke(graph, {})
    first_cp = (await rt.history(original.run_id))[0]
    fork_run = await rt.store.fork(first_cp.id)
    calls.clear()

    fresh = GraphRuntime(store=rt.store, clock=VirtualClock(), seed=1)
    resumed = await fresh.aresume(fork_run, graph=graph)

    assert resumed.status == "completed"
    assert calls == ["a", "b", "c"]
    assert resumed.data == original.data


async def test_resume_from_an_earlier_checkpoint_id_time_travels() -> None:
    calls: list[str] = []
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    original = await rt.ainvoke(chain(calls), {})
    history = await rt.history(original.run_id)
    after_a = next(cp for cp in history if cp.state["log"] == ["a"])
    calls.clear()

    trace = await rt.aresume_trace(after_a.id)

    assert calls == ["b", "c"]
    assert trace.events[0].type == "run_start"
    assert trace.events[0].resumed_from == after_a.id
    assert trace.result.status == "completed"
    assert trace.result.data == original.data
    # the new checkpoints descend from the one resumed from
    new = [cp for cp in await rt.history(original.run_id) if cp.id not in {h.id for h in history}]
    assert new
    assert new[0].parent_id == after_a.id


async def test_forking_a_missing_checkpoint_is_checkpoint_not_found() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    await rt.ainvoke(chain([]), {})
    with pytest.raises(CheckpointNotFound) as info:
        await rt.store.fork("cp-missing-1", patch_state={"n": 1})
    assert "cp-missing-1" in str(info.value)


async def test_resuming_an_unknown_id_is_checkpoint_not_found() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    with pytest.raises(CheckpointNotFound):
        await rt.aresume("run-unknown")
    with pytest.raises(CheckpointNotFound):
        await rt.aresume("cp-unknown-3")


def test_time_travel_numbers_its_events_after_the_whole_log() -> None:
    """C10: a run's log has one event per seq, also after a time-travel resume (the durable
    store would otherwise overwrite the original continuation's events)."""
    import anyio
    from pydantic import BaseModel

    from pytest_graphflow import (
        END,
        START,
        Graph,
        GraphRuntime,
        SQLiteCheckpointStore,
        VirtualClock,
    )

    class N(BaseModel):
        n: int = 0

    g = Graph("travel", N)
    g.node("a", lambda s: {"n": s.n + 1}).node("b", lambda s: {"n": s.n + 10})
    g.edge(START, "a").edge("a", "b").edge("b", END)
    graph = g.compile()
    store = SQLiteCheckpointStore(":memory:")
    runtime = GraphRuntime(store, clock=VirtualClock(), seed=3)

    first = runtime.trace(graph, {})
    after_a = next(cp for cp in anyio.run(runtime.history, first.result.run_id)
                   if cp.node_id == "a")
    again = runtime.resume_trace(after_a.id)

    assert again.result.data == {"n": 11}
    assert again.events[0].seq == first.events[-1].seq + 1
    logged = anyio.run(store.events, first.result.run_id)
    seqs = [e["seq"] for e in logged]
    assert seqs == sorted(set(seqs))
    assert len(logged) == len(first.events) + len(again.events)
