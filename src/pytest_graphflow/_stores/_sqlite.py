"""``SQLiteCheckpointStore``: a durable store in one SQLite file (SPEC §5, seeds 002–004).

The store calls :mod:`sqlite3` synchronously inside its async methods: the deterministic
runtime must not see worker threads, and every operation is one short transaction. The
file is in WAL mode, so another process (or ``graphflow``) can read it while a run writes.
Opening, identifying and migrating the file live in :mod:`._sqlite_file`; how a checkpoint
becomes a row (its visited path kept incrementally) in :mod:`._sqlite_rows`.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import Any

from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from .._records._checkpoint import Checkpoint
from .._records._checks import check_id, check_optional_id
from .._records._ids import derived_hex
from .._records._json import NotJSONError, to_json_value
from ..errors import (
    CheckpointNotFound,
    ForkTargetExists,
    InvalidArgument,
    StoreFileError,
    ThreadBusy,
)
from . import _claims as rules
from ._closing import ClosingStore
from ._protocol import Fence
from ._sqlite_file import open_store
from ._sqlite_rows import SELECT, PathWriter, decode, encode
from ._sqlite_schema import SCHEMA_VERSION, file_error

__all__ = ["SCHEMA_VERSION", "SQLiteCheckpointStore"]

_Records = list[dict[str, Any]]
"""A list of JSON records (events, run records, artifact descriptions)."""

_ORDER = "ORDER BY ts_us, seq"
_NEWEST = "ORDER BY ts_us DESC, seq DESC LIMIT 1"
_INSERT = (
    "INSERT INTO checkpoints (id, run_id, thread_id, graph_id, node_id, step, timestamp, "
    "ts_us, status, tenant_id, format_version, path_id, path_len, data) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_EVENT = (
    "INSERT OR REPLACE INTO events (run_id, seq, type, data) SELECT ?1, ?2, ?3, ?4 "
    "WHERE ?2 >= COALESCE((SELECT earliest_seq FROM event_compactions WHERE run_id = ?1), 0)"
)
"""An event, unless it is before the run's compaction point (that part of the log is gone)."""
_GC_PATHS = """
WITH RECURSIVE
    dead(id) AS (
        SELECT value FROM json_each(?)
        UNION SELECT p.parent FROM paths p JOIN dead d ON p.id = d.id WHERE p.parent IS NOT NULL
    ),
    live(id) AS (
        SELECT path_id FROM checkpoints WHERE run_id = ? AND path_id IS NOT NULL
        UNION SELECT p.parent FROM paths p JOIN live l ON p.id = l.id WHERE p.parent IS NOT NULL
    )
DELETE FROM paths WHERE id IN (SELECT id FROM dead EXCEPT SELECT id FROM live)
"""
"""Delete the path segments only the deleted checkpoints (path ids in ``?1``) used."""

_FAILURES = {
    "SQLITE_FULL": ("cannot be written: the disk (or the file's size limit) is full",
                    "free some space and retry; nothing of this operation was written"),
    "SQLITE_READONLY": ("cannot be written: the file or its directory is read-only",
                        "fix its permissions, or open it with readonly=True to read it"),
    "SQLITE_BUSY": ("is locked by another process (waited 5 s)",
                    "retry once the other writer is done"),
    "SQLITE_LOCKED": ("is locked by another connection", "retry once the other writer is done"),
    "SQLITE_CORRUPT": ("is damaged (the database image is malformed)",
                       "restore it from a backup"),
    "SQLITE_NOTADB": ("is damaged (not a database any more)", "restore it from a backup"),
}


