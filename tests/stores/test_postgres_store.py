"""What only the PostgreSQL store does: a shared server, processes racing for claims, schema
versions and migrations, its run queue. (The protocol and the extras it shares with the other
stores are tested on every backend through ``any_store``.)"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pytest_graphflow import PostgresCheckpointStore, Worker
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._stores.postgres import _schema as _pgschema
from pytest_graphflow.errors import InvalidArgument, StaleClaim, UnsupportedFormat

MakeCheckpoint = Callable[..., Checkpoint]
MakeStore = Callable[..., PostgresCheckpointStore]
T0 = datetime(2025, 1, 1, tzinfo=UTC)

pytestmark = pytest.mark.anyio


async def test_two_store_objects_share_one_database(
    make_pg_store: MakeStore, make_cp: MakeCheckpoint
) -> None:
    a, b = make_pg_store(), make_pg_store()
    await a.save(make_cp("cp-1", at=1))
    await b.save(make_cp("cp-2", at=1))
    await a.save(make_cp("cp-3", at=1))
    latest = await b.latest("run-a")
    assert latest is not None
    assert latest.id == "cp-3"  # saved last, by the other object: one save order
    await b.record_run({"run_id": "run-a", "status": "running"})
    await a.record_run({"run_id": "run-a", "status": "completed"})
    assert await b.run("run-a") == {"run_id": "run-a", "status": "completed"}
    assert b.checkpointed_runs() == ["run-a"]


async def test_the_async_pool_serves_the_loop_it_was_opened_on(
    make_pg_store: MakeStore, make_cp: MakeCheckpoint, anyio_backend: str
) -> None:
    store = make_pg_store()
    async with store:
        await store.save(make_cp("cp-1"))
        assert (store._pg._pool is not None) == (anyio_backend == "asyncio")
        assert [c.id for c in await store.list("run-a")] == ["cp-1"]
    with pytest.raises(psycopg.OperationalError, match="store is closed"):
        await store.get("cp-1")


_RACER = """
import json, sys
from datetime import UTC, datetime
import anyio
from pytest_graphflow import PostgresCheckpointStore
from pytest_graphflow.errors import ThreadBusy

dsn, schema, me, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = PostgresCheckpointStore(dsn, schema=schema)
print("ready", flush=True)
sys.stdin.readline()  # the start line: every racer is connected and waiting

async def race():
    out = []
    for k in range(threads):
        try:
            token = await store.claim(f"thread-{k}", me, now=datetime(2025, 1, 1, tzinfo=UTC),
                                      ttl=60)
            out.append([k, "won", token])
        except ThreadBusy as exc:
            out.append([k, "busy", exc.holder])
    return out

