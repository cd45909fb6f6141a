"""FaultySaver: FaultyStore's rules over LangGraph checkpoint savers, through harness runs."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from graphs import approval, fan_out
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from pytest_graphflow import VirtualClock
from pytest_graphflow.errors import InvalidArgument, SimulatedCrash, StoreFault
from pytest_graphflow.langgraph import FaultySaver, LangGraphHarness, check_invariants

CLEAN = {"log": ["a", "b", "c", "join"]}


def test_a_rejected_save_surfaces_as_langgraph_raises_it_and_the_run_resumes() -> None:
    saver = FaultySaver(InMemorySaver())
    boom = StoreFault("disk full")
    saver.reject_save(nth=3, error=boom)
    h = LangGraphHarness(fan_out(), saver=saver, durability="sync")

    with pytest.raises(StoreFault) as raised:
        h.trace({"log": []})
    assert raised.value is boom  # the rule's own exception, not wrapped
    rejected = [c for c in saver.calls if c.outcome == "rejected"]
    assert [(c.op, c.injected) for c in rejected] == [("put", True)]
    assert saver.last_rule.hits == 1
    # the leg has no run_end (the stream raised) and keeps every other invariant
    assert h.events[-1].type != "run_end"
    assert check_invariants(h.events, stream_raised=True) == []

    done = h.resume()
    assert done.result.status == "completed"
    assert done.result.data == CLEAN


def test_reject_save_by_predicate_on_the_checkpoint() -> None:
    saver = FaultySaver(InMemorySaver())
    saver.reject_save(when=lambda cp: cp.step == 1, times=1)
    h = LangGraphHarness(fan_out(), saver=saver, durability="sync")
    with pytest.raises(StoreFault, match="put #3"):
        h.trace({"log": []})
    assert h.resume().result.data == CLEAN


def test_fail_get_tuple_fails_the_start_of_the_run() -> None:
    saver = FaultySaver(InMemorySaver()).fail("get_tuple", 1, error=ConnectionError)
    h = LangGraphHarness(fan_out(), saver=saver)
    with pytest.raises(ConnectionError, match="get_tuple #1"):
        h.trace({"log": []})
    assert [c.outcome for c in saver.calls] == ["failed"]
    assert h.trace({"log": []}).result.data == CLEAN


def test_a_delay_waits_in_virtual_time() -> None:
    clock = VirtualClock()
    saver = FaultySaver(InMemorySaver()).delay("put", 30.0)
    trace = LangGraphHarness(fan_out(), saver=saver, clock=clock, durability="sync").trace(
        {"log": []})
    puts = [c for c in trace.store_log if c.op == "put"]
    assert [c.delay for c in puts] == [30.0] * 4
    assert clock.elapsed == 4 * 30.0
    assert trace.result.data == CLEAN


@pytest.mark.parametrize("phase", ["before", "after"])
def test_a_crash_kills_the_saver_and_a_fresh_harness_recovers(phase: str) -> None:
    saver = FaultySaver(InMemorySaver()).crash_at("put_writes", 2, phase=phase)
    h = LangGraphHarness(fan_out(), saver=saver)
    with pytest.raises(SimulatedCrash):
        h.trace({"log": []})
    assert saver.dead
    with pytest.raises(SimulatedCrash, match="reached nothing"):
        saver.get_tuple({"configurable": {"thread_id": h.thread_id}})
    assert saver.calls[-1].outcome == "dead"

    fresh = LangGraphHarness(fan_out(), saver=saver.inner, thread_id=h.thread_id)
    assert fresh.resume().result.data == CLEAN


def test_the_call_log_names_operations_threads_and_tasks() -> None:
    h = LangGraphHarness(approval())
    trace = h.trace({"log": []})
    ops = [c.op for c in trace.store_log]
    assert ops[0] == "get_tuple"
    assert {"put", "put_writes"} <= set(ops)
    writes = [c.args for c in trace.store_log if c.op == "put_writes"]
    assert all(f"thread {h.thread_id}" in args for args in writes)
    assert any("task __start__" in args for args in writes)
    assert any("task draft" in args and "branch:to:review" in args for args in writes)
    assert all(c.time is not None for c in trace.store_log)  # virtual clock bound
    assert "put" in h.saver.format_calls()


def test_a_sqlite_saver_thread_resumes_in_a_fresh_harness(tmp_path: Path) -> None:
    path = tmp_path / "agent.sqlite"
    first = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    h = LangGraphHarness(approval(), saver=first, thread_id="t-1")
    assert h.trace({"log": []}).result.status == "interrupted"

    # "another process": a new connection, a new harness
    second = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    again = LangGraphHarness(approval(), saver=second, thread_id="t-1")
    again.last = h.last
    assert again.resume("ok").result.data == {"log": ["draft"], "answer": "ok"}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(lambda: FaultySaver("not a saver"), "BaseCheckpointSaver",
                     id="inner-not-a-saver"),
        pytest.param(lambda: FaultySaver(InMemorySaver()).fail("claim"),
                     "no operation 'claim'", id="unknown-op"),
        pytest.param(lambda: FaultySaver(InMemorySaver()).fail("put", 0), "nth=0",
                     id="nth-zero"),
        pytest.param(lambda: FaultySaver(InMemorySaver()).delay("put", -1.0), "seconds=-1.0",
                     id="negative-delay"),
    ],
)
def test_bad_fault_rules_are_named(call: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        call()


@pytest.mark.parametrize(
    ("where", "message"),
    [
        pytest.param("after-its-loop-ended", "not running; open the saver in an async test",
                     id="loop-closed"),
        pytest.param("on-its-own-loop", "this thread's; await h.atrace", id="same-thread"),
    ],
)
def test_an_async_saver_with_no_loop_to_answer_is_refused(where: str, message: str,
                                                          tmp_path: Path) -> None:
    path = tmp_path / "agent.sqlite"

    async def open_saver() -> LangGraphHarness:
        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
            await saver.setup()
            h = LangGraphHarness(approval(), saver=saver)
            if where == "on-its-own-loop":  # a sync call would wait for this very loop
                with pytest.raises(InvalidArgument, match=message):
                    h.trace({"log": []})
            return h

    h = asyncio.run(open_saver())
    if where == "after-its-loop-ended":
        with pytest.raises(InvalidArgument, match=message):
            h.trace({"log": []})
    # refused before the run: no saver call, nothing stored
    assert h.saver.calls == []
    assert sqlite3.connect(path).execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)


def test_without_rules_the_saver_is_transparent() -> None:
    plain, wrapped = InMemorySaver(), FaultySaver(InMemorySaver())
    a = LangGraphHarness(fan_out(), saver=plain).trace({"log": []})
    b = LangGraphHarness(fan_out(), saver=wrapped).trace({"log": []})
    assert a.to_json() == b.to_json()
    assert all(c.outcome == "ok" for c in b.store_log)
