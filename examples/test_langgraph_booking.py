"""Tests of a LangGraph flow with a subgraph that interrupts, booking ids from ``uuid4()`` in
node code and ``datetime.now()`` stamps (``langgraph_agent/booking.py``), unchanged.

Under the harness, ``uuid4()`` in node code draws from the run's seeded stream and the clock
is virtual: the same seed gives the same booking id and the same bytes, and the two-hour
webhook wait takes no real time.
"""

from __future__ import annotations

import sqlite3

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph_agent.booking import build_booking, trip

from pytest_graphflow.langgraph import (
    LangGraphHarness,
    check_crash_recovery,
    check_determinism,
    check_invariants,
)

PAY = {"book": "pay"}  # the subgraph's interrupt is answered at its node in the parent


def test_the_guest_confirms_inside_the_booking_subgraph(graph_runtime):
    flow = graph_runtime.langgraph(build_booking())
    paused = flow.trace(trip())
    assert paused.result.status == "interrupted"
    (ask,) = paused.result.interrupts.values()
    assert ask.node == "book"
    assert ask.payload["booking_id"].startswith("BK-")
    assert ask.payload["price"] == 360

    # what LangGraph's get_state(config, subgraphs=True) gives: paused inside the subgraph
    snapshot = flow.state(subgraphs=True)
    assert snapshot.next == ("book",)
    (task,) = snapshot.tasks
    assert task.state.next == ("pay",)
    assert task.state.values["booking_id"] == ask.payload["booking_id"]

    done = flow.resume("pay")
    assert done.result.status == "completed"
    assert done.result.data["log"] == ["quoted Ana", f"{ask.payload['booking_id']} confirmed"]
    # held at the start of the run, notified after the two-hour webhook, in virtual time
    assert done.result.data["held_at"] == "2025-01-01T00:00:00+00:00"
    assert done.result.data["notified_at"] == "2025-01-01T02:00:00+00:00"
    assert check_invariants(flow.events) == []


def test_a_uuid4_booking_id_is_the_seeds():
    first = LangGraphHarness(build_booking(), seed=7)
    again = LangGraphHarness(build_booking(), seed=7)
    other = LangGraphHarness(build_booking(), seed=8)
    ids = [next(iter(h.trace(trip()).result.interrupts.values())).payload["booking_id"]
           for h in (first, again, other)]
    assert ids[0] == ids[1] != ids[2]


def test_same_seed_same_bytes_through_the_subgraph():
    assert check_determinism(build_booking(), trip(), answers=PAY) == []


def test_a_crash_at_any_checkpointer_operation_recovers():
    # notified_at records when the guest was told: later after a crash, as in production
    assert check_crash_recovery(build_booking(), trip(), answers=PAY,
                                ignore=["notified_at"]) == []


@pytest.fixture
def anyio_backend():
    return "asyncio"  # aiosqlite runs on asyncio


async def _rows(path):
    db = sqlite3.connect(path)
    try:
        return [db.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3, 4").fetchall()
                for t in ("checkpoints", "writes")]
    finally:
        db.close()


@pytest.mark.anyio
async def test_a_restart_between_pause_and_payment_stores_what_one_run_stores(tmp_path):
    # production's saver: AsyncSqliteSaver on a file; the process stops while the guest decides
    restarted = tmp_path / "restarted.db"
    async with AsyncSqliteSaver.from_conn_string(str(restarted)) as saver:
        paused = await LangGraphHarness(build_booking(), seed=4, saver=saver).atrace(trip())
        assert paused.result.status == "interrupted"
    async with AsyncSqliteSaver.from_conn_string(str(restarted)) as saver:
        fresh = LangGraphHarness(build_booking(), seed=4, saver=saver)
        (ask,) = await fresh.apending_interrupts()
        done = await fresh.aresume("pay")
        assert done.result.status == "completed"

    straight = tmp_path / "straight.db"
    async with AsyncSqliteSaver.from_conn_string(str(straight)) as saver:
        h = LangGraphHarness(build_booking(), seed=4, saver=saver)
        await h.atrace(trip())
        whole = await h.aresume("pay")

    assert done.result.data == whole.result.data
    assert done.result.data["log"][-1] == f"{ask.payload['booking_id']} confirmed"
    assert await _rows(restarted) == await _rows(straight)
