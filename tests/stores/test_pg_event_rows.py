"""The PostgreSQL store's event log, schema version 2 (issue 29): the events written together
are one row, so a step writes one events row, not one per event. What a user reads back is
unchanged: the same events as the SQLite store's for the same run, the same answers as the
in-memory store's for any mix of steps, overwrites and compactions (the general merge path
against the step's one-row path), and a version-1 schema migrates in place, its events read
back as they were."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from graphflow_chains import counting_chain
from pytest_graphflow import (
    GraphRuntime,
    InMemoryCheckpointStore,
    PostgresCheckpointStore,
    SQLiteCheckpointStore,
    VirtualClock,
)
from pytest_graphflow._stores.postgres import _schema as _pgschema
from pytest_graphflow.errors import EventsCompacted

MakeStore = Callable[..., PostgresCheckpointStore]
T0 = datetime(2025, 1, 1, tzinfo=UTC)

pytestmark = pytest.mark.anyio


def _chain(steps: int) -> Any:
    return counting_chain("evchain", steps)


def _rows(dsn: str, schema: str, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"SET search_path = {schema}")
        return conn.execute(sql, params).fetchall()


def _no_overlap(dsn: str, schema: str) -> None:
    """The invariant the log's reads rely on: a run's rows never overlap, and each row's
    ``seqs`` ascend from ``seq`` to ``last_seq``, one JSON text a seq."""
    rows = _rows(dsn, schema, "SELECT run_id, seq, last_seq, seqs, data FROM events "
                 "ORDER BY run_id, seq")
    ends: dict[str, int] = {}
    for run, seq, last, seqs, data in rows:
        numbers = [int(s) for s in seqs.split(",")]
        assert numbers == sorted(set(numbers))
        assert (numbers[0], numbers[-1]) == (seq, last)
        assert len(data.split("\n")) == len(numbers)
        assert seq > ends.get(run, -(10**18))
        ends[run] = last


async def test_a_step_writes_one_events_row_and_reads_back_what_sqlite_does(
    make_pg_store: MakeStore, postgres_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    """A chain of 12 steps: one events row a commit (the ceiling: no more rows than
    checkpoints), and the run's events equal the SQLite store's for the same seed."""
    graph = _chain(12)
    pg = make_pg_store()
    got = await GraphRuntime(pg, clock=VirtualClock(start=T0), seed=7).ainvoke(graph)
    sqlite = SQLiteCheckpointStore(tmp_path / "s.db")
    try:
        want = await GraphRuntime(sqlite, clock=VirtualClock(start=T0), seed=7).ainvoke(graph)
        assert got.run_id == want.run_id
        events = await pg.events(got.run_id)
        assert events == await sqlite.events(want.run_id)
        assert await pg.events(got.run_id, after_seq=9) == await sqlite.events(
            want.run_id, after_seq=9)
    finally:
        sqlite.close()
    ((rows,),) = _rows(postgres_dsn, pg_schema, "SELECT count(*) FROM events WHERE run_id = %s",
                       (got.run_id,))
    ((checkpoints,),) = _rows(postgres_dsn, pg_schema,
                              "SELECT count(*) FROM checkpoints WHERE run_id = %s", (got.run_id,))
    assert len(events) > 3 * checkpoints  # several events a step ...
    assert rows <= checkpoints  # ... one row a commit (version 1 wrote one row an event)
    _no_overlap(postgres_dsn, pg_schema)


def _event(run: str, seq: int, tag: str) -> dict[str, Any]:
    return {"seq": seq, "type": "custom", "run_id": run, "tag": tag, "text": "a\nb \"q\""}


async def _same_reads(pg: Any, ref: Any, run: str, top: int) -> None:
    for after in (None, -1, 0, 3, 7, 8, 15, 16, top):
        answers = []
        for store in (pg, ref):
            try:
                answers.append(await store.events(run, after_seq=after))
            except EventsCompacted as exc:
                answers.append(("compacted", exc.earliest_seq))
        assert answers[0] == answers[1], after


@pytest.mark.parametrize("seed", range(6))
async def test_steps_overwrites_and_compactions_read_back_as_in_memory(
    make_pg_store: MakeStore, postgres_dsn: str, pg_schema: str, seed: int
) -> None:
    """Random mixes of commits (the step's one-row path, or the merge when their seqs reach
    into recorded rows or below the compaction point), ``record_events`` (seqs anywhere,
    out of order, repeated: the last kept), and compactions (cutting rows in two): after
    each, every read and every count equals the in-memory store's, and no rows overlap."""
    rng = random.Random(seed)
    pg, ref = make_pg_store(), InMemoryCheckpointStore()
    run, thread = "run-a", "thread-a"
    tokens = [await s.claim(thread, run, now=T0) for s in (pg, ref)]
    top = 40
    for i in range(30):
        op = rng.choice(["commit", "commit", "record", "compact"])
        tag = f"{seed}-{i}"
        if op == "commit":
            start = rng.randrange(0, top)
            events = [_event(run, s, tag) for s in range(start, start + rng.randrange(1, 6))]
            for store, token in zip((pg, ref), tokens, strict=True):
                await store.commit(thread, token, run_id=run, events=events)
        elif op == "record":
            seqs = [rng.randrange(0, top) for _ in range(rng.randrange(1, 6))]
            for store in (pg, ref):
                await store.record_events(run, [_event(run, s, f"{tag}-{k}")
                                                for k, s in enumerate(seqs)])
        else:
            before = rng.randrange(0, top)
            assert await pg.compact_events(run, before) == await ref.compact_events(run, before)
        await _same_reads(pg, ref, run, top)
        _no_overlap(postgres_dsn, pg_schema)


