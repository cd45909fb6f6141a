"""Schema versions 4 to 6 of the SQLite store (issue 29): a step is one row of the ``log``
table, folded into the indexed tables every ``FOLD_AT`` pieces (16 in version 4, 64 in 5;
in 6 a piece's events are folded whole, one row of ``event_pieces``).
What a user relies on: a step writes at most 3 WAL pages (counted, not timed), a file of
schema version 3, 4 or 5 opens and reads exactly as before (read-only as it is; writable
after a one-transaction migration), and every read gives the same answers whether the
pieces it reads are folded or not."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from graphflow_chains import counting_chain
from pytest_graphflow import (
    END,
    START,
    EventsCompacted,
    Graph,
    GraphRuntime,
    Resume,
    SQLiteCheckpointStore,
    StoreFileError,
    VirtualClock,
    interrupt,
)
from pytest_graphflow._stores.sqlite._schema import SCHEMA_VERSION
from pytest_graphflow._stores.sqlite._tail import FOLD_AT, unpack_events

_WAL_FRAME = 24  # bytes of a WAL frame's header, before its page


class Counter(BaseModel):
    n: int = 0
    m: int = 0
    approved: bool = False


def _chain(steps: int) -> Any:
    return counting_chain("chain", steps)


def _approval() -> Any:
    def ask(state: Counter) -> dict[str, Any]:
        return {"approved": interrupt({"n": state.n}, id="approve")}

    g = Graph("approval", Counter)
    g.node("one", lambda s: {"n": s.n + 1}).node("two", lambda s: {"m": s.m + 2})
    g.node("ask", ask, effect="human").node("done", lambda s: {"n": s.n * 10})
    g.edge(START, "one").edge(START, "two").edge(["one", "two"], "ask").edge("ask", "done")
    return g.edge("done", END).compile(checkpoint_policy="every_step")


def test_a_step_of_a_plain_chain_writes_at_most_3_wal_pages(tmp_path: Path) -> None:
    path = tmp_path / "pages.db"
    steps = 10 * FOLD_AT
    with SQLiteCheckpointStore(path) as store:
        db = store._conn
        db.execute("PRAGMA wal_autocheckpoint = 0")  # every frame stays in the -wal file
        runtime = GraphRuntime(store, clock=VirtualClock(), seed=0)
        graph = _chain(steps)
        runtime.invoke(graph, thread_id="warm")  # the tables exist and have pages
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (page_size,) = db.execute("PRAGMA page_size").fetchone()
        assert page_size == 4096
        before = os.path.getsize(f"{path}-wal")
        result = runtime.invoke(graph, thread_id="measured")
        frames = (os.path.getsize(f"{path}-wal") - max(before, 32)) // (page_size + _WAL_FRAME)
        assert result.data["n"] == steps
    # The run commits steps + 1 pieces (its first checkpoint, before the first node).
    assert frames <= 3 * steps, f"{frames / steps:.2f} WAL pages per step"


async def _events(store: SQLiteCheckpointStore, run_id: str) -> Any:
    try:
        return await store.events(run_id)
    except EventsCompacted as exc:
        kept = await store.events(run_id, exc.earliest_seq - 1)
        return ("compacted before", exc.earliest_seq, kept)


async def _reads(store: SQLiteCheckpointStore) -> dict[str, Any]:
    """Everything a user can read back from a store, as plain data."""
    out: dict[str, Any] = {"runs": await store.runs(),
                           "checkpointed": store.checkpointed_runs(),
                           "all": [c.model_dump() for c in await store.list()],
                           "waiting": [w.thread_id for w in await store.waiting(any_tenant=True)]}
    for run_id in out["checkpointed"]:
        listed = await store.list(run_id)
        out[run_id] = {
            "list": [c.model_dump() for c in listed],
            "latest": (await store.latest(run_id)).model_dump(),  # type: ignore[union-attr]
            "by_id": [(await store.get(c.id)).model_dump() for c in listed],  # type: ignore
            "events": await _events(store, run_id),
            "after_5": await store.events(run_id, after_seq=5),
            "record": await store.run(run_id),
            "page": [c.id for c in await store.list(run_id, limit=3,
                                                    before=listed[max(len(listed) - 2, 0)].id)],
            "nodes": {node: getattr(await store.load(run_id, node), "id", None)
                      for node in ("one", "two", "ask", "n3")},
            "thread": [c.id for c in await store.list(thread_id=listed[0].thread_id)],
            "artifacts": await store.artifacts(run_id),
        }
    return out


def _workload(path: Path) -> tuple[str, str]:
    """A store file with a finished chain, a run paused at an interrupt after a parallel
    batch, an artifact and compacted events; the paused run's id and thread."""
    with SQLiteCheckpointStore(path) as store:
        runtime = GraphRuntime(store, clock=VirtualClock(), seed=3)
        chain = runtime.invoke(_chain(2 * FOLD_AT + 3), thread_id="chain")
        paused = runtime.invoke(_approval(), thread_id="asks")
        assert paused.status == "interrupted"
        anyio.run(store.put_artifact, chain.run_id, "notes.txt", "kept")
        anyio.run(store.compact_events, chain.run_id, 4)
        runtime.invoke(_chain(5), thread_id="short")  # pieces left in the log
        return paused.run_id, paused.thread_id


