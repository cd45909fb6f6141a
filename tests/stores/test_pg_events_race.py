"""The PostgreSQL store's event log under concurrent writers (issue 29, schema version 3): a
fenced step's events row and an unfenced ``record_events`` merge on overlapping seqs of one
run, on two connections at once, never leave overlapping rows. The merge marks the run's
claim rows under the run's events lock; a step holds its claim row share-locked, so it waits
for a merge under way, and one whose snapshot missed a merge's commit finds the claim row it
locked newer than the one its snapshot sees, and merges too."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from test_pg_event_rows import T0, _event, _no_overlap, _rows

from pytest_graphflow import PostgresCheckpointStore
from pytest_graphflow._stores._wire import event_row
from pytest_graphflow._stores.postgres import _schema as _pgschema
from pytest_graphflow._stores.postgres._events import write_events

MakeStore = Callable[..., PostgresCheckpointStore]

pytestmark = pytest.mark.anyio


def _wait_until_waiting(dsn: str, pid: int, timeout: float) -> bool:
    """Whether the backend ``pid`` came to wait for a lock within ``timeout``."""
    end = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < end:
            row = conn.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                               (pid,)).fetchone()
            if row is not None and row[0] == "Lock":
                return True
            time.sleep(0.01)
    return False


async def test_a_step_waits_for_a_merge_in_progress_and_their_rows_never_overlap(
    make_pg_store: MakeStore, postgres_dsn: str, pg_schema: str
) -> None:
    """A ``record_events`` of seqs 4..6 holds its transaction open (its merged row written,
    not committed) while the claim holder commits a step of seqs 3..5 on another connection:
    the step waits for the merge (the claim row it marked), then, its snapshot older than the
    merge's commit, merges instead of inserting (its events overwrite 4 and 5). Before the
    fix the step inserted its row 3..5 at once (its snapshot did not see the merge's row
    4..6) and the log held two overlapping rows."""
    stepper, recorder = make_pg_store(), make_pg_store()
    run, thread = "run-race", "thread-race"
    token = await stepper.claim(thread, run, now=T0)
    await stepper.commit(thread, token, run_id=run,
                         events=[_event(run, s, "step-0") for s in range(3)])
    stepper_pid = stepper._pg.sync_connection().info.backend_pid
    merged, waited, failed = threading.Event(), [False], []

    def merge() -> None:
        async def hold_open() -> None:
            async with recorder._pg.tx() as cur:
                await write_events(cur, run, [event_row(run, _event(run, s, "merge"))
                                              for s in (4, 5, 6)])
                merged.set()
                waited[0] = _wait_until_waiting(postgres_dsn, stepper_pid, timeout=3.0)

        try:
            asyncio.run(hold_open())
        except BaseException as exc:  # pragma: no cover - reported below
            failed.append(exc)

    worker = threading.Thread(target=merge)
    worker.start()
    try:
        assert merged.wait(10)
        await stepper.commit(thread, token, run_id=run,
                             events=[_event(run, s, "step-1") for s in (3, 4, 5)])
    finally:
        worker.join(10)
    assert not failed
    assert waited[0], "the step did not wait for the merge in progress"
    _no_overlap(postgres_dsn, pg_schema)
    assert [(e["seq"], e["tag"]) for e in await stepper.events(run)] == [
        (0, "step-0"), (1, "step-0"), (2, "step-0"), (3, "step-1"), (4, "step-1"),
        (5, "step-1"), (6, "merge")]


@pytest.mark.parametrize("seed", range(3))
async def test_steps_and_record_events_racing_on_two_connections_never_overlap(
    make_pg_store: MakeStore, postgres_dsn: str, pg_schema: str, seed: int
) -> None:
    """A claim holder commits steps of three seqs each while another thread, on its own
    connection, records events on seqs around the steps' frontier, both as fast as they
    can: afterwards the run's rows never overlap, every seq written is read back once, and
    each holds one of the events written for it."""
    stepper, recorder = make_pg_store(), make_pg_store()
    run, thread = f"run-stress-{seed}", f"thread-stress-{seed}"
    token = await stepper.claim(thread, run, now=T0)
    frontier, stop, failed = [0], threading.Event(), []
    written: dict[int, set[str]] = {}
    lock = threading.Lock()

    def record() -> None:
        rng = random.Random(seed)

        async def loop() -> None:
            i = 0
            while not stop.is_set():
                start = frontier[0] + rng.randrange(-2, 5)
                seqs = [s for s in range(start, start + rng.randrange(1, 5)) if s >= 0]
                if not seqs:
                    continue
                tag = f"rec-{i}"
                with lock:
                    for s in seqs:
                        written.setdefault(s, set()).add(tag)
                await recorder.record_events(run, [_event(run, s, tag) for s in seqs])
                i += 1

        try:
            asyncio.run(loop())
        except BaseException as exc:  # pragma: no cover - reported below
            failed.append(exc)

    worker = threading.Thread(target=record)
    worker.start()
    try:
        for step in range(80):
            seqs = range(3 * step, 3 * step + 3)
            tag = f"step-{step}"
            with lock:
                for s in seqs:
                    written.setdefault(s, set()).add(tag)
            await stepper.commit(thread, token, run_id=run,
                                 events=[_event(run, s, tag) for s in seqs])
            frontier[0] = 3 * step + 3
    finally:
        stop.set()
        worker.join(30)
    assert not failed
    _no_overlap(postgres_dsn, pg_schema)
    got = await stepper.events(run)
    assert [e["seq"] for e in got] == sorted(written)
    assert all(e["tag"] in written[e["seq"]] for e in got)
    rows = _rows(postgres_dsn, pg_schema, "SELECT count(*) FROM events WHERE run_id = %s",
                 (run,))
    assert 0 < rows[0][0] <= len(written)



def _layout(dsn: str, schema: str) -> tuple[str, bool, bool]:
    """The schema's version, whether it has the ``checkpoints_order`` index and whether it
    has the ``claims_run`` index."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT (SELECT value FROM {schema}.meta WHERE key = 'schema_version'), "
            "to_regclass(%s) IS NOT NULL, to_regclass(%s) IS NOT NULL",
            (f"{schema}.checkpoints_order", f"{schema}.claims_run"),
        ).fetchone()
    assert row is not None
    return row