print(json.dumps(anyio.run(race)), flush=True)
store.close()
"""


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the racers are processes of their own
async def test_racing_processes_exactly_one_claims_each_thread(
    postgres_dsn: str, make_pg_store: MakeStore, pg_schema: str
) -> None:
    """Six processes, started together, claim the same ten threads at the same instant: the
    server's row lock lets exactly one through per thread; the others are told who holds it."""
    store = make_pg_store()  # creates the schema before the race
    threads = 10
    racers = [subprocess.Popen(
        [sys.executable, "-c", _RACER, postgres_dsn, pg_schema, f"run-{n}", str(threads)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for n in range(6)]
    for racer in racers:
        assert racer.stdout is not None
        assert racer.stdout.readline().strip() == "ready"
    results: list[tuple[str, int, str, Any]] = []
    for n, racer in enumerate(racers):
        out, _ = racer.communicate("go\n", timeout=120)
        results += [(f"run-{n}", k, kind, x) for k, kind, x in json.loads(out)]
    for k in range(threads):
        per_thread = [(run, kind, x) for run, t, kind, x in results if t == k]
        assert Counter(kind for _run, kind, _x in per_thread) == {"won": 1, "busy": 5}
        ((winner, _, token),) = [r for r in per_thread if r[1] == "won"]
        assert {x for _run, kind, x in per_thread if kind == "busy"} == {winner}
        assert await store.current_claim(f"thread-{k}") == (
            winner, token, T0 + timedelta(seconds=60))


# -- fenced commits (the claims issue's protocol; its own tests run here through any_store) --


def _ev(seq: int, run: str = "run-a") -> dict[str, Any]:
    return {"seq": seq, "run_id": run, "type": "custom"}


async def _snapshot(store: PostgresCheckpointStore) -> tuple[Any, ...]:
    return ([(c.id, c.state) for c in await store.list()], await store.events("run-a"),
            await store.run("run-a"))


@pytest.mark.parametrize("with_record", [False, True], ids=["one-statement", "transaction"])
async def test_a_commit_under_a_superseded_token_changes_nothing(
    make_pg_store: MakeStore, make_cp: MakeCheckpoint, with_record: bool
) -> None:
    store = make_pg_store()
    old = await store.claim("thread-a", "run-a", now=T0, ttl=10)
    await store.commit("thread-a", old, run_id="run-a", checkpoints=[make_cp("cp-1")],
                       events=[_ev(0)], run={"run_id": "run-a", "status": "running"})
    await store.commit("thread-a", old, run_id="run-a", checkpoints=[make_cp("cp-2", at=1)],
                       events=[_ev(1)])
    new = await store.claim("thread-a", "run-b", now=T0 + timedelta(seconds=10))
    before = await _snapshot(store)
    record = {"run_id": "run-a", "status": "completed"} if with_record else None
    with pytest.raises(StaleClaim) as stale:
        await store.commit("thread-a", old, run_id="run-a",
                           checkpoints=[make_cp("cp-1", state={"n": 9})], events=[_ev(0), _ev(2)],
                           run=record)
    assert (stale.value.token, stale.value.current) == (old, new)
    with pytest.raises(StaleClaim):
        await store.save(make_cp("cp-3", at=5), fence=("thread-a", old))
    assert await _snapshot(store) == before
    await store.release("thread-a", new)
    with pytest.raises(StaleClaim) as released:
        await store.commit("thread-a", new, run_id="run-a", events=[_ev(2)], run=record)
    assert released.value.current is None
    assert await _snapshot(store) == before


async def test_a_commit_writes_everything_or_nothing(
    make_pg_store: MakeStore, make_cp: MakeCheckpoint
) -> None:
    store = make_pg_store()
    token = await store.claim("thread-a", "run-a", now=T0)
    await store.commit("thread-a", token, run_id="run-a",
                       checkpoints=[make_cp("cp-1", at=1), make_cp("cp-2", at=2)],
                       events=[_ev(0), _ev(1)], run={"run_id": "run-a", "status": "running"})
    await store.save(make_cp("cp-3", at=3), fence=("thread-a", token))
    assert [c.id for c in await store.list("run-a")] == ["cp-1", "cp-2", "cp-3"]
    assert [e["seq"] for e in await store.events("run-a")] == [0, 1]
    with pytest.raises(InvalidArgument, match="is of run run-b"):
        await store.commit("thread-a", token, run_id="run-a",
                           checkpoints=[make_cp("cp-4", at=4)], events=[_ev(2, run="run-b")])
    assert [c.id for c in await store.list("run-a")] == ["cp-1", "cp-2", "cp-3"]
    with pytest.raises(InvalidArgument, match="the fence is for thread 'thread-b'"):
        await store.save(make_cp("cp-4", at=4), fence=("thread-b", token))


async def test_a_fenced_run_record_is_merged_like_record_run(
    make_pg_store: MakeStore, make_cp: MakeCheckpoint
) -> None:
    """The one-statement commit merges the run record in SQL: the same answer, key order
    included, as ``record_run``'s ``{**old, **new}``."""
    store = make_pg_store()
    token = await store.claim("thread-a", "run-a", now=T0)
    await store.commit("thread-a", token, run_id="run-a", checkpoints=[make_cp("cp-1")],
                       run={"run_id": "run-a", "status": "running", "a": [1, {"x": None}]})
    await store.commit("thread-a", token, run_id="run-a", events=[_ev(0)],
                       run={"run_id": "run-a", "b": "é", "status": "completed"})
    got = await store.run("run-a")
    assert got == {"run_id": "run-a", "status": "completed", "a": [1, {"x": None}], "b": "é"}
    assert list(got) == ["run_id", "status", "a", "b"]
    await store.record_run({"run_id": "run-b", "status": "running", "a": [1, {"x": None}]})
    await store.record_run({"run_id": "run-b", "b": "é", "status": "completed"})
    again = await store.run("run-b")
    assert again is not None
    assert list(again.items())[1:] == list(got.items())[1:]


# -- schema versions and migrations -------------------------------------------------------------


def _version(dsn: str, schema: str) -> str:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'"
                           ).fetchone()
    assert row is not None
    return str(row[0])


async def test_a_schema_of_a_newer_build_is_refused_and_left_alone(
    postgres_dsn: str, fresh_pg_schema: str
) -> None:
    PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema).close()
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(f"UPDATE {fresh_pg_schema}.meta SET value = '99'")
    with pytest.raises(UnsupportedFormat, match=r"schema version 99; this build of "
                       f"pytest-graphflow reads schema version {_pgschema.SCHEMA_VERSION}"):
        PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema)
    assert _version(postgres_dsn, fresh_pg_schema) == "99"


