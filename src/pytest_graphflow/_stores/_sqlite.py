"""``SQLiteCheckpointStore``: a durable store in one SQLite file (SPEC §5, seeds 002–004).

The store calls :mod:`sqlite3` synchronously inside its async methods: the deterministic
runtime must not see worker threads, and every operation is one short transaction. The
file is in WAL mode, so another process (or ``graphflow``) can read it while a run writes.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from .._records._checkpoint import FORMAT_VERSION, Checkpoint
from .._records._ids import derived_hex
from .._records._json import to_json_value
from ..errors import (
    CheckpointNotFound,
    ForkTargetExists,
    InvalidArgument,
    ThreadBusy,
    UnsupportedFormat,
)
from . import _claims as rules
from ._closing import ClosingStore
from ._protocol import Fence

__all__ = ["SCHEMA_VERSION", "SQLiteCheckpointStore"]

_Records = list[dict[str, Any]]
"""A list of JSON records (events, run records, artifact descriptions)."""

_Normalised = list[tuple[int, dict[str, Any]]]
"""Events as ``(seq, JSON form)`` pairs."""

SCHEMA_VERSION = 1
"""The layout of the tables this build writes and reads."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    graph_id TEXT NOT NULL,
    node_id TEXT,
    node_ids TEXT NOT NULL,
    step INTEGER NOT NULL,
    timestamp TEXT NOT NULL,
    ts_us INTEGER NOT NULL,
    save_order INTEGER NOT NULL,
    status TEXT NOT NULL,
    tenant_id TEXT,
    format_version INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS checkpoints_run ON checkpoints (run_id, ts_us, save_order);
