"""Issue 3 — ``GraphResult`` fields (seed 001) and run records (seed 002): status, graph
identity, revision, timing, failure details, from ``runtime.run_record(run_id)``."""

from __future__ import annotations

import operator
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    CheckpointNotFound,
    Graph,
    GraphflowError,
    GraphRuntime,
    NodeFailed,
    Reducer,
    Resume,
    VirtualClock,
    interrupt,
)

pytestmark = pytest.mark.anyio

T0 = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


class S(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []
    n: int = 0


async def sleepy(s: S) -> dict[str, Any]:
    await anyio.sleep(7)
    return {"log": ["sleepy"]}


def build(kind: str = "ok") -> Any:
    def last(s: S) -> dict[str, Any]:
        if kind == "fail":
            raise ValueError("boom in last")
        if kind == "ask":
            return {"n": interrupt({"q": 1}, id="q")}
        return {"n": 1}

    g = Graph("results", S)
    g.node("first", lambda s: {"log": ["first"]})
    g.node("sleepy", sleepy)
    g.node("last", last, effect="human" if kind == "ask" else "pure")
    g.edge(START, "first")
    g.edge("first", "sleepy")
    g.edge("sleepy", "last")
    g.edge("last", END)
    return g.compile()


async def test_completed_result_fields() -> None:
    rt = GraphRuntime(clock=VirtualClock(start=T0), seed=0)
    trace = await rt.atrace(build(), {})
    result = trace.result

    assert result.status == "completed"
    assert isinstance(result.state, S)
    assert result.state == S(log=["first", "sleepy"], n=1)
    assert result.data == {"log": ["first", "sleepy"], "n": 1}
    assert result.run_id == trace.events[0].run_id
    assert result.run_id.startswith("run-")
    assert result.thread_id == trace.events[0].thread_id
    assert result.thread_id.startswith("thread-")
    assert result.step == 2  # supersteps 0, 1, 2
    assert result.step == trace.events[-1].step
    saved = [e.checkpoint_id for e in trace.events if e.type == "checkpoint_saved"]
    assert result.checkpoint_id == saved[-1]
    assert result.checkpoint_id == (await rt.store.latest(result.run_id)).id
    assert result.interrupts == {}
    assert result.error is None
    assert result.raise_for_status() is result


async def test_result_data_is_a_copy() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    result = await rt.ainvoke(build(), {})
    result.data["log"].append("HACK")
    latest = await rt.store.latest(result.run_id)
    assert latest is not None
    assert latest.state["log"] == ["first", "sleepy"]


async def test_interrupted_result_fields() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    result = await rt.ainvoke(build("ask"), {}, thread_id="thread-mine")

    assert result.status == "interrupted"
    assert result.thread_id == "thread-mine"
    assert result.step == 2
    (key, pending), = result.interrupts.items()
    assert key == pending.key == f"{pending.task_id}:q"
    assert pending.node == "last"
    assert pending.id == "q"
    assert pending.payload == {"q": 1}
    assert result.error is None
    assert result.checkpoint_id == (await rt.store.latest(result.run_id)).id
    assert rt.run_record(result.run_id).status == "interrupted"

    done = await rt.aresume(result.run_id, Resume(5))
    assert done.status == "completed"
    assert done.data["n"] == 5
    assert done.run_id == result.run_id
    assert done.thread_id == "thread-mine"


async def test_failed_result_fields() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    result = await rt.ainvoke(build("fail"), {})

    assert result.status == "failed"
    assert isinstance(result.error, NodeFailed)
    assert result.error.node == "last"
    assert isinstance(result.error.__cause__, ValueError)
    assert result.data == {"log": ["first", "sleepy"], "n": 0}
    assert result.interrupts == {}
    assert result.checkpoint_id == (await rt.store.latest(result.run_id)).id
    with pytest.raises(NodeFailed):
        result.raise_for_status()


async def test_run_record_of_a_completed_run() -> None:
    rt = GraphRuntime(clock=VirtualClock(start=T0), seed=0)
    graph = build()
    result = await rt.ainvoke(graph, {})

    record = rt.run_record(result.run_id)
    assert record.run_id == result.run_id
    assert record.thread_id == result.thread_id
    assert record.status == "completed"
    assert record.graph_id == "results" == graph.graph_id
    assert record.revision == graph.revision
    assert record.started_at == T0
    assert record.updated_at == T0 + timedelta(seconds=7)  # timing on the runtime's clock
    assert record.error is None
    as_dict = record.as_dict()
    assert as_dict["status"] == "completed"
    assert as_dict["revision"] == graph.revision
    assert [r.run_id for r in rt.runs] == [result.run_id]


async def test_run_record_of_a_failed_run_has_failure_details() -> None:
    rt = GraphRuntime(clock=VirtualClock(start=T0), seed=0)
    result = await rt.ainvoke(build("fail"), {})

    record = rt.run_record(result.run_id)
    assert record.status == "failed"
    assert record.error is not None
    assert record.error["error_type"] == "NodeFailed"
    assert "boom in last" in record.error["message"]
    assert "last" in record.error["message"]
    assert record.updated_at == T0 + timedelta(seconds=7)


async def test_run_record_follows_a_resumed_run() -> None:
    rt = GraphRuntime(clock=VirtualClock(start=T0), seed=0)
    first = await rt.ainvoke(build("ask"), {})
    assert rt.run_record(first.run_id).status == "interrupted"
    await rt.aresume(first.run_id, Resume(1))

    record = rt.run_record(first.run_id)
    assert record.status == "completed"
    assert record.started_at == T0
    assert len(rt.runs) == 1  # still one run, not a new one per leg


async def test_run_records_list_runs_in_start_order() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    ids = [(await rt.ainvoke(build(), {})).run_id for _ in range(3)]
    assert len(set(ids)) == 3
    assert [r.run_id for r in rt.runs] == ids


def test_run_record_of_unknown_run_is_checkpoint_not_found() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    with pytest.raises(CheckpointNotFound) as info:
        rt.run_record("run-nope")
    assert "run-nope" in str(info.value)
    assert isinstance(info.value, GraphflowError)


def test_sync_invoke_returns_the_same_result(anyio_backend: str) -> None:
    rt = GraphRuntime(clock=VirtualClock(start=T0), seed=3, backend=anyio_backend)
    result = rt.invoke(build(), {})
    assert result.status == "completed"
    assert result.data == {"log": ["first", "sleepy"], "n": 1}
    assert rt.run_record(result.run_id).updated_at == T0 + timedelta(seconds=7)


def test_recover_continues_a_threads_incomplete_run_and_refuses_otherwise() -> None:
    """Seed 004: NothingToRecover — "recover was called on a thread with no incomplete
    execution"; a suspended thread is answered with resume (ThreadSuspended)."""
    from pydantic import BaseModel

    from pytest_graphflow import (
        END,
        START,
        Graph,
        GraphRuntime,
        NothingToRecover,
        ThreadSuspended,
        VirtualClock,
        interrupt,
    )

    class N(BaseModel):
        n: int = 0

    calls: list[str] = []

    def flaky(state: N) -> dict[str, int]:
        calls.append("flaky")
        if len(calls) == 1:
            raise ConnectionError("down")
        return {"n": state.n + 1}

    g = Graph("recoverable", N)
    g.node("flaky", flaky)
    g.edge(START, "flaky")
    g.edge("flaky", END)
    graph = g.compile()
    runtime = GraphRuntime(clock=VirtualClock(), seed=5)

    with pytest.raises(NothingToRecover, match="no checkpoint"):
        runtime.recover("t-1", graph=graph)
    failed = runtime.invoke(graph, {}, thread_id="t-1")
    assert failed.status == "failed"

    fresh = GraphRuntime(runtime.store, clock=VirtualClock(), seed=6)  # another process
    recovered = fresh.recover("t-1", graph=graph)
    assert (recovered.status, recovered.data, recovered.run_id) == (
        "completed", {"n": 1}, failed.run_id)
    with pytest.raises(NothingToRecover, match="no incomplete run"):
        fresh.recover("t-1", graph=graph)

    asks = Graph("asks", N)
    asks.node("ask", lambda s: {"n": interrupt("?", id="q")})
    asks.edge(START, "ask")
    asks.edge("ask", END)
    fresh.invoke(asks.compile(), {}, thread_id="t-2")
    with pytest.raises(ThreadSuspended, match="waiting for answers"):
        fresh.recover("t-2")