async def test_an_older_schema_is_migrated_once_when_a_store_opens(
    postgres_dsn: str, fresh_pg_schema: str, monkeypatch: pytest.MonkeyPatch,
    make_cp: MakeCheckpoint,
) -> None:
    with PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema) as old:
        await old.save(make_cp("cp-1"))
    now = _pgschema.SCHEMA_VERSION  # a build after this one, with one more migration
    monkeypatch.setattr(_pgschema, "SCHEMA_VERSION", now + 1)
    monkeypatch.setitem(_pgschema.MIGRATIONS, now, ["ALTER TABLE runs ADD COLUMN note TEXT"])
    with PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema) as new:
        assert [c.id for c in await new.list()] == ["cp-1"]  # the data survived
    assert _version(postgres_dsn, fresh_pg_schema) == str(now + 1)
    PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema).close()  # not run twice
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(f"SELECT note FROM {fresh_pg_schema}.runs")


async def test_a_checkpoint_in_another_format_names_itself(
    postgres_dsn: str, make_pg_store: MakeStore, pg_schema: str, make_cp: MakeCheckpoint
) -> None:
    store = make_pg_store()
    await store.save(make_cp("cp-1"))
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(f"UPDATE {pg_schema}.checkpoints SET format_version = 0")
    with pytest.raises(UnsupportedFormat, match="checkpoint 'cp-1' was written in format "
                       "version 0"):
        await store.get("cp-1")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"schema": "Bad-Name"}, "schema='Bad-Name': a schema name", id="schema"),
        pytest.param({"schema": "x; DROP"}, "a schema name is lower-case", id="injection"),
        pytest.param({"pool_size": 0}, "pool_size=0", id="pool-size"),
        pytest.param({"pool_size": True}, "pool_size=True", id="pool-size-bool"),
        pytest.param({"claim_ttl": 0}, "ttl must be a positive", id="ttl"),
        pytest.param({"schema": "graphflow\n"}, r"schema='graphflow\\n': a schema name",
                     id="trailing-newline"),
        pytest.param({"schema": "select"}, "'select' is a reserved word in PostgreSQL",
                     id="reserved-word"),
        pytest.param({"schema": "user"}, "'user' is a reserved word", id="reserved-user"),
        pytest.param({"schema": "pg_graphflow"}, "'pg_' is reserved for PostgreSQL's own",
                     id="pg-prefix"),
        pytest.param({"schema": 5}, "schema=5: a schema name", id="not-a-str"),
    ],
)
async def test_bad_arguments_are_refused_before_connecting(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        PostgresCheckpointStore("host=/nonexistent dbname=x", **kwargs)


# -- a schema holding an application's tables is never adopted, never dropped --------------------


def _app_rows(dsn: str, schema: str, table: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(f"SELECT * FROM {schema}.{table} ORDER BY 1").fetchall()


def _tables(dsn: str, schema: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                            (schema,)).fetchall()
    return {r[0] for r in rows}


@pytest.mark.parametrize("table", ["orders", "events"], ids=["app-table", "app-table-our-name"])
async def test_a_schema_holding_an_applications_tables_is_refused_and_left_alone(
    postgres_dsn: str, fresh_pg_schema: str, table: str
) -> None:
    """Like a SQLite file that is not a store: the schema is named with the fix, and nothing in
    it changes (no store table is added to it, the application's rows are all there)."""
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(f"CREATE SCHEMA {fresh_pg_schema}")
        conn.execute(f"CREATE TABLE {fresh_pg_schema}.{table} (id INT PRIMARY KEY, item TEXT)")
        conn.execute(f"INSERT INTO {fresh_pg_schema}.{table} VALUES (1, 'book'), (2, 'pen')")
    with pytest.raises(InvalidArgument) as refused:
        PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema)
    message = str(refused.value)
    assert f"schema={fresh_pg_schema!r}" in message
    assert f"holds tables that are not a pytest-graphflow store's ({table})" in message
    assert "pass a schema of its own" in message
    assert _tables(postgres_dsn, fresh_pg_schema) == {table}
    assert _app_rows(postgres_dsn, fresh_pg_schema, table) == [(1, "book"), (2, "pen")]


async def test_drop_removes_the_stores_tables_and_never_an_applications(
    postgres_dsn: str, fresh_pg_schema: str, make_cp: MakeCheckpoint
) -> None:
    with PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema) as store:
        await store.save(make_cp("cp-1"))
        with psycopg.connect(postgres_dsn) as conn:  # an application's table lands there later
            conn.execute(f"CREATE TABLE {fresh_pg_schema}.orders (id INT PRIMARY KEY)")
            conn.execute(f"INSERT INTO {fresh_pg_schema}.orders VALUES (7)")
        store.drop()
    assert _tables(postgres_dsn, fresh_pg_schema) == {"orders"}  # the store's tables are gone
    assert _app_rows(postgres_dsn, fresh_pg_schema, "orders") == [(7,)]
    with PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema + "_own") as own:
        own.drop()  # a schema of the store's own goes with its tables
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                            (fresh_pg_schema + "_own",)).fetchone() is None