def _unpack_folded(path: Path) -> None:
    """Move the folded pieces' events into ``events``, one row an event, and drop
    ``event_pieces``, as a build before schema version 6 kept them (the log stays)."""
    with SQLiteCheckpointStore(path) as store:
        db = store._conn
        db.execute("BEGIN IMMEDIATE")
        for (run,) in db.execute("SELECT DISTINCT run_id FROM event_pieces").fetchall():
            unpack_events(db, run)
        db.execute("DROP TABLE event_pieces")
        db.execute("COMMIT")


def _as_version_5(path: Path) -> None:
    """Rewrite a store file in the layout schema version 5 wrote: the folded events one a
    row, no ``event_pieces``; the log's pieces stay where they are (not folded)."""
    _unpack_folded(path)
    _as_version_6(path)
    db = sqlite3.connect(path)
    try:
        db.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
        db.commit()
    finally:
        db.close()


def _as_version_6(path: Path) -> None:
    """Rewrite a store file in the layout schema version 6 wrote: its log's rows without
    ``last``; the log's pieces stay where they are (not folded)."""
    db = sqlite3.connect(path)
    try:
        db.executescript("""
            BEGIN;
            ALTER TABLE log DROP COLUMN last;
            UPDATE meta SET value = '6' WHERE key = 'schema_version';
            COMMIT;
        """)
    finally:
        db.close()


def _as_version_3(path: Path) -> None:
    """Rewrite a store file in the layout schema version 3 wrote: every checkpoint and event
    in the indexed tables, no ``log`` table."""
    with SQLiteCheckpointStore(path) as store:
        store.vacuum()  # folds the log into the tables and empties it
    _unpack_folded(path)
    db = sqlite3.connect(path)
    try:
        db.executescript("""
            BEGIN;
            DROP TABLE log;
            DELETE FROM meta WHERE key = 'log_folded';
            UPDATE meta SET value = '3' WHERE key = 'schema_version';
            COMMIT;
        """)
    finally:
        db.close()


def _as_version_4(path: Path) -> None:
    """Rewrite a store file in the layout schema version 4 wrote: the log's pieces stay
    where they are (not folded), its rows without ``slots``."""
    _unpack_folded(path)
    _as_version_6(path)
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT COUNT(*) FROM log WHERE seq > COALESCE((SELECT CAST(value "
                          "AS INTEGER) FROM meta WHERE key = 'log_folded'), 0)"
                          ).fetchone()[0] > 0  # pieces not folded yet
        db.executescript("""
            BEGIN;
            ALTER TABLE log DROP COLUMN slots;
            UPDATE meta SET value = '4' WHERE key = 'schema_version';
            COMMIT;
        """)
    finally:
        db.close()


def _bytes(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.parent.iterdir())
            if p.name.startswith(path.name)}


@contextlib.contextmanager
def _migrated(path: Path, downgrade: Callable[[Path], None], version: int
              ) -> Iterator[tuple[SQLiteCheckpointStore, str]]:
    """A workload's file turned into ``version``'s layout: it reads as it read before, a
    read-only open changes none of its bytes, and its first writable open (yielded, with the
    paused run) migrates it to the current schema and still reads the same."""
    paused_run, thread = _workload(path)
    with SQLiteCheckpointStore(path, readonly=True) as reader:
        expected = anyio.run(_reads, reader)  # read with the log not folded yet
    assert expected[paused_run]["nodes"]["ask"] is not None
    assert expected["waiting"] == [thread]
    downgrade(path)
    before = _bytes(path)
    with SQLiteCheckpointStore(path, readonly=True) as reader:
        assert anyio.run(_reads, reader) == expected
    assert _bytes(path) == before, f"a read-only open of a version-{version} file wrote"
    with SQLiteCheckpointStore(path) as store:
        assert store._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                                   ).fetchone() == ("7",) == (str(SCHEMA_VERSION),)
        assert anyio.run(_reads, store) == expected
        yield store, paused_run