CREATE INDEX IF NOT EXISTS checkpoints_thread ON checkpoints (thread_id, ts_us, save_order);
CREATE INDEX IF NOT EXISTS checkpoints_order ON checkpoints (ts_us, save_order);
CREATE TABLE IF NOT EXISTS checkpoint_nodes (
    checkpoint_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    node TEXT NOT NULL,
    PRIMARY KEY (checkpoint_id, node)
);
CREATE INDEX IF NOT EXISTS checkpoint_nodes_run ON checkpoint_nodes (run_id, node);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS event_compactions (
    run_id TEXT PRIMARY KEY,
    earliest_seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    thread_id TEXT,
    graph_id TEXT,
    status TEXT,
    tenant_id TEXT,
    updated_at TEXT,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS artifacts (
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    content BLOB NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE TABLE IF NOT EXISTS claims (
    thread_id TEXT PRIMARY KEY,
    run_id TEXT,
    token INTEGER NOT NULL,
    expires_us INTEGER,
    ttl REAL
);
"""

_ORDER = "ORDER BY ts_us, save_order"
_NEWEST = "ORDER BY ts_us DESC, save_order DESC LIMIT 1"


class SQLiteCheckpointStore(ClosingStore):
    """A durable :class:`CheckpointStore` in one SQLite file, with the in-memory store's
    semantics: a run saved by one instance (or process) is read by another over the same file.

    Besides checkpoints (stored as JSON with indexed run, thread, node, timestamp and save
    order), it records run records, ordered event logs, artifacts, thread claims with fencing
    tokens and supports retention (``prune``). One connection per instance; each operation is
    one transaction. Close it with :meth:`close` or use it as a (sync or async) context
    manager.

    Args:
        path: the database file (created if missing), or ``":memory:"``.
        claim_ttl: seconds a claim stays live unless renewed, measured on the claiming
            runtime's clock (the ``now`` it passes), so a dead process's claim expires.

    Raises:
        UnsupportedFormat: the file was written with another table layout.
        sqlite3.DatabaseError: the file is not a SQLite database.
    """

    records_events = True
    """The runtime records every run's events and run record here (durable inspection)."""

    supports_fencing = True
    """``save`` takes ``fence=(thread_id, token)`` and the store has ``commit``."""

    def __init__(
        self, path: str | os.PathLike[str], *, claim_ttl: float = rules.DEFAULT_CLAIM_TTL
    ) -> None:
        self.path: str = os.fspath(path)
        self.claim_ttl: float = rules.check_ttl(claim_ttl, "SQLiteCheckpointStore")
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db: sqlite3.Connection | None = db
        try:
            db.execute("PRAGMA busy_timeout = 5000")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            with self._tx() as tx:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        tx.execute(statement)
                tx.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                           (str(SCHEMA_VERSION),))
                (found,) = tx.execute(
                    "SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if found != str(SCHEMA_VERSION):
                raise UnsupportedFormat(
                    f"store file {self.path!r} has schema version {found}; this build of "
                    f"pytest-graphflow reads schema version {SCHEMA_VERSION}. Open it with the "
                    "version that wrote it."
                )
        except BaseException:
            db.close()
            self._db = None
            raise

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

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: ``BEGIN IMMEDIATE`` ... ``COMMIT`` (rolled back on error)."""
        db = self._conn
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        """Close the connection; closing twice is harmless."""
        if self._db is not None:
            self._db.close()
            self._db = None

    # -- checkpoints (seed 003) --

    @staticmethod
    def _parse(row: tuple[str, int, str]) -> Checkpoint:
        cid, version, data = row
        if version != FORMAT_VERSION:
            raise rules.unsupported_format(cid, version)
        return Checkpoint.model_validate_json(data)

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[Checkpoint]:
        return [self._parse(r) for r in self._conn.execute(sql, params).fetchall()]

    def _first(self, db: sqlite3.Connection, sql: str, params: tuple[Any, ...]
               ) -> Checkpoint | None:
        row = db.execute(sql, params).fetchone()
        return None if row is None else self._parse(row)

    @staticmethod
    def _write(db: sqlite3.Connection, cp: Checkpoint) -> None:
        (order,) = db.execute("SELECT COALESCE(MAX(save_order), 0) + 1 FROM checkpoints"
                              ).fetchone()
        db.execute("DELETE FROM checkpoint_nodes WHERE checkpoint_id = ?", (cp.id,))
        db.execute(
            "INSERT OR REPLACE INTO checkpoints (id, run_id, thread_id, graph_id, node_id, "
            "node_ids, step, timestamp, ts_us, save_order, status, tenant_id, format_version, "
            "data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (cp.id, cp.run_id, cp.thread_id, cp.graph_id, cp.node_id, json.dumps(cp.node_ids),
             cp.step, cp.timestamp.isoformat(), rules.to_micros(cp.timestamp), order,
             cp.status, cp.tenant_id, cp.format_version, cp.model_dump_json(warnings=False)),
        )
        db.executemany("INSERT OR IGNORE INTO checkpoint_nodes VALUES (?, ?, ?)",
                       [(cp.id, cp.run_id, node) for node in cp.node_ids])

    async def save(self, checkpoint: Checkpoint, *, fence: Fence | None = None) -> None:
        """Persist ``checkpoint``; one with the same id is overwritten (and counts as saved last).

        With ``fence=(thread_id, token)`` the save is made under that claim, in the same
        transaction that checks it: it is refused (nothing written) unless ``token`` is the
        thread's current claim.

        Raises:
            StaleClaim: the fence's token is not the current claim.
        """
        if fence is None:
            with self._tx() as db:
                self._write(db, checkpoint)
            return
        thread_id, token = fence
        if thread_id != checkpoint.thread_id:
            raise InvalidArgument(f"save({checkpoint.id}): the fence is for thread "
                                  f"{thread_id!r}, the checkpoint is on thread "
                                  f"{checkpoint.thread_id!r}")
        await self.commit(thread_id, token, run_id=checkpoint.run_id, checkpoints=[checkpoint])

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
        with self._tx() as db:
            rules.current_or_stale(thread_id, token, self._claim_of(db, thread_id)[0])
            for cp in cps:
                self._write(db, cp)
            if normalised:
                self._put_events(db, run_id, normalised)
            if record is not None:
                self._put_run(db, record)

    async def get(self, checkpoint_id: str) -> Checkpoint | None:
        """The checkpoint with this id, or ``None``.

        Raises:
            UnsupportedFormat: it was written in another format version.
        """
        return self._first(self._conn, "SELECT id, format_version, data FROM checkpoints "
                           "WHERE id = ?", (checkpoint_id,))

    async def latest(self, run_id: str) -> Checkpoint | None:
        """The run's most recent checkpoint (latest timestamp, then saved last), or ``None``."""
        return self._first(self._conn, "SELECT id, format_version, data FROM checkpoints "
                           f"WHERE run_id = ? {_NEWEST}", (run_id,))

    async def load(self, run_id: str, node_id: str | None = None) -> Checkpoint | None:
        """The run's most recent checkpoint, or the most recent one for ``node_id`` (its
        ``node_id`` or one of its ``node_ids``), or ``None``."""
        if node_id is None:
            return await self.latest(run_id)
        return self._first(
            self._conn,
            "SELECT id, format_version, data FROM checkpoints WHERE run_id = ? AND (node_id = ? "
            "OR id IN (SELECT checkpoint_id FROM checkpoint_nodes WHERE run_id = ? AND node = ?)"
            f") {_NEWEST}",
            (run_id, node_id, run_id, node_id),
        )

    def checkpointed_runs(self) -> list[str]:
        """The ids of the runs that have checkpoints, in the order they were first saved.

        A cheap index read (no checkpoint is parsed), for tools such as ``graphflow runs``.
        """
        rows = self._conn.execute("SELECT run_id FROM checkpoints GROUP BY run_id "
                                  "ORDER BY MIN(save_order)").fetchall()
        return [r[0] for r in rows]

    async def list(
        self, run_id: str | None = None, *, thread_id: str | None = None
    ) -> list[Checkpoint]:
        """Checkpoints of a run, a thread or the whole store, oldest first."""
        where: list[str] = []
        params: list[str] = []
        if run_id is not None:
            where.append("run_id = ?")
            params.append(run_id)
        if thread_id is not None:
            where.append("thread_id = ?")
            params.append(thread_id)
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        return self._rows(f"SELECT id, format_version, data FROM checkpoints {clause}{_ORDER}",
                          tuple(params))

    async def delete(self, checkpoint_id: str) -> bool:
        """Delete one checkpoint; ``True`` if it existed."""
        with self._tx() as db:
            db.execute("DELETE FROM checkpoint_nodes WHERE checkpoint_id = ?", (checkpoint_id,))
            return db.execute("DELETE FROM checkpoints WHERE id = ?",
                              (checkpoint_id,)).rowcount > 0

    async def fork(
        self,
        checkpoint_id: str,
        patch_state: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
    ) -> str:
        """Clone a checkpoint into a new run and thread; return the new run id.

        The new ids derive from ``checkpoint_id`` exactly as in the in-memory store.

        Raises:
            CheckpointNotFound: when ``checkpoint_id`` does not exist.
            ForkTargetExists: when ``thread_id`` is given and the store holds a checkpoint of
                it (a fork only ever creates a new thread); nothing was changed.
        """
        with self._tx() as db:
            source = self._first(db, "SELECT id, format_version, data FROM checkpoints "
                                 "WHERE id = ?", (checkpoint_id,))
            if source is None:
                raise CheckpointNotFound(
                    f"cannot fork checkpoint {checkpoint_id!r}: the store has no such checkpoint"
                )
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
            state = dict(source.state)
            if patch_state:
                state.update({k: to_json_value(v) for k, v in patch_state.items()})
            forked = source.clone(
                id=cid, run_id=run_id, thread_id=thread_id or f"thread-{token}",
                parent_id=source.id, state=state,
                metadata={**source.metadata, "forked_from": source.id},
            )
            self._write(db, forked)
        return run_id

    async def prune(self, run_id: str, keep_last: int) -> int:
        """Delete all but the newest ``keep_last`` checkpoints of the run; return how many."""
        keep = rules.check_keep_last(keep_last)
        with self._tx() as db:
            ids = [r[0] for r in db.execute(
                f"SELECT id FROM checkpoints WHERE run_id = ? {_ORDER}", (run_id,))]
            doomed = [(cid,) for cid in ids[: max(len(ids) - keep, 0)]]
            db.executemany("DELETE FROM checkpoint_nodes WHERE checkpoint_id = ?", doomed)
            db.executemany("DELETE FROM checkpoints WHERE id = ?", doomed)
        return len(doomed)

    # -- events (seed 002; compaction: seed 004) --

    @staticmethod
    def _earliest(db: sqlite3.Connection, run_id: str) -> int:
        row = db.execute("SELECT earliest_seq FROM event_compactions WHERE run_id = ?",
                         (run_id,)).fetchone()
        return 0 if row is None else int(row[0])

    async def record_events(self, run_id: str, events: _Records) -> None:
        """Record events of ``run_id`` in wire form; an event with a recorded seq overwrites it.

        Events before the run's compaction point are dropped: that part of the log is gone.

        Raises:
            InvalidArgument: when an event is not a JSON dict with an int ``seq``.
        """
        normalised = [rules.normalise_event(e) for e in events]
        with self._tx() as db:
            self._put_events(db, run_id, normalised)

    def _put_events(self, db: sqlite3.Connection, run_id: str,
                    normalised: _Normalised) -> None:
        earliest = self._earliest(db, run_id)
        db.executemany(
            "INSERT OR REPLACE INTO events (run_id, seq, type, data) VALUES (?, ?, ?, ?)",
            [(run_id, seq, data.get("type"), json.dumps(data))
             for seq, data in normalised if seq >= earliest],
        )

    async def events(self, run_id: str, after_seq: int | None = None) -> _Records:
        """The run's recorded events with ``seq > after_seq`` (all when ``None``), by seq.

        Raises:
            EventsCompacted: when part of what was asked for was compacted away.
        """
        first = rules.check_after_seq(after_seq)
        db = self._conn
        earliest = self._earliest(db, run_id)
        if first < earliest:
            raise rules.events_compacted(run_id, earliest)
        rows = db.execute("SELECT data FROM events WHERE run_id = ? AND seq >= ? ORDER BY seq",
                          (run_id, first)).fetchall()
        return [json.loads(r[0]) for r in rows]

    async def compact_events(self, run_id: str, before_seq: int) -> int:
        """Remove the run's events with ``seq < before_seq``; return how many were removed."""
        before = rules.check_before_seq(before_seq)
        with self._tx() as db:
            if before <= self._earliest(db, run_id):
                return 0
            db.execute("INSERT OR REPLACE INTO event_compactions VALUES (?, ?)", (run_id, before))
            return db.execute("DELETE FROM events WHERE run_id = ? AND seq < ?",
                              (run_id, before)).rowcount

    # -- run records (seed 002) --

    async def record_run(self, record: dict[str, Any]) -> None:
        """Insert or update the run record keyed by ``record["run_id"]``.

        Fields of an existing record that ``record`` does not name are kept. Datetimes are
        stored in their ISO form.
        """
        data = rules.normalise_run_record(record)
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
        rows = self._conn.execute("SELECT data FROM runs ORDER BY rowid").fetchall()
        return [json.loads(r[0]) for r in rows]

    async def run(self, run_id: str) -> dict[str, Any] | None:
        """The record of ``run_id``, or ``None``."""
        row = self._conn.execute("SELECT data FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    # -- artifacts (seed 002) --

    async def put_artifact(
        self,
        run_id: str,
        name: str,
        data: bytes | str,
        media_type: str = "application/octet-stream",
    ) -> None:
        """Store an artifact of ``run_id`` (``str`` as UTF-8), replacing one of that name."""
        content = rules.artifact_bytes(run_id, name, data, media_type)
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
        row = self._conn.execute("SELECT content FROM artifacts WHERE run_id = ? AND name = ?",
                                 (run_id, name)).fetchone()
        return None if row is None else bytes(row[0])

    async def artifacts(self, run_id: str) -> _Records:
        """The run's artifacts (``name``, ``media_type``, ``size``), in the order first stored."""
        rows = self._conn.execute("SELECT name, media_type, size FROM artifacts "
                                  "WHERE run_id = ? ORDER BY rowid", (run_id,)).fetchall()
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
        token = rules.check_token(token, "release")
        with self._tx() as db:
            rules.current_or_stale(thread_id, token, self._claim_of(db, thread_id)[0])
            db.execute("UPDATE claims SET run_id = NULL, expires_us = NULL, ttl = NULL "
                       "WHERE thread_id = ?", (thread_id,))

    async def current_claim(self, thread_id: str) -> tuple[str, int, datetime] | None:
        """``(run_id, token, expires_at)`` of the thread's claim (live or expired), or ``None``."""
        found = self._claim_of(self._conn, thread_id)[0]
        return None if found is None else found.as_tuple()


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