async def test_an_unreachable_server_raises_psycopgs_error() -> None:
    with pytest.raises(psycopg.OperationalError):
        PostgresCheckpointStore("host=/nonexistent-graphflow-socket-dir dbname=x")


# -- the run queue ------------------------------------------------------------------------------


async def test_a_thread_has_one_queued_job(make_pg_store: MakeStore) -> None:
    store = make_pg_store()
    thread = await store.enqueue("g", {"n": 1}, thread_id="thread-1")
    assert thread == "thread-1"
    with pytest.raises(InvalidArgument, match="already has a queued job"):
        await store.enqueue("g", {"n": 2}, thread_id="thread-1")
    with pytest.raises(InvalidArgument, match="no ended job to resume"):
        await store.enqueue_resume("thread-1", "yes")
    await store.finish_job("thread-1", "completed", run_id="run-1")
    assert await store.jobs() == [{"thread_id": "thread-1", "graph_id": "g",
                                   "status": "completed", "run_id": "run-1", "error": None,
                                   "attempts": 0}]
    await store.enqueue("g", {"n": 2}, thread_id="thread-1")  # ended: the thread goes on
    assert [j["status"] for j in await store.jobs()] == ["queued"]


async def test_take_job_skips_held_jobs_and_live_claims(make_pg_store: MakeStore) -> None:
    store = make_pg_store()
    first = await store.enqueue("g", {"n": 1})
    second = await store.enqueue("g", {"n": 2})
    await store.claim(second, "run-x", now=T0, ttl=10)
    job = await store.take_job("w1", now=T0, hold=5)
    assert job is not None
    assert (job["thread_id"], job["input"]) == (first, {"n": 1})
    assert await store.take_job("w2", now=T0 + timedelta(seconds=4), hold=5) is None
    later = await store.take_job("w2", now=T0 + timedelta(seconds=10), hold=5)
    assert later is not None
    assert later["thread_id"] == first  # held 5 s only: the oldest comes back first
    last = await store.take_job("w3", now=T0 + timedelta(seconds=10), hold=5)
    assert last is not None
    assert last["thread_id"] == second  # the claim on it expired at 10 s


class _NoQueue:
    """A store with neither a run queue nor ``waiting()``."""


@pytest.mark.parametrize(
    ("make_args", "message"),
    [
        # A store without a queue but with waiting() (InMemoryCheckpointStore, SQLite) makes
        # a worker that only fires deadlines (tests/workers/test_deadline_worker.py).
        pytest.param(lambda s: (_NoQueue(), []),
                     "has no run queue and cannot list waiting runs", id="store"),
        pytest.param(lambda s: (s, ["not a graph"]), "is not a CompiledGraph", id="graph"),
    ],
)
async def test_a_worker_refuses_bad_arguments(
    make_pg_store: MakeStore, make_args: Any, message: str
) -> None:
    store, graphs = make_args(make_pg_store())
    with pytest.raises(InvalidArgument, match=message):
        Worker(store, graphs)


async def test_a_job_for_a_graph_the_worker_does_not_serve_is_left_for_one_that_does(
    make_pg_store: MakeStore,
) -> None:
    """Issue 23: "A worker marks jobs for graphs it does not serve as failed, so workers
    serving different graphs cannot share a queue: leave them for a worker that serves
    them." """
    store = make_pg_store()
    thread = await store.enqueue("unknown-graph", {})
    stats = await Worker(store, []).run(until_idle=True)
    assert (stats.errors, stats.runs) == (0, 0)
    assert await Worker(store, []).run(until_done=True) == stats  # none of its graphs queued
    (job,) = await store.jobs()
    assert (job["thread_id"], job["status"], job["error"], job["attempts"]) == (
        thread, "queued", None, 0)
    assert await store.take_job("w", now=T0, hold=5, graph_ids=["other"]) is None
    taken = await store.take_job("w", now=T0, hold=5, graph_ids=["unknown-graph", "other"])
    assert taken is not None
    assert taken["thread_id"] == thread