def _resumes(store: SQLiteCheckpointStore, paused_run: str) -> None:
    """The paused run goes on from the migrated file."""
    done = GraphRuntime(store, clock=VirtualClock(), seed=4).resume(
        paused_run, Resume(True), graph=_approval())
    assert done.status == "completed"
    assert done.data == {"n": 10, "m": 2, "approved": True}


def test_a_version_3_file_reads_the_same_and_migrates(tmp_path: Path) -> None:
    with _migrated(tmp_path / "old.db", _as_version_3, 3) as (store, paused_run):
        assert store._conn.execute("SELECT COUNT(*) FROM log").fetchone() == (0,)
        _resumes(store, paused_run)


def test_a_version_4_file_reads_the_same_and_migrates(tmp_path: Path) -> None:
    """Version 5's log has 64 slots (16 before): a version-4 file reads as it is, and its
    first writable open folds its log into the indexed tables and lays out the new log
    (and version 6's ``event_pieces``)."""
    with _migrated(tmp_path / "v4.db", _as_version_4, 4) as (store, paused_run):
        assert store._conn.execute("SELECT COUNT(*) FROM log").fetchone() == (0,)
        _resumes(store, paused_run)


def test_a_version_5_file_reads_the_same_and_migrates(tmp_path: Path) -> None:
    """Version 6 folds a piece's events whole into ``event_pieces``: a version-5 file (its
    folded events one a row in ``events``, pieces in the log) reads as it is, and its first
    writable open adds the empty table; the events folded before stay where they are and
    read as before, merged with those folded after, by seq."""
    with _migrated(tmp_path / "v5.db", _as_version_5, 5) as (store, paused_run):
        db = store._conn
        assert db.execute("SELECT COUNT(*) FROM event_pieces").fetchone() == (0,)
        assert db.execute("SELECT COUNT(*) FROM events").fetchone()[0] > 0
        _resumes(store, paused_run)
        expected_events = anyio.run(store.events, paused_run)
        store.vacuum()  # the paused run's later pieces folded: its events in both tables
        assert db.execute("SELECT COUNT(*) FROM event_pieces WHERE run_id = ?",
                          (paused_run,)).fetchone()[0] > 0
        assert db.execute("SELECT COUNT(*) FROM events WHERE run_id = ?",
                          (paused_run,)).fetchone()[0] > 0
        assert anyio.run(store.events, paused_run) == expected_events
        assert [e["seq"] for e in expected_events] == sorted(
            {e["seq"] for e in expected_events})


def test_a_version_6_file_reads_the_same_and_migrates(tmp_path: Path) -> None:
    """Version 7's log rows keep their events' highest seq (``last``), which a fold copies:
    a version-6 file (pieces in its log, not folded yet) reads as it is, and its first
    writable open adds the column, filled in for each row with events; a fold then moves
    the same highest seqs into ``event_pieces`` as version 6 worked out, and the events
    read the same, from any seq."""
    with _migrated(tmp_path / "v6.db", _as_version_6, 6) as (store, paused_run):
        db = store._conn
        rows = db.execute("SELECT seq, ev_keys, last FROM log WHERE events IS NOT NULL"
                          ).fetchall()
        assert rows
        assert all(last == max(seq for seq, _ in json.loads(keys)) for _, keys, last in rows)
        assert db.execute("SELECT COUNT(*) FROM log WHERE events IS NULL AND last IS NOT NULL"
                          ).fetchone() == (0,)
        runs = [r for (r,) in db.execute("SELECT DISTINCT run_id FROM log")]
        before = {(run, n): anyio.run(store.events, run, n) for run in runs for n in (0, 5, 9)}
        store.vacuum()  # the log folded: its pieces' ``last`` in event_pieces
        assert db.execute("SELECT COUNT(*) FROM event_pieces WHERE last IS NOT (SELECT MAX("
                          "json_extract(value, '$[0]')) FROM json_each(ev_keys))"
                          ).fetchone() == (0,)
        assert {(run, n): anyio.run(store.events, run, n) for run, n in before} == before
        _resumes(store, paused_run)