class SQLiteCheckpointStore(ClosingStore):
    """A durable :class:`CheckpointStore` in one SQLite file, with the in-memory store's
    semantics: a run saved by one instance (or process) is read by another over the same file.

    Besides checkpoints (stored as JSON with indexed run, thread, node, timestamp and save
    order), it records run records, ordered event logs, artifacts, thread claims with fencing
    tokens and supports retention (``prune``, which gives the space back). One connection per
    instance; each operation is one transaction. Close it with :meth:`close` or use it as a
    (sync or async) context manager.

    The file is identified read-only before anything is written: only a new or empty file
    becomes a store, and a store of an older schema version is migrated in one transaction.
    A file (or directory) that cannot be written opens read-only.

    Args:
        path: the database file (created if missing), or ``":memory:"``.
        claim_ttl: seconds a claim stays live unless renewed, measured on the claiming
            runtime's clock (the ``now`` it passes), so a dead process's claim expires.
        readonly: open for reading only (the file must be a store); every write then raises
            ``StoreFileError``. ``graphflow`` opens files this way.

    Raises:
        StoreFileError: the file is not a store, is damaged, or cannot be created; the
            message names the file and the fix. The file is left as it was.
        UnsupportedFormat: the file was written by a newer pytest-graphflow.
        InvalidArgument: a bad ``path``, ``claim_ttl`` or ``readonly``.
    """

    records_events = True
    """The runtime records every run's events and run record here (durable inspection)."""

    pages_history = True
    """:meth:`list` takes ``limit`` and ``before`` (``GraphRuntime.history`` pages with them)."""

    supports_fencing = True
    """``save`` takes ``fence=(thread_id, token)`` and the store has ``commit``."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        claim_ttl: float = rules.DEFAULT_CLAIM_TTL,
        readonly: bool = False,
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidArgument(f"SQLiteCheckpointStore(path={path!r}): pass a file path "
                                  "(str or pathlib.Path) or ':memory:'")
        fspath = os.fspath(path)
        if not isinstance(fspath, str) or not fspath or "\x00" in fspath:
            raise InvalidArgument(f"SQLiteCheckpointStore(path={path!r}): pass a non-empty "
                                  "str path without NUL characters")
        if not isinstance(readonly, bool):
            raise InvalidArgument(f"SQLiteCheckpointStore(readonly={readonly!r}): readonly is "
                                  "True or False")
        self.path: str = fspath
        self.claim_ttl: float = rules.check_ttl(claim_ttl, "SQLiteCheckpointStore")
        self._db: sqlite3.Connection | None = None
        db, self.readonly = open_store(self.path, readonly=readonly)
        self._db = db
        self._paths = PathWriter()
        self._checked_run: tuple[Any, ...] = ()

    def __repr__(self) -> str:
        return f"SQLiteCheckpointStore({self.path!r})"

    # -- connection and transactions --

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise sqlite3.ProgrammingError(
                f"{self!r} is closed; open a new SQLiteCheckpointStore on the file"
            )
        return self._db

    def _failure(self, exc: sqlite3.Error) -> StoreFileError:
        name = "_".join(str(getattr(exc, "sqlite_errorname", "")).split("_")[:2])
        problem, fix = _FAILURES.get(
            name, (f"failed: {exc}", "check the file, its directory and free disk space"))
        return file_error(self.path, problem, fix)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: ``BEGIN IMMEDIATE`` ... ``COMMIT`` (rolled back on error).

        A SQLite failure (full disk, read-only file, lock timeout, damage) becomes a
        ``StoreFileError`` naming the file; nothing of the transaction is kept.
        """
        db = self._conn
        if self.readonly:
            raise file_error(self.path, "is open read-only", "open it without readonly=True "
                             "(and with write access to the file and its directory) to write")
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise self._failure(exc) from None
        try:
            yield db
        except BaseException as exc:
            self._rollback(db)
            if isinstance(exc, sqlite3.Error) and not isinstance(exc, sqlite3.ProgrammingError):
                raise self._failure(exc) from None
            raise
        try:
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(db)
            raise self._failure(exc) from None

    def _rollback(self, db: sqlite3.Connection) -> None:
        self._paths.forget()
        if db.in_transaction:
            with suppress(sqlite3.Error):  # SQLite may have rolled back already
                db.execute("ROLLBACK")

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """The rows of a read; a SQLite failure becomes a ``StoreFileError``."""
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.ProgrammingError:
            raise
        except sqlite3.Error as exc:
            raise self._failure(exc) from None

    def close(self) -> None:
        """Close the connection; closing twice is harmless."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def vacuum(self) -> None:
        """Rebuild the file so it takes no more space than its data (``VACUUM``).

        ``prune`` and ``compact_events`` already give freed pages back (incremental
        auto-vacuum); this also defragments, and compacts a file migrated from an old layout.
        """
        with self._tx():
            pass  # refuse on a read-only store, like every write
        try:
            self._conn.execute("VACUUM")
        except sqlite3.ProgrammingError:  # pragma: no cover
            raise
        except sqlite3.Error as exc:
            raise self._failure(exc) from None

    def _give_back(self) -> None:
        try:
            # executescript runs the pragma to the end (execute() frees one page only)
            self._conn.executescript("PRAGMA incremental_vacuum;")
        except sqlite3.Error as exc:  # pragma: no cover - space is given back next time
            del exc

    # -- checkpoints (seed 003) --

    def _checkpoints(self, db: sqlite3.Connection, sql: str, params: tuple[Any, ...]
                     ) -> list[Checkpoint]:
        try:
            rows = db.execute(sql, params).fetchall()
            return decode(self.path, db, rows)
        except sqlite3.ProgrammingError:
            raise
        except sqlite3.Error as exc:
            raise self._failure(exc) from None

    def _first(self, db: sqlite3.Connection, sql: str, params: tuple[Any, ...]
               ) -> Checkpoint | None:
        found = self._checkpoints(db, sql, params)
        return found[0] if found else None

    def _write(self, db: sqlite3.Connection, cp: Checkpoint, data: str) -> None:
        visited = cp.visited if type(cp.visited) is tuple else tuple(cp.visited)
        values = (cp.id, cp.run_id, cp.thread_id, cp.graph_id, cp.node_id, cp.step,
                  cp.timestamp.isoformat(), rules.to_micros(cp.timestamp), cp.status,
                  cp.tenant_id, cp.format_version, self._paths.write(db, cp.run_id, visited),
                  len(visited), data)
        try:
            db.execute(_INSERT, values)
        except sqlite3.IntegrityError:  # the id exists: overwrite it, and it counts as last
            db.execute("DELETE FROM checkpoint_nodes WHERE checkpoint_id = ?", (cp.id,))
            db.execute("DELETE FROM checkpoints WHERE id = ?", (cp.id,))
            db.execute(_INSERT, values)
        if len(cp.node_ids) > 1:  # one node is found by node_id; a batch by checkpoint_nodes
            db.executemany("INSERT OR IGNORE INTO checkpoint_nodes VALUES (?, ?, ?)",
                           [(cp.id, cp.run_id, node) for node in cp.node_ids])

    def _checked(self, checkpoint: object, where: str) -> Checkpoint:
        if not isinstance(checkpoint, Checkpoint):
            raise InvalidArgument(f"{where}(checkpoint={checkpoint!r:.80}): pass a Checkpoint")
        check_id(checkpoint.id, "checkpoint.id", where)
        check_optional_id(checkpoint.node_id, "checkpoint.node_id", where)
        run = (checkpoint.run_id, checkpoint.thread_id, checkpoint.graph_id,
               checkpoint.tenant_id)
        if run != self._checked_run:  # a run's checkpoints share these: check them once
            for field in ("run_id", "thread_id", "graph_id"):
                check_id(getattr(checkpoint, field), f"checkpoint.{field}", where)
            check_optional_id(checkpoint.tenant_id, "checkpoint.tenant_id", where)
            self._checked_run = run
        return checkpoint

    async def save(self, checkpoint: Checkpoint, *, fence: Fence | None = None) -> None:
        """Persist ``checkpoint``; one with the same id is overwritten (and counts as saved last).

        With ``fence=(thread_id, token)`` the save is made under that claim, in the same
        transaction that checks it: it is refused (nothing written) unless ``token`` is the
        thread's current claim.

        Raises:
            InvalidArgument: not a Checkpoint, a bad id, or a value with no JSON form.
            StoreFileError: the file cannot be written (read-only, disk full, locked).
            StaleClaim: the fence's token is not the current claim.
        """
        cp = self._checked(checkpoint, "save")
        if fence is None:
            data = encode(self.path, cp)
            with self._tx() as db:
                self._write(db, cp, data)
            return
        thread_id, token = fence
        if thread_id != cp.thread_id:
            raise InvalidArgument(f"save({cp.id}): the fence is for thread {thread_id!r}, the "
                                  f"checkpoint is on thread {cp.thread_id!r}")
        await self.commit(thread_id, token, run_id=cp.run_id, checkpoints=[cp])

    async def commit(
        self,
        thread_id: str,
        token: int,
        *,
        run_id: str,
        checkpoints: Sequence[Checkpoint] = (),
        events: Sequence[dict[str, Any]] = (),
        run: dict[str, Any] | None = None,
    ) -> None:
        """Write checkpoints, events and the run record of ``run_id`` under the claim
        ``token`` in one transaction, all or nothing (see
        :class:`~pytest_graphflow._stores._protocol.ClaimingStore`).

        The token is checked inside the transaction (``BEGIN IMMEDIATE`` holds the file's
        write lock), so no other process can take the claim between the check and the write.

        Raises:
            StaleClaim: ``token`` is not the thread's current claim; nothing is written.
            InvalidArgument: a part is not of ``run_id`` on ``thread_id``.
        """
        cps, normalised, record = rules.check_commit(thread_id, run_id, checkpoints,
                                                     events, run)
        token = rules.check_token(token, "commit")
        encoded = [(self._checked(cp, "commit"), encode(self.path, cp)) for cp in cps]
        rows = [_event_row(run_id, data) for _, data in normalised]
        with self._tx() as db:
            rules.current_or_stale(thread_id, token, self._claim_of(db, thread_id)[0])
            for cp, data in encoded:
                self._write(db, cp, data)
            if rows:
                db.executemany(_INSERT_EVENT, rows)
            if record is not None:
                self._put_run(db, record)

    async def get(self, checkpoint_id: str) -> Checkpoint | None:
        """The checkpoint with this id, or ``None``.

        Raises:
            UnsupportedFormat: it was written in another format version.
            StoreFileError: its row is damaged.
        """
        check_id(checkpoint_id, "checkpoint_id", "get")
        return self._first(self._conn, f"{SELECT} WHERE id = ?", (checkpoint_id,))

    async def latest(self, run_id: str) -> Checkpoint | None:
        """The run's most recent checkpoint (latest timestamp, then saved last), or ``None``."""
        check_id(run_id, "run_id", "latest")
        return self._first(self._conn, f"{SELECT} WHERE run_id = ? {_NEWEST}", (run_id,))

    async def load(self, run_id: str, node_id: str | None = None) -> Checkpoint | None:
        """The run's most recent checkpoint, or the most recent one for ``node_id`` (its
        ``node_id`` or one of its ``node_ids``), or ``None``."""
        check_id(run_id, "run_id", "load")
        if node_id is None:
            return await self.latest(run_id)
        check_id(node_id, "node_id", "load")
        return self._first(
            self._conn,
            f"{SELECT} WHERE run_id = ? AND (node_id = ? OR id IN (SELECT checkpoint_id FROM "
            f"checkpoint_nodes WHERE run_id = ? AND node = ?)) {_NEWEST}",
            (run_id, node_id, run_id, node_id),
        )

    def checkpointed_runs(self) -> list[str]:
        """The ids of the runs that have checkpoints, in the order they were first saved.

        A cheap index read (no checkpoint is parsed), for tools such as ``graphflow runs``.
        """
        rows = self._query("SELECT run_id FROM checkpoints GROUP BY run_id ORDER BY MIN(seq)")
        return [r[0] for r in rows]

    async def list(
        self,
        run_id: str | None = None,
        *,
        thread_id: str | None = None,
        limit: int | None = None,
        before: str | None = None,
    ) -> list[Checkpoint]:
        """Checkpoints of a run, a thread or the whole store, oldest first.

        Args:
            run_id: only this run's checkpoints.
            thread_id: only this thread's checkpoints.
            limit: at most this many: the newest ones (a page), still oldest first.
            before: only checkpoints older than the checkpoint with this id (the next page
                back is ``list(..., limit=n, before=page[0].id)``).

        Raises:
            CheckpointNotFound: ``before`` names no checkpoint.
        """
        where: list[str] = []
        params: list[Any] = []
        if run_id is not None:
            where.append("run_id = ?")
            params.append(check_id(run_id, "run_id", "list"))
        if thread_id is not None:
            where.append("thread_id = ?")
            params.append(check_id(thread_id, "thread_id", "list"))
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 1):
            raise InvalidArgument(f"list(limit={limit!r}): limit must be an int >= 1 or None")
        if before is not None:
            check_id(before, "before", "list")
            found = self._query("SELECT ts_us, seq FROM checkpoints WHERE id = ?", (before,))
            if not found:
                raise CheckpointNotFound(f"list(before={before!r}): the store has no such "
                                         "checkpoint; pass the id of a checkpoint of a page")
            where.append("(ts_us < ? OR (ts_us = ? AND seq < ?))")
            params.extend((found[0][0], found[0][0], found[0][1]))
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        if limit is None:
            return self._checkpoints(self._conn, f"{SELECT} {clause}{_ORDER}", tuple(params))
        page = self._checkpoints(
            self._conn, f"{SELECT} {clause}ORDER BY ts_us DESC, seq DESC LIMIT ?",
            (*params, limit))
        page.reverse()
        return page

    async def delete(self, checkpoint_id: str) -> bool:
        """Delete one checkpoint; ``True`` if it existed."""
        check_id(checkpoint_id, "checkpoint_id", "delete")
        with self._tx() as db:
            found = db.execute("SELECT run_id, path_id FROM checkpoints WHERE id = ?",
                               (checkpoint_id,)).fetchone()
            if found is None:
                return False
            db.execute("DELETE FROM checkpoint_nodes WHERE checkpoint_id = ?", (checkpoint_id,))
            db.execute("DELETE FROM checkpoints WHERE id = ?", (checkpoint_id,))
            self._gc_paths(db, found[0], [found[1]])
        return True

    def _gc_paths(self, db: sqlite3.Connection, run_id: str, dead: Sequence[int | None]
                  ) -> None:
        ids = [pid for pid in dead if pid is not None]
        if ids:
            db.execute(_GC_PATHS, (json.dumps(ids), run_id))
            self._paths.forget()

    async def fork(
        self,
        checkpoint_id: str,
        patch_state: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
    ) -> str:
        """Clone a checkpoint into a new run and thread; return the new run id.

        The new ids derive from ``checkpoint_id`` exactly as in the in-memory store.
        ``patch_state`` may only change keys the checkpoint's state has, each to a JSON value
        of the kind it holds (or ``None``); the new run's graph validates the rest on resume.

        Raises:
            CheckpointNotFound: when ``checkpoint_id`` does not exist.
            InvalidArgument: a bad ``patch_state``. Nothing is written.
            ForkTargetExists: when ``thread_id`` is given and the store holds a checkpoint of
                it (a fork only ever creates a new thread); nothing was changed.
        """
        check_id(checkpoint_id, "checkpoint_id", "fork")
        check_optional_id(thread_id, "thread_id", "fork")
        if patch_state is not None and not isinstance(patch_state, Mapping):
            raise InvalidArgument(f"fork(patch_state={patch_state!r:.80}): pass a dict of "
                                  "state keys to values, or None")
        with self._tx() as db:
            source = self._first(db, f"{SELECT} WHERE id = ?", (checkpoint_id,))
            if source is None:
                raise CheckpointNotFound(
                    f"cannot fork checkpoint {checkpoint_id!r}: the store has no such checkpoint"
                )
            state = dict(source.state)
            if patch_state:
                state.update(rules.checked_patch(checkpoint_id, source.state, patch_state))
            if thread_id is not None and db.execute(
                    "SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1",
                    (thread_id,)).fetchone() is not None:
                raise rules.fork_target_exists(checkpoint_id, thread_id)
            if thread_id is not None and db.execute(
                    "SELECT 1 FROM claims WHERE thread_id = ? AND run_id IS NOT NULL",
                    (thread_id,)).fetchone() is not None:
                raise ThreadBusy(thread_id, None)  # a run is starting on it: not a new thread
            n = 0
            while True:
                token = derived_hex("fork", checkpoint_id, n)
                run_id, cid = f"run-{token}", f"cp-{token}-f"
                target = thread_id or f"thread-{token}"
                taken = db.execute(
                    "SELECT 1 FROM checkpoints WHERE run_id = ? OR id = ? OR thread_id = ? "
                    "UNION ALL SELECT 1 FROM claims WHERE thread_id = ? AND run_id IS NOT NULL "
                    "LIMIT 1",
                    (run_id, cid, target if thread_id is None else "",
                     target if thread_id is None else ""),
                ).fetchone()
                if taken is None:
                    break
                n += 1
                if n > 1000:  # pragma: no cover - defensive
                    raise ForkTargetExists(f"no free run id for a fork of {checkpoint_id!r}")
            forked = source.clone(
                id=cid, run_id=run_id, thread_id=thread_id or f"thread-{token}",
                parent_id=source.id, state=state,
                metadata={**source.metadata, "forked_from": source.id},
            )
            self._write(db, forked, encode(self.path, forked))
        return run_id

    async def prune(self, run_id: str, keep_last: int) -> int:
        """Delete all but the newest ``keep_last`` checkpoints of the run; return how many.

        The freed space goes back to the file system (incremental auto-vacuum).
        """
        check_id(run_id, "run_id", "prune")
        keep = rules.check_keep_last(keep_last)
        with self._tx() as db:
            rows = db.execute(f"SELECT id, path_id FROM checkpoints WHERE run_id = ? {_ORDER}",
                              (run_id,)).fetchall()
            gone = rows[: max(len(rows) - keep, 0)]
            doomed = [(cid,) for cid, _ in gone]
            if doomed:
                db.executemany("DELETE FROM checkpoint_nodes WHERE checkpoint_id = ?", doomed)
                db.executemany("DELETE FROM checkpoints WHERE id = ?", doomed)
                self._gc_paths(db, run_id, sorted({pid for _, pid in gone if pid is not None}))
        if doomed:
            self._give_back()
        return len(doomed)

    # -- events (seed 002; compaction: seed 004) --

    def _earliest(self, db: sqlite3.Connection, run_id: str) -> int:
        try:
                row = db.execute("SELECT earliest_seq FROM event_compactions WHERE run_id = ?",
                             (run_id,)).fetchone()
        except sqlite3.ProgrammingError:
            raise
        except sqlite3.Error as exc:
            raise self._failure(exc) from None
        return 0 if row is None else int(row[0])

    async def record_events(self, run_id: str, events: _Records) -> None:
        """Record events of ``run_id`` in wire form; an event with a recorded seq overwrites it.

        Events before the run's compaction point are dropped: that part of the log is gone.
        Each event is serialised once (keys become strings and datetimes ISO strings, as
        in their JSON form).

        Raises:
            InvalidArgument: when an event is not a JSON dict with an int ``seq``.
        """
        check_id(run_id, "run_id", "record_events")
        if not isinstance(events, (list, tuple)):
            raise InvalidArgument(f"record_events(events={events!r:.80}): pass a list of "
                                  "events in wire form")
        rows = [_event_row(run_id, e) for e in events]
        if not rows:
            return
        with self._tx() as db:
            db.executemany(_INSERT_EVENT, rows)

    async def events(self, run_id: str, after_seq: int | None = None) -> _Records:
        """The run's recorded events with ``seq > after_seq`` (all when ``None``), by seq.

        Raises:
            EventsCompacted: when part of what was asked for was compacted away.
        """
        check_id(run_id, "run_id", "events")
        first = rules.check_after_seq(after_seq)
        earliest = self._earliest(self._conn, run_id)
        if first < earliest:
            raise rules.events_compacted(run_id, earliest)
        rows = self._query("SELECT data FROM events WHERE run_id = ? AND seq >= ? ORDER BY seq",
                           (run_id, first))
        return [json.loads(r[0]) for r in rows]

    async def compact_events(self, run_id: str, before_seq: int) -> int:
        """Remove the run's events with ``seq < before_seq``; return how many were removed.

        The freed space goes back to the file system (incremental auto-vacuum).
        """
        check_id(run_id, "run_id", "compact_events")
        before = rules.check_before_seq(before_seq)
        with self._tx() as db:
            if before <= self._earliest(db, run_id):
                return 0
            db.execute("INSERT OR REPLACE INTO event_compactions VALUES (?, ?)", (run_id, before))
            removed: int = db.execute("DELETE FROM events WHERE run_id = ? AND seq < ?",
                                      (run_id, before)).rowcount
        if removed:
            self._give_back()
        return removed

    # -- run records (seed 002) --

    async def record_run(self, record: dict[str, Any]) -> None:
        """Insert or update the run record keyed by ``record["run_id"]``.

        Fields of an existing record that ``record`` does not name are kept. Datetimes are
        stored in their ISO form.
        """
        data = rules.normalise_run_record(record)
        check_id(data["run_id"], "record['run_id']", "record_run")
        with self._tx() as db:
            self._put_run(db, data)

    @staticmethod
    def _put_run(db: sqlite3.Connection, data: dict[str, Any]) -> None:
        row = db.execute("SELECT data FROM runs WHERE run_id = ?", (data["run_id"],)).fetchone()
        if row is not None:
            data = {**json.loads(row[0]), **data}
        db.execute(
            "INSERT INTO runs (run_id, thread_id, graph_id, status, tenant_id, updated_at, "
            "data) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
            "thread_id = excluded.thread_id, graph_id = excluded.graph_id, "
            "status = excluded.status, tenant_id = excluded.tenant_id, "
            "updated_at = excluded.updated_at, data = excluded.data",
            (data["run_id"], *(_text(data.get(k)) for k in
                               ("thread_id", "graph_id", "status", "tenant_id",
                                "updated_at")), json.dumps(data)),
        )

    async def runs(self) -> _Records:
        """Every run record, in the order the runs were first recorded."""
        rows = self._query("SELECT data FROM runs ORDER BY rowid")
        return [json.loads(r[0]) for r in rows]

    async def run(self, run_id: str) -> dict[str, Any] | None:
        """The record of ``run_id``, or ``None``."""
        check_id(run_id, "run_id", "run")
        rows = self._query("SELECT data FROM runs WHERE run_id = ?", (run_id,))
        return None if not rows else dict(json.loads(rows[0][0]))

    # -- artifacts (seed 002) --

    async def put_artifact(
        self,
        run_id: str,
        name: str,
        data: bytes | str,
        media_type: str = "application/octet-stream",
    ) -> None:
        """Store an artifact of ``run_id`` (``str`` as UTF-8), replacing one of that name."""
        check_id(run_id, "run_id", "put_artifact")
        content = rules.artifact_bytes(run_id, name, data, media_type)
        check_id(name, "name", "put_artifact")
        check_id(media_type, "media_type", "put_artifact")
        with self._tx() as db:
            db.execute(
                "INSERT INTO artifacts (run_id, name, media_type, size, content) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id, name) DO UPDATE SET "
                "media_type = excluded.media_type, size = excluded.size, "
                "content = excluded.content",
                (run_id, name, media_type, len(content), content),
            )

    async def get_artifact(self, run_id: str, name: str) -> bytes | None:
        """The content of the run's artifact ``name``, or ``None``."""
        check_id(run_id, "run_id", "get_artifact")
        check_id(name, "name", "get_artifact")
        rows = self._query("SELECT content FROM artifacts WHERE run_id = ? AND name = ?",
                           (run_id, name))
        return None if not rows else bytes(rows[0][0])

    async def artifacts(self, run_id: str) -> _Records:
        """The run's artifacts (``name``, ``media_type``, ``size``), in the order first stored."""
        check_id(run_id, "run_id", "artifacts")
        rows = self._query("SELECT name, media_type, size FROM artifacts "
                           "WHERE run_id = ? ORDER BY rowid", (run_id,))
        return [{"name": n, "media_type": m, "size": s} for n, m, s in rows]

    # -- claims with fencing tokens (seed 004) --

    @staticmethod
    def _claim_of(db: sqlite3.Connection, thread_id: str) -> tuple[rules.Claim | None, int]:
        row = db.execute("SELECT run_id, token, expires_us, ttl FROM claims WHERE thread_id = ?",
                         (thread_id,)).fetchone()
        if row is None:
            return None, 0
        run_id, token, expires_us, ttl = row
        if run_id is None:
            return None, int(token)
        claim = rules.Claim(run_id, int(token), rules.from_micros(expires_us), float(ttl))
        return claim, claim.token

    @staticmethod
    def _put_claim(db: sqlite3.Connection, thread_id: str, claim: rules.Claim) -> None:
        db.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?)",
                   (thread_id, claim.run_id, claim.token, rules.to_micros(claim.expires_at),
                    claim.ttl))

    async def claim(
        self, thread_id: str, run_id: str, *, now: datetime, ttl: float | None = None
    ) -> int:
        """Claim ``thread_id`` for ``run_id`` and return a new, strictly increasing fencing token.

        ``now`` is the claiming runtime's clock; the claim is live until ``now + ttl``
        (``claim_ttl`` by default). While a claim is live every other claim is refused, the
        same run's included: a claim belongs to the holder of its token.

        Raises:
            ThreadBusy: a claim on the thread is live.
        """
        check_id(thread_id, "thread_id", "claim")
        check_id(run_id, "run_id", "claim")
        moment = rules.utc_now(now, "claim")
        seconds = self.claim_ttl if ttl is None else rules.check_ttl(ttl, "claim")
        with self._tx() as db:
            current, last = self._claim_of(db, thread_id)
            claim = rules.take_claim(thread_id, run_id, current, last, moment, seconds)
            self._put_claim(db, thread_id, claim)
        return claim.token

    async def renew(self, thread_id: str, token: int, *, now: datetime) -> None:
        """Extend the claim ``token`` by its ttl from ``now``.

        Raises:
            StaleClaim: ``token`` is not the thread's current claim.
        """
        check_id(thread_id, "thread_id", "renew")
        moment = rules.utc_now(now, "renew")
        token = rules.check_token(token, "renew")
        with self._tx() as db:
            current = rules.current_or_stale(thread_id, token, self._claim_of(db, thread_id)[0])
            self._put_claim(db, thread_id, rules.renewed(current, moment))

    async def release(self, thread_id: str, token: int) -> None:
        """Release the claim ``token``; the thread is free at once.

        Raises:
            StaleClaim: ``token`` is not the thread's current claim.
        """
        check_id(thread_id, "thread_id", "release")
        token = rules.check_token(token, "release")
        with self._tx() as db:
            rules.current_or_stale(thread_id, token, self._claim_of(db, thread_id)[0])
            db.execute("UPDATE claims SET run_id = NULL, expires_us = NULL, ttl = NULL "
                       "WHERE thread_id = ?", (thread_id,))

    async def current_claim(self, thread_id: str) -> tuple[str, int, datetime] | None:
        """``(run_id, token, expires_at)`` of the thread's claim (live or expired), or ``None``."""
        check_id(thread_id, "thread_id", "current_claim")
        found = self._claim_of(self._conn, thread_id)[0]
        return None if found is None else found.as_tuple()


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _event_row(run_id: str, event: object) -> tuple[str, int, Any, str]:
    """``(run_id, seq, type, data)`` of one event, serialised once.

    Raises:
        InvalidArgument: when the event is not a dict with an int ``seq``, or not JSON.
    """
    if not isinstance(event, Mapping):
        raise InvalidArgument(f"record_events: event {event!r:.80} must be a dict in wire form "
                              "(event.model_dump(mode='json'))")
    seq = event.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise InvalidArgument(f"record_events: event has seq={seq!r}; every event needs an "
                              "int seq >= 0")
    try:
        raw = to_json(event, inf_nan_mode="constants")
        if b"NaN" in raw or b"Infinity" in raw:  # a real NaN is refused; a word in a text is not
            json.dumps(event, allow_nan=False, default=_wire)
        data = raw.decode()
    except (TypeError, ValueError, RecursionError, NotJSONError,
            PydanticSerializationError) as exc:
        raise InvalidArgument(f"record_events: event seq={seq} of run {run_id} is not JSON: "
                              f"{str(exc)[:200]}") from None
    kind = event.get("type")
    return (run_id, seq, kind if isinstance(kind, str) else None, data)


def _wire(value: Any) -> Any:
    """The JSON form of a value ``json`` does not know (datetimes, models); else TypeError."""
    try:
        return to_json_value(to_jsonable_python(value))
    except Exception as exc:
        raise TypeError(f"{type(value).__name__} value has no JSON form") from exc
