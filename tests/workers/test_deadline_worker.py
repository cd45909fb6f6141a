"""A deadline survives a restart and fires in a worker process (issue 26: "unanswered it
takes the timeout route at exactly 3 days of virtual time, also when the process restarts in
between (SQLite and PostgreSQL worker)").

This process pauses the approval and exits its runtime; a real second process (a ``Worker``
with a virtual clock, ``graphflow_deadline_graphs.py``) starts a second before the deadline
and fires nothing; a third starts at the deadline and takes the timeout route. The events
the store recorded show the expiry at exactly 3 days of virtual time."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from graphflow_deadline_graphs import T0, THREE_DAYS, build
from pytest_graphflow import (
    GraphRuntime,
    InMemoryCheckpointStore,
    InvalidArgument,
    PostgresCheckpointStore,
    SQLiteCheckpointStore,
    VirtualClock,
    Worker,
)
from pytest_graphflow.invariants import check_invariants

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).parent.parent / "graphflow_deadline_graphs.py"


def worker(*args: str, at: timedelta) -> dict[str, Any]:
    """Run a worker process whose virtual clock starts at ``T0 + at``; its stats."""
    done = subprocess.run([sys.executable, str(SCRIPT), *args, (T0 + at).isoformat()],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    stats: dict[str, Any] = json.loads(done.stdout)
    return stats


@pytest.fixture(params=["sqlite", "postgres"])
def store_and_args(request: pytest.FixtureRequest, tmp_path: Path
                   ) -> tuple[Callable[[], Any], list[str]]:
    """How this process opens the store, and how a worker process is told to."""
    if request.param == "sqlite":
        path = tmp_path / "approvals.db"
        return (lambda: SQLiteCheckpointStore(path)), ["sqlite", str(path)]
    dsn: str = request.getfixturevalue("postgres_dsn")
    schema: str = request.getfixturevalue("fresh_pg_schema")
    return (lambda: PostgresCheckpointStore(dsn, schema=schema)), ["postgres", dsn, schema]


async def close(store: Any) -> None:
    aclose = getattr(store, "aclose", None)
    if aclose is not None:
        await aclose()
    else:
        store.close()


async def test_the_deadline_fires_in_a_worker_process_after_a_restart(
    store_and_args: tuple[Callable[[], Any], list[str]]
) -> None:
    open_store, args = store_and_args
    store = open_store()
    try:
        rt = GraphRuntime(store=store, clock=VirtualClock(start=T0), seed=3)
        paused = await rt.ainvoke(build(), {"amount": 900})
        assert paused.status == "interrupted"
    finally:
        await close(store)

    early = worker(*args, at=THREE_DAYS - timedelta(seconds=1))
    assert early == {"expired": 0, "errors": 0, "statuses": {}}
    store = open_store()
    try:
        assert [w.run_id for w in await store.waiting()] == [paused.run_id]
    finally:
        await close(store)

    due = worker(*args, at=THREE_DAYS)
    assert due == {"expired": 1, "errors": 0, "statuses": {paused.thread_id: "completed"}}
    store = open_store()
    try:
        assert await store.waiting() == []
        latest = await store.latest(paused.run_id)
        assert latest.state["escalated"] is True
        events = await store.events(paused.run_id)
        (expired,) = [e for e in events if e["type"] == "interrupt_expired"]
        assert expired["time"] == expired["deadline"] == "2025-01-04T00:00:00Z"
        assert expired["action"] == "routed"
        assert expired["routed_to"] == "escalate"
        ends = [e for e in events if e["type"] == "node_end"]
        assert [(e["node"], e["patch"], e["goto"]) for e in ends] == [
            ("approve", None, ["escalate"]), ("escalate", {"escalated": True}, None)]
        assert check_invariants(events, graph=build()) == []
    finally:
        await close(store)


async def test_a_worker_looks_for_due_deadlines_at_most_every_interval() -> None:
    store = InMemoryCheckpointStore()
    clock = VirtualClock(start=T0)
    asking = GraphRuntime(store=store, clock=clock, seed=1)
    await asking.ainvoke(build(), {"amount": 1}, thread_id="a")  # due at T0 + 3 days
    clock.advance(30)
    await asking.ainvoke(build(), {"amount": 2}, thread_id="b")  # due 30 s later
    clock.advance(THREE_DAYS.total_seconds() - 30)
    worker = Worker(store, [build()], clock=clock, deadline_interval=60)
    stats = await worker.run(until_idle=True)
    assert (stats.expired, stats.statuses) == (1, {"a": "completed"})
    clock.advance(30)  # b is due now, but the worker looked 30 s ago
    assert (await worker.run(until_idle=True)).expired == 1
    clock.advance(30)
    stats = await worker.run(until_idle=True)
    assert (stats.expired, stats.statuses["b"]) == (2, "completed")


@pytest.mark.parametrize("interval", [-1, float("nan"), "1", True],
                         ids=["negative", "nan", "str", "bool"])
def test_a_worker_refuses_a_bad_deadline_interval(interval: Any) -> None:
    with pytest.raises(InvalidArgument, match="deadline_interval"):
        Worker(InMemoryCheckpointStore(), [build()], deadline_interval=interval)


async def test_a_queued_run_waits_in_one_worker_and_expires_in_another(
    postgres_dsn: str, fresh_pg_schema: str
) -> None:
    """The production flow: a job queued on PostgreSQL is run by one worker process up to
    its approval (job ``interrupted``); a worker process started 3 days later (virtual)
    fires the deadline, and the job takes the run's final status."""
    store = PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema)
    try:
        thread = await store.enqueue("approval", {"amount": 70})
    finally:
        await close(store)
    args = ["postgres", postgres_dsn, fresh_pg_schema]
    first = worker(*args, at=timedelta(0))
    assert first == {"expired": 0, "errors": 0, "statuses": {thread: "interrupted"}}
    second = worker(*args, at=THREE_DAYS)
    assert second == {"expired": 1, "errors": 0, "statuses": {thread: "completed"}}
    store = PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema)
    try:
        (job,) = await store.jobs()
        assert (job["thread_id"], job["status"]) == (thread, "completed")
        (cp,) = (await store.list(thread_id=thread, limit=1))
        assert cp.state["escalated"] is True
    finally:
        await close(store)