def test_a_piece_keeps_its_highest_seq_whatever_the_order_of_its_events(
        tmp_path: Path) -> None:
    """Events recorded out of seq order: the piece's ``last`` is the highest seq, not the
    last one, so a read from a seq between them still finds the piece once folded."""
    with SQLiteCheckpointStore(tmp_path / "s.db") as store:
        events = [{"seq": s, "run_id": "run-a", "type": "custom"} for s in (7, 3, 5)]
        anyio.run(store.record_events, "run-a", events)
        db = store._conn
        assert db.execute("SELECT last FROM log WHERE run_id = 'run-a'").fetchone() == (7,)
        store.vacuum()
        assert db.execute("SELECT last FROM event_pieces WHERE run_id = 'run-a'"
                          ).fetchone() == (7,)
        assert [e["seq"] for e in anyio.run(store.events, "run-a", 6)] == [7]


def test_a_piece_a_version_6_build_wrote_folds_as_it_did(tmp_path: Path) -> None:
    """A process of a version-6 build that opened the file before it was migrated writes
    log rows without ``last``: a fold works it out of their ``ev_keys`` as version 6 did, so
    a read from any seq finds their events once folded."""
    with SQLiteCheckpointStore(tmp_path / "mixed.db") as store:
        run = GraphRuntime(store, clock=VirtualClock(), seed=0).invoke(_chain(6))
        db = store._conn
        db.execute("UPDATE log SET last = NULL")  # as a version-6 build's insert leaves it
        before = {n: anyio.run(store.events, run.run_id, n) for n in (0, 5, 12)}
        assert all(before.values())
        store.vacuum()  # folded
        assert db.execute("SELECT COUNT(*) FROM event_pieces WHERE last IS NOT (SELECT MAX("
                          "json_extract(value, '$[0]')) FROM json_each(ev_keys))"
                          ).fetchone() == (0,)
        assert {n: anyio.run(store.events, run.run_id, n) for n in before} == before


def test_a_version_4_build_cannot_overwrite_a_version_5_log(tmp_path: Path) -> None:
    """A process still running a build that writes version 4 (16 slots) would put its
    pieces over ones not folded yet: its write is refused instead."""
    path = tmp_path / "v5.db"
    _workload(path)
    db = sqlite3.connect(path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="slots"):
            db.execute("INSERT OR REPLACE INTO log (slot, seq, run_id) VALUES (1, 999, 'r')")
    finally:
        db.close()


def test_reads_agree_before_and_after_the_log_is_folded(tmp_path: Path) -> None:
    path = tmp_path / "fold.db"
    _workload(path)
    with SQLiteCheckpointStore(path) as store:
        unfolded = anyio.run(_reads, store)
        assert store._conn.execute("SELECT COUNT(*) FROM log").fetchone()[0] > 0
        store.vacuum()
        assert anyio.run(_reads, store) == unfolded


@pytest.mark.anyio
async def test_a_failed_fold_keeps_every_piece(tmp_path: Path) -> None:
    """A commit fails while the log is full (the disk is full): nothing of it is kept, and
    every checkpoint and event committed before reads as it did; the run that failed
    resumes from its last checkpoint once there is space."""
    path = tmp_path / "full.db"
    with SQLiteCheckpointStore(path) as store:
        runtime = GraphRuntime(store, clock=VirtualClock(), seed=0)
        await runtime.ainvoke(_chain(FOLD_AT - 2), thread_id="t")
        before = await _reads(store)
        (pages,) = store._conn.execute("PRAGMA page_count").fetchone()
        store._conn.execute(f"PRAGMA max_page_count = {pages}")
        store._conn.execute("PRAGMA incremental_vacuum")  # no free page left to reuse
        with pytest.raises(StoreFileError, match="full"):
            await runtime.ainvoke(_chain(3 * FOLD_AT), thread_id="t2")
        after = await _reads(store)
        (run_id,) = before["checkpointed"]
        assert after[run_id] == before[run_id]
        failed = [r for r in after["checkpointed"] if r != run_id]
        store._conn.execute("PRAGMA max_page_count = 1000000")
        for run in failed:  # its committed pieces are whole: it goes on from the last one
            done = await runtime.aresume(run, graph=_chain(3 * FOLD_AT))
            assert done.data["n"] == 3 * FOLD_AT


