"""Thread deletion (issue 26, seed 004's ``deleteThread``) on every store: a finished thread
leaves no row of it, another thread's rows stay; a live claim refuses and nothing is deleted;
another tenant is refused as elsewhere; what was deleted is then not found.

Seed 004: "The thread has no checkpoint checkpointId in its history: it never had one, or
retention (Checkpointer.prune), a guardrail Block (which retracts its turn) or deleteThread
removed it. Nothing was changed."
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import FrozenInstanceError
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import psycopg
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    CheckpointNotFound,
    DeletedThread,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    InvalidArgument,
    PostgresCheckpointStore,
    SQLiteCheckpointStore,
    StaleClaim,
    TenantMismatch,
    ThreadBusy,
    VirtualClock,
)
from pytest_graphflow.stores import DeletingStore

pytestmark = pytest.mark.anyio
T0 = datetime(2025, 1, 1, tzinfo=UTC)
SEED_SENTENCE = ("The thread has no checkpoint checkpointId in its history: it never had one, "
                 "or retention (Checkpointer.prune), a guardrail Block (which retracts its "
                 "turn) or deleteThread removed it. Nothing was changed.")


class S(BaseModel):
    n: int = 0


def _graph() -> Any:
    def add(state: S) -> dict[str, Any]:
        return {"n": state.n + 1}

    g = Graph("counter", S)
    g.node("add", add)
    g.edge(START, "add").edge("add", END)
    return g.compile()


def _runtime(store: Any, **kw: Any) -> GraphRuntime:
    return GraphRuntime(store, clock=VirtualClock(start=T0), seed=0, **kw)


async def _finished_thread(rt: GraphRuntime, thread: str) -> list[str]:
    """Two finished runs on ``thread``, an artifact, extra events (one compacted) of each:
    the run ids."""
    graph = _graph()
    runs = []
    for _ in range(2):
        result = await rt.ainvoke(graph, thread_id=thread)
        assert result.status == "completed"
        runs.append(result.run_id)
    store: Any = rt.store
    for run in runs:
        await rt.attach(run, "report.txt", f"report of {run}")
        await store.record_events(run, [{"seq": 1000 + i, "type": "custom", "run_id": run}
                                        for i in range(3)])
        await store.record_run({"run_id": run, "thread_id": thread, "note": "kept"})
    await store.compact_events(runs[0], 1001)
    return runs


# -- what a store holds of a thread, read from its tables (or, in memory, through its API) --


def _sql_rows(store: Any, thread: str, runs: list[str], dsn: str | None) -> dict[str, int]:
    """Rows of ``thread`` (or of its runs) in every table of a durable store."""
    if isinstance(store, SQLiteCheckpointStore):
        conn: Any = sqlite3.connect(store.path)
        mark = "?"
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        columns = {t: [c[1] for c in conn.execute(f"PRAGMA table_info('{t}')")]
                   for t in tables}
    else:
        assert dsn is not None
        conn = psycopg.connect(dsn, autocommit=True)
        conn.execute(f"SET search_path = {store.schema}")
        mark = "%s"
        columns = {}
        for table, column in conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = %s", (store.schema,)).fetchall():
            columns.setdefault(table, []).append(column)
    counts: dict[str, int] = {}
    try:
        for table, cols in sorted(columns.items()):
            where, params = [], []
            if "thread_id" in cols:
                where.append(f"thread_id = {mark}")
                params.append(thread)
            if "run_id" in cols and runs:
                where.append(f"run_id IN ({', '.join([mark] * len(runs))})")
                params.extend(runs)
            if where:
                counts[table] = conn.execute(f"SELECT count(*) FROM {table} WHERE "
                                             + " OR ".join(where), params).fetchone()[0]
        if "event_pieces" in columns:  # SQLite: a folded piece's events are one row
            counts["events in pieces"] = conn.execute(
                "SELECT COALESCE(SUM(json_array_length(ev_keys)), 0) FROM event_pieces "
                f"WHERE run_id IN ({', '.join([mark] * len(runs))})", runs).fetchone()[0]
    finally:
        conn.close()
    return counts


async def _held(store: Any, thread: str, runs: list[str], dsn: str | None) -> dict[str, Any]:
    """Everything ``store`` holds of ``thread``: its rows (durable stores) and its API's
    answers."""
    found: dict[str, Any] = {
        "checkpoints": [cp.id for cp in await store.list(thread_id=thread)],
        "runs": [await store.run(r) for r in runs],
        "artifacts": [await store.artifacts(r) for r in runs],
        "claim": await store.current_claim(thread),
    }
    events = []
    for run in runs:
        try:
            events.append(await store.events(run))
        except Exception as exc:  # a compacted log: read from its earliest kept event
            events.append(await store.events(run, after_seq=exc.earliest_seq - 1))  # type: ignore[attr-defined]
    found["events"] = events
    if not isinstance(store, InMemoryCheckpointStore):
        found["rows"] = _sql_rows(store, thread, runs, dsn)
    return found


@pytest.fixture
def dsn(request: pytest.FixtureRequest, any_store: Any) -> str | None:
    """The PostgreSQL server's DSN when ``any_store`` is the PostgreSQL store."""
    if isinstance(any_store, PostgresCheckpointStore):
        return str(request.getfixturevalue("postgres_dsn"))
    return None


