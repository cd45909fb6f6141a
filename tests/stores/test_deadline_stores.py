"""Deadlines on human input (issue 26): "An approval with a 3-day deadline: answered on day 2
it continues; unanswered it takes the timeout route at exactly 3 days of virtual time ...;
``waiting()`` lists it until then." Every test runs on the memory, SQLite and PostgreSQL
stores, on asyncio and on trio; each later step uses a fresh runtime (a restarted process)
over the same store, so the deadline is read back from the store, not from memory."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from graphflow_deadline_graphs import T0, THREE_DAYS, build
from pytest_graphflow import (
    DeadlineExpired,
    GraphRuntime,
    InvalidArgument,
    NotSuspended,
    Resume,
    SQLiteCheckpointStore,
    TimeoutAnswer,
    VirtualClock,
)
from pytest_graphflow._stores.sqlite._schema import SCHEMA_VERSION


def runtime(store: Any, at: timedelta = timedelta(0), **options: Any) -> GraphRuntime:
    """A fresh runtime (a new process) whose virtual clock reads ``T0 + at``."""
    return GraphRuntime(store=store, clock=VirtualClock(start=T0 + at), seed=7, **options)


async def paused(store: Any, graph: Any = None, **input: Any) -> str:
    """A refund run paused at its approval, asked at T0; its run id."""
    result = await runtime(store).ainvoke(graph or build(), {"amount": 120, **input})
    assert result.status == "interrupted"
    (question,) = result.interrupts.values()
    assert question.deadline == T0 + THREE_DAYS
    return result.run_id


@pytest.mark.anyio
async def test_answered_on_day_two_it_continues(make_any_store: Callable[..., Any]) -> None:
    store = make_any_store()
    run_id = await paused(store)
    day2 = runtime(store, timedelta(days=2))
    assert await day2.aexpire_due(graphs=[build()]) == []  # nothing is due yet
    (row,) = await day2.waiting()
    assert (row.run_id, row.deadline) == (run_id, T0 + THREE_DAYS)
    done = await day2.aresume(run_id, Resume("approved"), graph=build())
    assert done.status == "completed"
    assert done.data == {"amount": 120, "decision": "approved", "escalated": False}
    assert await day2.waiting() == []
    later = runtime(store, timedelta(days=4))
    assert await later.aexpire_due(graphs=[build()]) == []  # answered: nothing fires


@pytest.mark.anyio
async def test_unanswered_it_takes_the_timeout_route_at_exactly_three_days(
    make_any_store: Callable[..., Any]
) -> None:
    store = make_any_store()
    run_id = await paused(store)
    just_before = runtime(store, THREE_DAYS - timedelta(microseconds=1))
    assert await just_before.aexpire_due(graphs=[build()]) == []
    assert [w.run_id for w in await just_before.waiting()] == [run_id]  # listed until then

    clock = VirtualClock(start=T0 + THREE_DAYS)
    at_deadline = GraphRuntime(store=store, clock=clock, seed=7)
    (fired,) = await at_deadline.aexpire_due(graphs=[build()])
    assert fired.run_id == run_id
    assert fired.status == "completed"
    assert fired.data == {"amount": 120, "decision": None, "escalated": True}
    assert await at_deadline.waiting() == []
    assert await at_deadline.aexpire_due(graphs=[build()]) == []  # fired once
    with pytest.raises(NotSuspended):  # the question is gone: nothing to answer any more
        await at_deadline.aresume(run_id, Resume("approved"), graph=build())


@pytest.mark.anyio
async def test_an_answer_after_the_deadline_is_refused_and_changes_nothing(
    make_any_store: Callable[..., Any]
) -> None:
    store = make_any_store()
    run_id = await paused(store)
    before = await store.latest(run_id)
    late = runtime(store, THREE_DAYS)
    with pytest.raises(DeadlineExpired) as caught:
        await late.aresume(run_id, Resume("approved"), graph=build())
    text = str(caught.value)
    assert run_id in text
    assert caught.value.key in text
    assert "expired at 2025-01-04T00:00:00+00:00" in text
    assert "expire_due()" in text  # the fix
    assert (await store.latest(run_id)).id == before.id
    assert [w.run_id for w in await late.waiting()] == [run_id]


@pytest.mark.anyio
async def test_a_timeout_answer_answers_the_expired_question(
    make_any_store: Callable[..., Any]
) -> None:
    store = make_any_store()
    graph = build(TimeoutAnswer({"approved": False, "why": "no answer in 3 days"}))
    run_id = await paused(store, graph)
    (fired,) = await runtime(store, THREE_DAYS).aexpire_due(graphs=[graph])
    assert fired.run_id == run_id
    assert fired.data["decision"] == {"approved": False, "why": "no answer in 3 days"}
    assert fired.data["escalated"] is False


@pytest.mark.anyio
async def test_without_a_route_the_run_fails_and_recovering_asks_again(
    make_any_store: Callable[..., Any]
) -> None:
    store = make_any_store()
    graph = build(on_timeout=None)
    run_id = await paused(store, graph)
    rt = runtime(store, THREE_DAYS)
    (fired,) = await rt.aexpire_due(graphs=[graph])
    assert fired.status == "failed"
    assert isinstance(fired.error, DeadlineExpired)
    assert fired.error.unrouted
    assert "no timeout route" in str(fired.error)
    again = await rt.arecover(fired.thread_id, graph=graph)
    assert again.status == "interrupted"
    (question,) = again.interrupts.values()
    assert question.deadline == T0 + 2 * THREE_DAYS  # asked anew, with a new deadline
    assert run_id == again.run_id


@pytest.mark.anyio
async def test_waiting_pages_in_thread_order_and_sees_only_its_tenant(
    make_any_store: Callable[..., Any]
) -> None:
    store = make_any_store()
    graph = build()
    for thread, tenant in [("t-3", "acme"), ("t-1", "acme"), ("t-2", "acme"),
                           ("t-4", "other"), ("t-5", None)]:
        rt = runtime(store, tenant_id=tenant)
        result = await rt.ainvoke(graph, {"amount": 1}, thread_id=thread)
        assert result.status == "interrupted"
    other_graph = build(TimeoutAnswer(1), graph_id="approval-b")
    done = await runtime(store, tenant_id="acme").ainvoke(other_graph, None)
    assert done.status == "interrupted"  # another graph, waiting too (listed below)

    first = await store.waiting(tenant_id="acme", limit=2)
    assert [w.thread_id for w in first] == ["t-1", "t-2"]
    rest = await store.waiting(tenant_id="acme", limit=2, after=first[-1].thread_id)
    assert [w.thread_id for w in rest] == ["t-3", done.thread_id]
    assert await store.waiting(tenant_id="acme", after=rest[-1].thread_id) == []
    row = first[0]
    assert (row.tenant_id, row.graph_id, row.deadline) == ("acme", "approval", T0 + THREE_DAYS)
    assert row.interrupts[0].payload == {"refund": 1}
    assert [w.thread_id for w in await store.waiting(tenant_id="other")] == ["t-4"]
    assert [w.thread_id for w in await store.waiting()] == ["t-5"]  # no tenant
    assert len(await store.waiting(any_tenant=True)) == 6
    # The runtime lists its own tenant's, unless told another.
    assert [w.thread_id for w in await runtime(store, tenant_id="other").waiting()] == ["t-4"]
    # A worker fires every tenant's, in deadline order then thread order, of its graphs.
    fired = await runtime(store, THREE_DAYS).aexpire_due(graphs=[graph], any_tenant=True)
    assert [r.thread_id for r in fired] == ["t-1", "t-2", "t-3", "t-4", "t-5"]
    assert [w.thread_id for w in await store.waiting(any_tenant=True)] == [done.thread_id]


@pytest.mark.parametrize(("kwargs", "fix"), [
    ({"limit": 0}, "give an int >= 1"),
    ({"limit": True}, "give an int >= 1"),
    ({"any_tenant": "yes"}, "True or False"),
    ({"after": ""}, "after"),
], ids=["limit-zero", "limit-bool", "any-tenant-str", "after-empty"])
@pytest.mark.anyio
async def test_waiting_refuses_bad_arguments(any_store: Any, kwargs: dict[str, Any],
                                             fix: str) -> None:
    with pytest.raises(InvalidArgument, match=fix):
        await any_store.waiting(**kwargs)


def test_a_sqlite_file_from_before_waiting_lists_its_runs_and_gets_the_index(
    tmp_path: Path
) -> None:
    """Deadlines live in the checkpoints; ``waiting()`` reads a partial index, not a new
    column: a file written before it (schema version 3 without the index) is listed as it is,
    read-only too, and a writable open adds the index, keeping the schema version."""
    path = tmp_path / "old.db"
    with SQLiteCheckpointStore(path) as store:
        rt = GraphRuntime(store, clock=VirtualClock(start=T0), seed=1)
        paused = rt.invoke(build(), {"amount": 3})
        store._conn.execute("DROP INDEX checkpoints_waiting")  # as an older build wrote it

    def indexes() -> list[str]:
        with sqlite3.connect(path) as db:
            return [r[0] for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE "
                "'checkpoints_w%'")]

    assert indexes() == []
    with SQLiteCheckpointStore(path, readonly=True) as old:
        assert [w.run_id for w in anyio.run(old.waiting)] == [paused.run_id]
    assert indexes() == []  # read-only: nothing written
    with SQLiteCheckpointStore(path) as store:
        assert [w.run_id for w in anyio.run(store.waiting)] == [paused.run_id]
        plan = " ".join(str(r) for r in store._conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM checkpoints c WHERE c.status = 'interrupted' "
            "ORDER BY c.thread_id"))
        assert "checkpoints_waiting" in plan
    assert indexes() == ["checkpoints_waiting"]
    with sqlite3.connect(path) as db:
        (version,) = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == str(SCHEMA_VERSION)