def chain_past_a_fold() -> Any:
    """A chain whose commits go past the first fold (built again in each process)."""
    return _chain(FOLD_AT + 4)


def sqlite_in(directory: str) -> SQLiteCheckpointStore:
    """The store ``check_crash_recovery`` reopens in each fresh process."""
    return SQLiteCheckpointStore(Path(directory) / "crash.db")


def test_a_process_killed_around_a_fold_loses_no_acknowledged_step() -> None:
    """A real process is killed before and after the commits next to a fold (the log full,
    the fold, the first piece after it); a fresh process reopens the file, finds every
    checkpoint whose commit returned, and ends where the crash-free run ends."""
    from pytest_graphflow.invariants import check_crash_recovery

    found = check_crash_recovery(chain_past_a_fold, {}, store_factory=sqlite_in,
                                 points=[FOLD_AT - 1, FOLD_AT, FOLD_AT + 1],
                                 phases=("before", "after"))
    assert found == []


class _FoldBetweenReads:
    """A connection that lets another store fold the log right after its first read of the
    indexed ``checkpoints`` table (the moment a read of both tables is most exposed)."""

    def __init__(self, db: sqlite3.Connection, fold: Any) -> None:
        self._db, self._fold = db, fold

    def execute(self, sql: str, *args: Any) -> Any:
        cursor = self._db.execute(sql, *args)
        if self._fold is not None and ("FROM checkpoints" in sql or "FROM events" in sql):
            rows = cursor.fetchall()
            fold, self._fold = self._fold, None
            fold()
            return _Rows(rows)
        return cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def fetchall(self) -> list[Any]:
        return self.rows

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None


@pytest.mark.anyio
async def test_a_read_sees_one_moment_while_another_store_folds_the_log(tmp_path: Path) -> None:
    """Another store folds the log between a read's two queries (the indexed table, then the
    log): the read still sees every checkpoint, once."""
    path = tmp_path / "race.db"
    with SQLiteCheckpointStore(path) as writer, SQLiteCheckpointStore(path) as reader:

        def fold() -> None:
            with writer._folded():
                pass

        for seed, read in enumerate((reader.list, reader.latest, reader.events)):
            run = await GraphRuntime(writer, clock=VirtualClock(), seed=seed).ainvoke(_chain(5))
            expected = await read(run.run_id)  # type: ignore[operator]
            assert writer._conn.execute("SELECT COUNT(*) FROM log").fetchone()[0] > 0
            plain = reader._conn
            reader._db = _FoldBetweenReads(plain, fold)  # type: ignore[assignment]
            try:
                assert await read(run.run_id) == expected  # type: ignore[operator]
            finally:
                reader._db = plain


@pytest.mark.anyio
async def test_a_fold_is_four_statements_however_many_events_it_moves(tmp_path: Path) -> None:
    """Schema version 6: a fold copies the log's checkpoints and its pieces' events in two
    statements, the events whole (one ``event_pieces`` row a piece): four statements for
    a full log of pieces of four events each (was 258: one insert an event, a read of the pieces
    into Python). The events read back the same before and after."""
    from pytest_graphflow._stores.sqlite._tail import fold

    path = tmp_path / "fold.db"
    with SQLiteCheckpointStore(path) as store:
        run = await GraphRuntime(store, clock=VirtualClock(), seed=0).ainvoke(
            _chain(FOLD_AT - 2))  # nearly FOLD_AT pieces in the log, none folded
        db = store._conn
        live = db.execute("SELECT COUNT(*) FROM log WHERE events IS NOT NULL").fetchone()[0]
        assert live >= FOLD_AT - 2
        expected = await store.events(run.run_id)
        assert len(expected) > 3 * FOLD_AT
        seen: list[str] = []
        db.execute("BEGIN IMMEDIATE")
        db.set_trace_callback(seen.append)
        fold(db, 0)
        db.set_trace_callback(None)
        db.execute("COMMIT")
        assert len(seen) <= 4, seen
        assert db.execute("SELECT COUNT(*) FROM event_pieces").fetchone() == (live,)
        assert db.execute("SELECT COUNT(*) FROM events").fetchone() == (0,)
        assert await store.events(run.run_id) == expected
        assert await store.events(run.run_id, after_seq=100) == [
            e for e in expected if e["seq"] > 100]