# -- deletion ----------------------------------------------------------------------------------


async def test_a_finished_thread_leaves_no_row_of_it_and_another_thread_keeps_its_own(
    any_store: Any, dsn: str | None
) -> None:
    """Issue 26 acceptance: "on a finished thread it leaves no row of it in SQLite or
    PostgreSQL" — checkpoints, events, run records, artifacts and claim, in one call."""
    rt = _runtime(any_store)
    runs = await _finished_thread(rt, "t-gone")
    other_runs = await _finished_thread(rt, "t-kept")
    before = await _held(any_store, "t-gone", runs, dsn)
    other_before = await _held(any_store, "t-kept", other_runs, dsn)
    assert len(before["checkpoints"]) >= 2
    assert all(before["runs"])
    assert all(before["events"])
    if "rows" in before:
        assert before["rows"]["checkpoints"] >= 2
        assert before["rows"]["artifacts"] == 2

    deleted = await rt.adelete_thread("t-gone")

    assert deleted == DeletedThread(
        "t-gone", tuple(runs), checkpoints=len(before["checkpoints"]),
        events=sum(len(e) for e in before["events"]), runs=2, artifacts=2, jobs=0)
    if "rows" in before and dsn is None:  # an event's row, or its piece's (schema 6)
        assert deleted.events == before["rows"]["events"] + before["rows"]["events in pieces"]
        assert before["rows"]["events in pieces"] > 0
    elif "rows" in before:  # PostgreSQL: a row holds the events written together
        assert 0 < before["rows"]["events"] < deleted.events
    after = await _held(any_store, "t-gone", runs, dsn)
    assert after["checkpoints"] == []
    assert after["runs"] == [None, None]
    assert after["artifacts"] == [[], []]
    assert after["events"] == [[], []]
    assert after["claim"] is None
    if "rows" in after:
        assert set(after["rows"].values()) == {0}, after["rows"]  # no row of it, any table
    assert await _held(any_store, "t-kept", other_runs, dsn) == other_before
    assert [r.run_id for r in rt.runs] == other_runs  # the runtime forgot the deleted runs


async def test_what_was_deleted_is_not_found_afterwards(any_store: Any) -> None:
    """After deletion, get/load of its checkpoints are empty and a resume of its run or
    checkpoint raises the seed's not-in-history error: """ + SEED_SENTENCE
    rt = _runtime(any_store)
    rt.register(_graph())
    runs = await _finished_thread(rt, "t-1")
    checkpoint = (await any_store.list(thread_id="t-1"))[0].id
    await rt.adelete_thread("t-1")
    assert await any_store.get(checkpoint) is None
    assert await any_store.load(runs[0]) is None
    assert await any_store.load(runs[0], "add") is None
    assert await rt.history(runs[0]) == []
    for ref in (runs[0], checkpoint):
        with pytest.raises(CheckpointNotFound, match=rf"no checkpoint for run or checkpoint "
                           rf"id '{ref}': the store has none \(never written, retracted by a "
                           r"guardrail Block, or removed by prune or delete_thread\)"):
            await rt.aresume(ref)
    doc = " ".join((CheckpointNotFound.__doc__ or "").split())
    assert ("or retention (``prune``), a guardrail ``Block`` (which retracts its turn) or "
            "``delete_thread`` removed it. Nothing was changed.") in doc


