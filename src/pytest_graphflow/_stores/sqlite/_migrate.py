"""Migrating a store file of schema version 1, 2, 3, 4, 5 or 6 to the current layout, in one
transaction.

Version 6 has every column of version 7 but the log's ``last`` (its events' highest seq,
which a fold copies into ``event_pieces``): :func:`migrate_v6` adds it and fills it in for
the rows that have events, from their ``ev_keys``, as a fold of version 6 worked it out;
nothing else moves. Every migration whose log lacks it adds it (:func:`_migration`).

Version 5 has every table of version 6 but ``event_pieces`` (the folded pieces' events, one
row a piece, see :mod:`._tail`): :func:`migrate_v5` adds it, empty, and nothing else moves
(the events folded before stay in ``events``, where they read as before). Every migration
adds it (:func:`_migration`).

Version 4 has a ``log`` of 16 slots; version 5 one of 64, whose rows say so (``slots``):
:func:`migrate_v4` folds the log into the indexed tables (where its pieces read exactly as
they did) and creates the new, empty one.

Version 3 has every table of version 4 but ``log`` (the pieces written since the last fold,
see :mod:`._tail`): :func:`migrate_v3` adds it, empty, and nothing else moves, so the
file reads exactly as before.

Version 2 has the columns of version 3; its rows are version-3 rows without a path tail, so
only its events table is rebuilt with a row id (:func:`migrate_v2`). Once it is 3, a build
that writes version 2 refuses the file (its rows would look damaged to it).

Version 1 kept every checkpoint's whole ``visited`` list in its row and a ``save_order``
column. The migration moves each row's path into the ``paths`` chain, keeps the save order,
then compacts the file (``VACUUM``) with incremental auto-vacuum on. If anything fails, the
transaction is rolled back and the file is as it was.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from ._rows import PathWriter
from ._schema import (
    APPLICATION_ID,
    EVENT_PIECES,
    EVENTS_V3,
    LOG,
    LOG_LAST,
    SCHEMA_VERSION,
    create_statements,
)
from ._tail import fold

__all__ = ["migrate_v1", "migrate_v2", "migrate_v3", "migrate_v4", "migrate_v5", "migrate_v6"]

_OLD_INDEXES = ("checkpoints_run", "checkpoints_thread", "checkpoints_order",
                "checkpoint_nodes_run")


def migrate_v1(db: sqlite3.Connection, path: str) -> None:
    """Rewrite the version-1 store open on ``db`` in the current layout."""
    with _migration(db, "1", unversioned=True) as mine:
        if not mine:
            return
        db.execute("ALTER TABLE checkpoints RENAME TO checkpoints_v1")
        db.execute("ALTER TABLE checkpoint_nodes RENAME TO checkpoint_nodes_v1")
        for index in _OLD_INDEXES:
            db.execute(f"DROP INDEX IF EXISTS {index}")
        for statement in create_statements():
            db.execute(statement)
        paths = PathWriter()
        rows = db.execute("SELECT id, run_id, thread_id, graph_id, node_id, step, timestamp, "
                          "ts_us, status, tenant_id, format_version, data "
                          "FROM checkpoints_v1 ORDER BY save_order").fetchall()
        for (cid, run_id, thread_id, graph_id, node_id, step, timestamp, ts_us, status,
             tenant_id, version, data) in rows:
            visited: tuple[str, ...] = ()
            try:
                parsed = json.loads(data)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict) and isinstance(parsed.get("visited"), list):
                visited = tuple(str(v) for v in parsed.pop("visited"))
                data = json.dumps(parsed)
            db.execute(
                "INSERT INTO checkpoints (id, run_id, thread_id, graph_id, node_id, step, "
                "timestamp, ts_us, status, tenant_id, format_version, path_id, path_len, data)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (cid, run_id, thread_id, graph_id, node_id, step, timestamp, ts_us, status,
                 tenant_id, version, paths.write(db, run_id, visited), len(visited), data),
            )
        db.execute(
            "INSERT OR IGNORE INTO checkpoint_nodes SELECT checkpoint_id, run_id, node "
            "FROM checkpoint_nodes_v1 WHERE checkpoint_id IN (SELECT checkpoint_id FROM "
            "checkpoint_nodes_v1 GROUP BY checkpoint_id HAVING COUNT(*) > 1)")
        _rebuild_events(db)
        db.execute("DROP TABLE checkpoints_v1")
        db.execute("DROP TABLE checkpoint_nodes_v1")
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute("PRAGMA auto_vacuum = INCREMENTAL")
    db.execute("VACUUM")  # applies auto-vacuum and gives the old rows' space back


def migrate_v2(db: sqlite3.Connection) -> None:
    """Rewrite the version-2 store open on ``db`` in the current layout (its events table
    gets a row id; the rest stays)."""
    with _migration(db, "2") as mine:
        if mine:
            _rebuild_events(db)
            db.execute(LOG)


def migrate_v3(db: sqlite3.Connection) -> None:
    """Rewrite the version-3 store open on ``db`` in the current layout: add the empty
    ``log`` table."""
    with _migration(db, "3") as mine:
        if mine:
            db.execute(LOG)


def migrate_v4(db: sqlite3.Connection) -> None:
    """Rewrite the version-4 store open on ``db`` in the current layout: its log's pieces
    folded into the indexed tables, and the log of version 5, empty."""
    with _migration(db, "4") as mine:
        if mine:
            for statement in EVENT_PIECES:  # where the fold puts the events
                db.execute(statement)
            _log_last(db)  # what the fold copies
            fold(db, erase=True)
            db.execute("DROP TABLE log")
            db.execute(LOG)


def migrate_v5(db: sqlite3.Connection) -> None:
    """Rewrite the version-5 store open on ``db`` in the current layout: add the empty
    ``event_pieces`` table (done by :func:`_migration`)."""
    with _migration(db, "5"):
        pass


def migrate_v6(db: sqlite3.Connection) -> None:
    """Rewrite the version-6 store open on ``db`` in the current layout: the log's ``last``
    added and filled in (done by :func:`_migration`)."""
    with _migration(db, "6"):
        pass


def _log_last(db: sqlite3.Connection) -> None:
    """Give the ``log`` of a file before schema version 7 its ``last`` column, filled in (a
    no-op for a log that has it). In the caller's transaction."""
    if not any(c[1] == "last" for c in db.execute("PRAGMA table_info('log')")):
        for statement in LOG_LAST:
            db.execute(statement)


