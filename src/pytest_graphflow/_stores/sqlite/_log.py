"""The run log of :class:`~._store.SQLiteCheckpointStore` (seed 002; compaction: seed
004): ordered event logs, run records and artifacts, each operation one transaction.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ..._records._checks import check_id
from .. import _claims as rules
from .._args import check_events, check_run_record
from .._wire import event_row
from ._tail import folded_events, put_piece, tail_events, unpack_events
from ._tx import SQLiteTransactions

__all__ = ["SQLiteLog"]

_Records = list[dict[str, Any]]
"""A list of JSON records (events, run records, artifact descriptions)."""


class SQLiteLog(SQLiteTransactions):
    """Events, run records and artifacts of a SQLite store (a part of it)."""

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
        Each event is serialised once (datetimes become ISO strings, as in their JSON form).

        Raises:
            InvalidArgument: when an event is not a JSON dict with an int ``seq``, or holds
                what JSON would give back as something else (a set, a complex number, a dict
                key that is not a string).
        """
        check_events(run_id, events)
        rows = [event_row(run_id, e) for e in events]
        if not rows:
            return
        with self._tx() as db:
            rows = self._live_events(db, run_id, rows)
            if rows:
                put_piece(db, run_id, None, rows)

    def _live_events(self, db: sqlite3.Connection, run_id: str,
                     rows: list[tuple[str, int, Any, str]]) -> list[tuple[str, int, Any, str]]:
        """The event rows of ``run_id`` to write (one with a recorded seq overwrites it when
        read): all but those before the run's compaction point, that part of the log is gone."""
        earliest = self._earliest(db, run_id)
        return [r for r in rows if r[1] >= earliest] if earliest else rows

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
        try:
            with self._reading(self._conn):  # both tables as of one moment
                rows = self._conn.execute("SELECT seq, data FROM events WHERE run_id = ? AND "
                                          "seq >= ? ORDER BY seq", (run_id, first)).fetchall()
                tail = folded_events(self._conn, run_id, first)
                tail += tail_events(self._conn, run_id)
        except sqlite3.ProgrammingError:
            raise
        except sqlite3.Error as exc:
            raise self._failure(exc) from None
        if tail:  # the folded pieces, then the log's, are newer: a seq they hold replaces
            # the one before
            merged = dict(rows)
            merged.update((seq, data) for _, seq, _, data in tail if seq >= first)
            rows = sorted(merged.items())
        return [json.loads(r[1]) for r in rows]

    async def compact_events(self, run_id: str, before_seq: int) -> int:
        """Remove the run's events with ``seq < before_seq``; return how many were removed.

        The freed space goes back to the file system (incremental auto-vacuum).
        """
        check_id(run_id, "run_id", "compact_events")
        before = rules.check_before_seq(before_seq)
        with self._folded() as db:
            if before <= self._earliest(db, run_id):
                return 0
            unpack_events(db, run_id)  # the run's events one a row: counted and deleted by seq
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
        data = check_run_record(record)
        with self._tx() as db:
            self._put_run(db, data)

    @staticmethod
    def _put_run(db: sqlite3.Connection, data: dict[str, Any], text: str | None = None
                 ) -> None:
        """Insert or update a run record (fields it does not name are kept); a record equal
        to the stored one is not written again (a run's record rarely changes per step).
        ``text``: ``data``'s JSON, when the caller has it."""
        row = db.execute("SELECT data FROM runs WHERE run_id = ?", (data["run_id"],)).fetchone()
        if text is None:
            text = json.dumps(data)
        if row is not None:
            if row[0] == text:
                return
            merged = {**json.loads(row[0]), **data}
            text = json.dumps(merged)
            if row[0] == text:
                return
            data = merged
        db.execute(
            "INSERT INTO runs (run_id, thread_id, graph_id, status, tenant_id, updated_at, "
            "data) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
            "thread_id = excluded.thread_id, graph_id = excluded.graph_id, "
            "status = excluded.status, tenant_id = excluded.tenant_id, "
            "updated_at = excluded.updated_at, data = excluded.data",
            (data["run_id"], *(_text(data.get(k)) for k in
                               ("thread_id", "graph_id", "status", "tenant_id",
                                "updated_at")), text),
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


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