async def test_an_unknown_thread_is_a_no_op_returning_zeros(any_store: Any) -> None:
    """Like ``delete`` (False) and ``prune`` (0) of an unknown id: nothing to delete."""
    rt = _runtime(any_store)
    await _finished_thread(rt, "t-1")
    kept = await any_store.list(thread_id="t-1")
    deleted = await any_store.delete_thread("t-unknown")
    assert deleted == DeletedThread("t-unknown")
    assert not deleted.found
    assert deleted.checkpoints == deleted.events == 0
    assert await any_store.list(thread_id="t-1") == kept
    with pytest.raises(FrozenInstanceError):
        deleted.checkpoints = 1  # type: ignore[misc]
    assert isinstance(any_store, DeletingStore)


# -- a live claim --------------------------------------------------------------------------------


async def test_a_live_claim_refuses_with_thread_busy_and_deletes_nothing(
    any_store: Any, dsn: str | None
) -> None:
    """Issue 26 acceptance: "delete_thread on a thread with a live claim raises ThreadBusy
    and deletes nothing"."""
    rt = _runtime(any_store)
    runs = await _finished_thread(rt, "t-1")
    now = rt.clock.now()
    await any_store.claim("t-1", "run-other-process", now=now, ttl=60)
    before = await _held(any_store, "t-1", runs, dsn)
    for attempt in (lambda: rt.adelete_thread("t-1"),
                    lambda: any_store.delete_thread("t-1", now=now + timedelta(seconds=59)),
                    lambda: any_store.delete_thread("t-1")):  # no clock: every claim holds
        with pytest.raises(ThreadBusy, match=r"thread 't-1' is busy \(held by run "
                           r"run-other-process\)") as info:
            await attempt()
        assert info.value.holder == "run-other-process"
        assert await _held(any_store, "t-1", runs, dsn) == before


async def test_a_run_executing_in_the_runtime_holds_its_thread(any_store: Any) -> None:
    """A node that asks to delete its own thread is refused: its run holds the thread."""
    seen: list[BaseException] = []
    rt = _runtime(any_store)

    async def selfish(state: S, ctx: Any) -> dict[str, Any]:
        try:
            await rt.adelete_thread(ctx.thread_id)
        except ThreadBusy as exc:
            seen.append(exc)
        return {"n": 1}

    g = Graph("selfish", S)
    g.node("selfish", selfish)
    g.edge(START, "selfish").edge("selfish", END)
    result = await rt.ainvoke(g.compile(), thread_id="t-1")
    assert result.status == "completed"
    assert len(seen) == 1
    assert isinstance(seen[0], ThreadBusy)
    assert seen[0].holder == result.run_id
    assert len(await any_store.list(thread_id="t-1")) >= 1


async def test_an_expired_claim_does_not_hold_and_its_tokens_are_never_issued_again(
    any_store: Any, make_cp: Any
) -> None:
    """A dead process's claim (expired by the caller's clock) does not keep the thread; a
    writer that still holds its token can never write into a new thread of the same id."""
    old = await any_store.claim("t-1", "run-a", now=T0, ttl=10)
    await any_store.commit("t-1", old, run_id="run-a",
                           checkpoints=[make_cp("cp-1", run="run-a", thread="t-1")])
    later = T0 + timedelta(seconds=11)
    deleted = await any_store.delete_thread("t-1", now=later)
    assert deleted.checkpoints == 1
    assert await any_store.current_claim("t-1") is None
    new = await any_store.claim("t-1", "run-b", now=later, ttl=10)
    assert new > old
    with pytest.raises(StaleClaim):
        await any_store.commit("t-1", old, run_id="run-a",
                               checkpoints=[make_cp("cp-2", run="run-a", thread="t-1")])
    assert await any_store.list(thread_id="t-1") == []