@pytest.mark.anyio
async def test_a_fold_copies_each_piece_s_highest_seq_as_the_log_keeps_it(
        tmp_path: Path) -> None:
    """Schema version 7: a log row keeps its events' highest seq (``last``), and a fold
    copies it; it was worked out of each piece's ``ev_keys`` with ``json_each`` and a
    ``json_extract`` an event (175 SQLite VM instructions a piece of a plain chain's fold,
    and about 19 k CPU instructions; 143 after). And the fold reads the live pieces in
    seq order as two ranges of slots, where an ``ORDER BY seq`` sorted them (about 5 k CPU
    instructions a piece; 114 VM instructions after)."""
    from pytest_graphflow._stores.sqlite._tail import fold

    with SQLiteCheckpointStore(tmp_path / "fold.db") as store:
        await GraphRuntime(store, clock=VirtualClock(), seed=0).ainvoke(_chain(FOLD_AT - 2))
        db = store._conn
        live = db.execute("SELECT COUNT(*) FROM log WHERE events IS NOT NULL").fetchone()[0]
        ops = [0]

        def instruction() -> int:
            ops[0] += 1
            return 0

        db.execute("BEGIN IMMEDIATE")
        db.set_progress_handler(instruction, 1)
        fold(db, 0)
        db.set_progress_handler(None, 1)
        db.execute("COMMIT")
        assert ops[0] <= 120 * live, ops[0] / live
        assert db.execute("SELECT COUNT(*) FROM event_pieces WHERE last IS NOT (SELECT MAX("
                          "json_extract(value, '$[0]')) FROM json_each(ev_keys))"
                          ).fetchone() == (0,)


@pytest.mark.anyio
async def test_packed_events_read_compact_and_delete_as_events_one_a_row(
        tmp_path: Path) -> None:
    """The same events read the same from the log, from ``event_pieces`` and from
    ``events`` (one a row): a seq written again in a later piece replaces the earlier one
    wherever each is, a read from a seq inside a piece starts there, and compacting or
    deleting counts each event once."""
    path = tmp_path / "packed.db"
    with SQLiteCheckpointStore(path) as store:
        db = store._conn

        async def write(seqs: range, tag: str) -> None:
            await store.record_events("run-p", [{"seq": s, "type": "custom", "tag": tag}
                                                for s in seqs])

        await write(range(0, 10), "a")
        await write(range(10, 20), "a")
        await write(range(5, 15), "b")  # rewrites 5..14, across both earlier pieces
        in_log = [await store.events("run-p"), await store.events("run-p", after_seq=12)]
        assert [e["tag"] for e in in_log[0]] == ["a"] * 5 + ["b"] * 10 + ["a"] * 5
        assert [e["seq"] for e in in_log[1]] == list(range(13, 20))
        with store._folded():
            pass
        assert db.execute("SELECT COUNT(*), MIN(last), MAX(last) FROM event_pieces"
                          ).fetchone() == (3, 9, 19)
        assert [await store.events("run-p"), await store.events("run-p", after_seq=12)
                ] == in_log
        await write(range(18, 22), "c")  # in the log, newer than the folded pieces
        both = await store.events("run-p")
        assert [(e["seq"], e["tag"]) for e in both[-4:]] == [(18, "c"), (19, "c"), (20, "c"),
                                                             (21, "c")]
        assert await store.compact_events("run-p", 7) == 7  # seqs 0..6, each once
        assert db.execute("SELECT COUNT(*) FROM event_pieces").fetchone() == (0,)
        assert await store.events("run-p", after_seq=6) == both[7:]
        with pytest.raises(EventsCompacted):
            await store.events("run-p")