async def test_a_version_1_schema_migrates_in_place_and_reads_back_its_events(
    postgres_dsn: str, fresh_pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version-1 log (one row an event, a ``type`` column) becomes version 2 in one
    transaction when a store opens: the same events read back, compaction and overwrites
    work on the migrated rows, and new steps append rows of their own."""
    schema = fresh_pg_schema
    with PostgresCheckpointStore(postgres_dsn, schema=schema):
        pass
    v1 = [(run, seq, "custom", f'{{"seq":{seq},"run_id":"{run}","type":"custom"}}')
          for run in ("run-a", "run-b") for seq in (0, 1, 2, 5, 6)]
    with psycopg.connect(postgres_dsn) as conn:  # the version-1 layout, as a v1 build left it
        conn.execute(f"SET search_path = {schema}")
        conn.execute("DROP TABLE events")
        conn.execute("CREATE TABLE events (run_id TEXT NOT NULL, seq BIGINT NOT NULL, "
                     "type TEXT, data TEXT NOT NULL, PRIMARY KEY (run_id, seq))")
        conn.cursor().executemany("INSERT INTO events VALUES (%s, %s, %s, %s)", v1)
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    # A failing migration leaves version 1 and its rows as they were.
    monkeypatch.setitem(_pgschema.MIGRATIONS, 1, [*_pgschema.MIGRATIONS[1], "SELECT 1/0"])
    with pytest.raises(psycopg.errors.DivisionByZero):
        PostgresCheckpointStore(postgres_dsn, schema=schema)
    assert _rows(postgres_dsn, schema, "SELECT value FROM meta WHERE key = "
                 "'schema_version'") == [("1",)]
    assert len(_rows(postgres_dsn, schema, "SELECT type FROM events")) == len(v1)
    monkeypatch.undo()

    store = PostgresCheckpointStore(postgres_dsn, schema=schema)
    try:
        assert _rows(postgres_dsn, schema, "SELECT value FROM meta WHERE key = "
                     "'schema_version'") == [(str(_pgschema.SCHEMA_VERSION),)]
        _no_overlap(postgres_dsn, schema)
        want = [{"seq": s, "run_id": "run-a", "type": "custom"} for s in (0, 1, 2, 5, 6)]
        assert await store.events("run-a") == want
        assert await store.events("run-b", after_seq=2) == [
            {"seq": s, "run_id": "run-b", "type": "custom"} for s in (5, 6)]
        assert await store.compact_events("run-a", 2) == 2
        await store.record_events("run-a", [{"seq": 5, "run_id": "run-a", "type": "new"},
                                            {"seq": 3, "run_id": "run-a", "type": "new"}])
        token = await store.claim("thread-a", "run-a", now=T0)
        await store.commit("thread-a", token, run_id="run-a",
                           events=[{"seq": s, "run_id": "run-a", "type": "step"}
                                   for s in (7, 8, 9)])
        assert [(e["seq"], e["type"]) for e in await store.events("run-a", after_seq=1)] == [
            (2, "custom"), (3, "new"), (5, "new"), (6, "custom"), (7, "step"), (8, "step"),
            (9, "step")]
        _no_overlap(postgres_dsn, schema)
    finally:
        store.drop()
        store.close()


async def test_a_commit_of_a_checkpoint_id_already_stored_overwrites_it_as_sqlite_does(
    make_pg_store: MakeStore, tmp_path: Path, make_cp: Callable[..., Any]
) -> None:
    """The step's statement inserts its checkpoint (no upsert); an id already stored fails
    it, and the transaction path overwrites the row: the same answers as the SQLite store's
    upsert, whichever path a commit takes."""
    pg = make_pg_store()
    sqlite = SQLiteCheckpointStore(tmp_path / "s.db")
    try:
        for store in (pg, sqlite):
            await store.save(make_cp("cp-1", at=1, state={"v": 1}))
            token = await store.claim("thread-b", "run-a", now=T0)
            moved = make_cp("cp-1", at=2, state={"v": 2}, thread="thread-b")
            await store.commit("thread-b", token, run_id="run-a", checkpoints=[moved],
                               events=[_event("run-a", 0, "x")])
            await store.commit("thread-b", token, run_id="run-a",
                               checkpoints=[make_cp("cp-2", at=3, parent_id="cp-1",
                                                    thread="thread-b")])
        for read in (lambda s: s.get("cp-1"), lambda s: s.list(thread_id="thread-b"),
                     lambda s: s.list("run-a"), lambda s: s.events("run-a")):
            assert await read(pg) == await read(sqlite)
        got = await pg.get("cp-1")
        assert got is not None
        assert (got.thread_id, got.state) == ("thread-b", {"v": 2})
    finally:
        sqlite.close()