# -- tenants -------------------------------------------------------------------------------------


async def test_another_tenant_gets_tenant_mismatch_and_nothing_is_deleted(
    any_store: Any, dsn: str | None
) -> None:
    """Tenant-checked as every per-thread operation: another tenant (None included) gets
    TenantMismatch, busy or not, and learns nothing; the owner may delete."""
    acme = _runtime(any_store, tenant_id="acme")
    runs = await _finished_thread(acme, "t-1")
    before = await _held(any_store, "t-1", runs, dsn)
    refusals = [lambda: _runtime(any_store, tenant_id="globex").adelete_thread("t-1"),
                lambda: acme.adelete_thread("t-1", tenant_id=None),
                lambda: any_store.delete_thread("t-1"),
                lambda: any_store.delete_thread("t-1", tenant_id="globex")]
    for refuse in refusals:
        with pytest.raises(TenantMismatch, match=r"tenant ('globex'|None) may not use thread "
                           r"'t-1'; pass the tenant_id the thread was created with\.$"):
            await refuse()
    assert await _held(any_store, "t-1", runs, dsn) == before
    await any_store.claim("t-1", "run-held", now=acme.clock.now())
    held = await _held(any_store, "t-1", runs, dsn)
    for refuse in refusals:  # busy: another tenant still only learns it may not use it
        with pytest.raises(TenantMismatch) as info:
            await refuse()
        assert "run-held" not in str(info.value)
    assert await _held(any_store, "t-1", runs, dsn) == held
    token = (await any_store.current_claim("t-1"))[1]
    await any_store.release("t-1", token)
    deleted = await acme.adelete_thread("t-1")
    assert deleted.runs == 2
    assert await any_store.list(thread_id="t-1") == []


# -- bad input -----------------------------------------------------------------------------------

BAD = [
    pytest.param({"thread_id": ""}, "thread_id", id="thread-empty"),
    pytest.param({"thread_id": 7}, "thread_id", id="thread-not-str"),
    pytest.param({"thread_id": "t\x00"}, "thread_id", id="thread-control-char"),
    pytest.param({"thread_id": "t-1", "tenant_id": ""}, "tenant_id", id="tenant-empty"),
    pytest.param({"thread_id": "t-1", "tenant_id": 3}, "tenant_id", id="tenant-not-str"),
    pytest.param({"thread_id": "t-1", "now": datetime(2025, 1, 1)}, "now",
                 id="now-naive"),
    pytest.param({"thread_id": "t-1", "now": "2025-01-01"}, "now", id="now-str"),
]


@pytest.mark.parametrize(("kwargs", "named"), BAD)
async def test_bad_arguments_name_themselves_and_delete_nothing(
    any_store: Any, kwargs: dict[str, Any], named: str
) -> None:
    rt = _runtime(any_store)
    await _finished_thread(rt, "t-1")
    kept = await any_store.list(thread_id="t-1")
    args = dict(kwargs)
    thread = args.pop("thread_id")
    with pytest.raises(InvalidArgument, match=rf"delete_thread\({named}="):
        await any_store.delete_thread(thread, **args)
    assert await any_store.list(thread_id="t-1") == kept


# -- the sync form -------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_sync_form_deletes_on_either_backend(backend: str, tmp_path: Any) -> None:
    with SQLiteCheckpointStore(tmp_path / "s.db") as store:
        rt = GraphRuntime(store, clock=VirtualClock(start=T0), seed=0, backend=backend)
        result = rt.invoke(_graph(), thread_id="t-1")
        deleted = rt.delete_thread("t-1")
        assert deleted.run_ids == (result.run_id,)
        assert deleted.checkpoints >= 1
        assert rt.delete_thread("t-1") == DeletedThread("t-1")
        assert anyio.run(store.list) == []


# -- PostgreSQL's queue ----------------------------------------------------------------------