@contextmanager
def _migration(db: sqlite3.Connection, version: str, *, unversioned: bool = False
               ) -> Iterator[bool]:
    """One migration's write transaction: yields whether the file is still at ``version``
    (a file with no version too, when ``unversioned``); else another process migrated it and
    there is nothing to do. On success the file gets ``event_pieces`` (schema version 6) and
    the log's ``last`` (version 7), is stamped with the current version and committed; on any
    error rolled back, as it was."""
    db.execute("BEGIN IMMEDIATE")
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        mine = unversioned if row is None else row[0] == version
        yield mine
        if mine:
            for statement in EVENT_PIECES:
                db.execute(statement)
            _log_last(db)
            db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                       (str(SCHEMA_VERSION),))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT" if mine else "ROLLBACK")


def _rebuild_events(db: sqlite3.Connection) -> None:
    """Move the events into the current events table (in the caller's transaction)."""
    (sql,) = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'"
                        ).fetchone()
    if "WITHOUT ROWID" not in sql.upper():
        return
    db.execute("ALTER TABLE events RENAME TO events_v2")
    db.execute(EVENTS_V3)
    db.execute("INSERT INTO events (run_id, seq, type, data) "
               "SELECT run_id, seq, type, data FROM events_v2 ORDER BY run_id, seq")
    db.execute("DROP TABLE events_v2")