async def test_a_version_2_schema_migrates_in_place_and_a_failed_migration_leaves_it(
    postgres_dsn: str, fresh_pg_schema: str, monkeypatch: pytest.MonkeyPatch,
    make_cp: Callable[..., Any],
) -> None:
    """A version-2 schema (the ``checkpoints_order`` index, no ``claims_run``) becomes
    version 3 when a store opens: the one index dropped, the other created, its rows read
    back as they were and new steps written on them; a migration that fails leaves version
    2 as it was. ``drop()`` removes the tables and the schema."""
    schema = fresh_pg_schema
    with PostgresCheckpointStore(postgres_dsn, schema=schema) as store:
        await store.save(make_cp("cp-1", run="run-m", thread="thread-m"))
        await store.record_events("run-m", [_event("run-m", s, "v2") for s in (0, 1)])
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:  # as a version-2 build left it
        conn.execute(f"SET search_path = {schema}")
        conn.execute("CREATE INDEX checkpoints_order ON checkpoints (ts_us, save_order)")
        conn.execute("DROP INDEX claims_run")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    assert _layout(postgres_dsn, schema) == ("2", True, False)
    monkeypatch.setitem(_pgschema.MIGRATIONS, 2, [*_pgschema.MIGRATIONS[2], "SELECT 1/0"])
    with pytest.raises(psycopg.errors.DivisionByZero):
        PostgresCheckpointStore(postgres_dsn, schema=schema)
    assert _layout(postgres_dsn, schema) == ("2", True, False)
    monkeypatch.undo()

    store = PostgresCheckpointStore(postgres_dsn, schema=schema)
    try:
        assert _layout(postgres_dsn, schema) == (str(_pgschema.SCHEMA_VERSION), False, True)
        assert [c.id for c in await store.list()] == ["cp-1"]
        token = await store.claim("thread-m", "run-m", now=T0)
        await store.commit("thread-m", token, run_id="run-m",
                           checkpoints=[make_cp("cp-2", run="run-m", thread="thread-m",
                                                at=1, parent_id="cp-1")],
                           events=[_event("run-m", s, "v3") for s in (2, 3)])
        assert [(e["seq"], e["tag"]) for e in await store.events("run-m")] == [
            (0, "v2"), (1, "v2"), (2, "v3"), (3, "v3")]
        assert [c.id for c in await store.list(limit=1)] == ["cp-2"]
    finally:
        store.drop()
        store.close()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                            (schema,)).fetchone() is None