async def test_a_queued_job_goes_with_its_thread_and_a_held_one_keeps_it_busy(
    make_pg_store: Any,
) -> None:
    """A job is a thread's (the queue's key): a queued one would start a run on the deleted
    thread, so it is deleted with it; one a worker holds (taken, its run about to claim the
    thread) refuses the deletion like a claim."""
    store = make_pg_store()
    rt = _runtime(store)
    runs = await _finished_thread(rt, "t-1")
    await store.enqueue("counter", {"n": 5}, thread_id="t-1")
    deleted = await store.delete_thread("t-1", now=T0)
    assert (deleted.jobs, deleted.runs, deleted.run_ids) == (1, 2, tuple(runs))
    assert await store.jobs() == []

    await store.enqueue("counter", {"n": 5}, thread_id="t-2")
    job = await store.take_job("w-1", now=T0, hold=30)
    assert job is not None
    assert job["thread_id"] == "t-2"
    for now in (T0 + timedelta(seconds=29), None):
        with pytest.raises(ThreadBusy, match=r"thread 't-2' is busy; retry"):
            await store.delete_thread("t-2", now=now)
    assert [j["thread_id"] for j in await store.jobs()] == ["t-2"]
    assert (await store.delete_thread("t-2", now=T0 + timedelta(seconds=30))).jobs == 1


# -- a claim that waited on a deletion (PostgreSQL: two transactions on one row) ---------------


def _delete_once_a_claim_waits(dsn: str, schema: str, floor: int,
                               locked: threading.Event) -> None:
    """delete_thread's transaction, by hand, held open across a claim of ``t-1``: lock the
    claim row, wait until a backend waits for that lock (each poll a query, no sleep), then
    delete the row and raise the token floor, as delete_thread does, and commit."""
    with psycopg.connect(dsn) as deleter, psycopg.connect(dsn, autocommit=True) as probe:
        deleter.execute(f"SET search_path = {schema}")
        deleter.execute("SELECT token FROM claims WHERE thread_id = 't-1' FOR UPDATE")
        locked.set()
        for _ in range(1_000_000):
            row = probe.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type "
                                "= 'Lock' AND pid <> %s", (deleter.info.backend_pid,)).fetchone()
            if row is not None and row[0]:
                break
        else:
            raise AssertionError("no claim waited for the claims row's lock")
        deleter.execute("DELETE FROM claims WHERE thread_id = 't-1'")
        deleter.execute("INSERT INTO meta VALUES ('claim_token_floor', %s) ON CONFLICT "
                        "(key) DO UPDATE SET value = excluded.value", (str(floor),))
        deleter.commit()


async def test_a_claim_that_waited_on_a_deletion_takes_the_thread_above_its_deleted_tokens(
    make_pg_store: Any, postgres_dsn: str, make_cp: Any
) -> None:
    """A claim that waited for the claim row while delete_thread deleted it: the row is gone
    when the claim gets its lock. It used to return a token with no row written (the token
    decided from nothing, 1 again, the deleted thread's own), so the run's first commit
    failed with StaleClaim; now it takes the thread afresh, above the deleted tokens."""
    store = make_pg_store()
    old = await store.claim("t-1", "run-a", now=T0, ttl=10)
    await store.release("t-1", old)
    locked = threading.Event()
    failures: list[BaseException] = []

    def deleting() -> None:
        try:
            _delete_once_a_claim_waits(postgres_dsn, store.schema, old, locked)
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)
            locked.set()

    deleter = threading.Thread(target=deleting)
    deleter.start()
    locked.wait()
    new = await store.claim("t-1", "run-b", now=T0, ttl=10)
    deleter.join()
    assert not failures, failures
    assert new > old
    held = await store.current_claim("t-1")
    assert held is not None
    assert held[:2] == ("run-b", new)
    await store.commit("t-1", new, run_id="run-b",
                       checkpoints=[make_cp("cp-1", run="run-b", thread="t-1")])
    assert [cp.id for cp in await store.list(thread_id="t-1")] == ["cp-1"]
