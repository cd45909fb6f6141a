"""Opening a SQLite store file without harming it (SPEC §5).

A file is looked at read-only first and identified (SQLite header, the store's ``meta`` table
and schema version, the table layout) before anything writes to it. Only a new or empty file
becomes a store; only a store of a version this build can write is opened for writing; a file
that is not writable (or in a directory that is not) is opened for reading. Every refusal is a
:class:`~pytest_graphflow.errors.StoreFileError` (or ``UnsupportedFormat`` for another store
version) naming the file and the fix, and leaves the file's bytes as they were.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from ..errors import StoreFileError, UnsupportedFormat

__all__ = [
    "APPLICATION_ID",
    "SCHEMA_VERSION",
    "create_statements",
    "file_error",
    "open_store",
]

SCHEMA_VERSION = 2
"""The layout of the tables this build writes and reads (1: before incremental paths)."""

APPLICATION_ID = 0x4746_6C77
"""``PRAGMA application_id`` of a store file (``"GFlw"``), so tools can recognise one."""

_HEADER = b"SQLite format 3\x00"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    run_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    graph_id TEXT NOT NULL,
    node_id TEXT,
    step INTEGER NOT NULL,
    timestamp TEXT NOT NULL,
    ts_us INTEGER NOT NULL,
    status TEXT NOT NULL,
    tenant_id TEXT,
    format_version INTEGER NOT NULL,
    path_id INTEGER,
    path_len INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS checkpoints_run ON checkpoints (run_id, ts_us, seq);
CREATE INDEX IF NOT EXISTS checkpoints_thread ON checkpoints (thread_id, ts_us, seq);
CREATE TABLE IF NOT EXISTS checkpoint_nodes (
    checkpoint_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    node TEXT NOT NULL,
    PRIMARY KEY (checkpoint_id, node)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS checkpoint_nodes_run ON checkpoint_nodes (run_id, node);
CREATE TABLE IF NOT EXISTS paths (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    parent INTEGER,
    length INTEGER NOT NULL,
    nodes TEXT NOT NULL
);
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

_V1_CHECKPOINTS = ["id", "run_id", "thread_id", "graph_id", "node_id", "node_ids", "step",
                   "timestamp", "ts_us", "save_order", "status", "tenant_id", "format_version",
                   "data"]
"""The columns of the checkpoints table of schema version 1 (migrated on a writable open)."""


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def _layout(db: sqlite3.Connection) -> dict[str, list[str]]:
    tables = [r[0] for r in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    return {t: [c[1] for c in db.execute(f"PRAGMA table_info('{t}')")] for t in tables}


def _expected_layout() -> dict[str, list[str]]:
    db = sqlite3.connect(":memory:")
    try:
        for statement in _statements(_SCHEMA):
            db.execute(statement)
        return _layout(db)
    finally:
        db.close()


_LAYOUT = _expected_layout()


def file_error(path: str, problem: str, fix: str) -> StoreFileError:
    """The error for a store file ``path`` with ``problem``; ``fix`` says what to do."""
    exc = StoreFileError(f"store file {path!r} {problem}; {fix}")
    exc.path = path  # type: ignore[attr-defined]
    return exc


_PASS_STORE = "pass the path of a file written by SQLiteCheckpointStore, or a new path to create one"


def _identify(path: str) -> int | None:
    """The schema version of the store in ``path``; ``None`` for a new or empty file.

    Reads only (the file is opened with ``mode=ro``).

    Raises:
        StoreFileError: the file is not a store (another kind of file, another SQLite
            database, another table layout) or cannot be read (corrupt).
        UnsupportedFormat: a store written by a newer pytest-graphflow.
    """
    try:
        with open(path, "rb") as f:
            header = f.read(len(_HEADER))
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise file_error(path, "is a directory", _PASS_STORE) from None
    except OSError as exc:
        raise file_error(path, f"cannot be read ({exc.strerror})",
                         "check its permissions, or pass another path") from None
    if not header:
        return None
    if header != _HEADER:
        raise file_error(path, "is not a SQLite database (its first bytes are not SQLite's "
                         "header: another kind of file, or damaged)", _PASS_STORE)
    # With no journal beside it the file holds everything: read it as immutable, which
    # creates no -wal/-shm files. Otherwise read it (and its journal) read-only.
    mode = "mode=ro" if _has_journal(path) else "immutable=1"
    try:
        probe = sqlite3.connect(f"{Path(path).absolute().as_uri()}?{mode}", uri=True)
    except sqlite3.Error as exc:
        raise file_error(path, f"cannot be opened for reading ({exc})",
                         "check the file's and its directory's permissions") from None
    try:
        layout = _layout(probe)
        (app_id,) = probe.execute("PRAGMA application_id").fetchone()
        (user_version,) = probe.execute("PRAGMA user_version").fetchone()
        if not layout and app_id == 0 and user_version == 0:
            return None  # an empty SQLite database: nothing to harm
        version = _stored_version(probe, layout)
    except sqlite3.DatabaseError as exc:
        raise file_error(path, f"cannot be read as SQLite ({exc}): the file is damaged",
                         "restore it from a backup, or pass another path") from None
    finally:
        probe.close()
    if version is None:
        raise file_error(path, "is a SQLite database but not a pytest-graphflow store (no "
                         "store meta table)", _PASS_STORE)
    if version > SCHEMA_VERSION:
        raise UnsupportedFormat(
            f"store file {path!r} has schema version {version}, written by a newer "
            f"pytest-graphflow; this build reads schema versions up to {SCHEMA_VERSION}. "
            "Upgrade pytest-graphflow to open it."
        )
    expected = {1: _V1_CHECKPOINTS, SCHEMA_VERSION: _LAYOUT["checkpoints"]}.get(version)
    if expected is None or layout.get("checkpoints") != expected or (
        version == SCHEMA_VERSION and layout != _LAYOUT
    ):
        raise file_error(path, f"says schema version {version} but its tables have another "
                         "layout (changed by hand or by another program)",
                         "restore it from a backup, or pass another path")
    return version


def _stored_version(db: sqlite3.Connection, layout: dict[str, list[str]]) -> int | None:
    if layout.get("meta") != ["key", "value"]:
        return None
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        return None
    try:
        return int(row[0])
    except (TypeError, ValueError):
        return None


def _writable(path: str) -> bool:
    """Whether the file (or, when missing, its directory) and its directory can be written."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.access(folder, os.W_OK):
        return False
    return not os.path.exists(path) or os.access(path, os.W_OK)


def open_store(path: str, *, readonly: bool) -> tuple[sqlite3.Connection, bool]:
    """Open (creating or migrating if needed) the store ``path``.

    Returns:
        The connection (autocommit mode) and whether it is read-only.

    Raises:
        StoreFileError, UnsupportedFormat: see :func:`_identify`; also a missing file opened
            ``readonly``, a new file in a directory that cannot be written, a failed migration.
    """
    if path == ":memory:":
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        _create(db)
        return db, False
    version = _identify(path)
    writable = not readonly and _writable(path)
    if version is None:
        if readonly:
            raise file_error(path, "does not exist (or is empty), and it was opened read-only",
                             "pass the path of an existing store file")
        if not writable:
            raise file_error(path, "cannot be created: the file or its directory is not "
                             "writable", "pass a path in a writable directory")
    if not writable:
        if version != SCHEMA_VERSION:
            raise UnsupportedFormat(
                f"store file {path!r} has schema version {version}, which this build migrates "
                f"to version {SCHEMA_VERSION} when it opens the file for writing; it was opened "
                "read-only. Open it once with write access (SQLiteCheckpointStore(path)), or "
                "read it with the pytest-graphflow version that wrote it."
            )
        return _open_readonly(path), True
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA busy_timeout = 5000")
        if version is None:
            _create(db)
        elif version == 1:
            from ._sqlite_migrate import migrate_v1

            migrate_v1(db, path)
        if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.Error as exc:
        db.close()
        name = getattr(exc, "sqlite_errorname", "")
        if name.startswith("SQLITE_READONLY") and version == SCHEMA_VERSION:
            return _open_readonly(path), True  # read-only after all (a read-only mount, ...)
        raise file_error(path, f"could not be prepared for writing ({exc})",
                         "check free disk space and permissions, or open it read-only "
                         "(SQLiteCheckpointStore(path, readonly=True))") from None
    except BaseException:
        db.close()
        raise
    return db, False


def _has_journal(path: str) -> bool:
    return os.path.exists(f"{path}-wal") or os.path.exists(f"{path}-journal")


def _open_readonly(path: str) -> sqlite3.Connection:
    """A read-only connection. Without a journal beside it, the file holds everything and
    is read as immutable (SQLite then needs no -wal/-shm files, so a read-only directory
    works); with one, SQLite reads the file and its journal read-only."""
    mode = "mode=ro" if _has_journal(path) else "immutable=1"
    uri = f"{Path(path).absolute().as_uri()}?{mode}"
    db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA busy_timeout = 5000")
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        db.close()
        raise file_error(path, f"cannot be read read-only ({exc}): a writer's journal "
                         f"({os.path.basename(path)}-wal) is beside it and SQLite needs write "
                         "access to the directory to read it",
                         "read it where the directory is writable, or let the writer finish "
                         "and close the file") from None
    return db


def _create(db: sqlite3.Connection) -> None:
    """Lay out a new store (incremental auto-vacuum must be set before the first table)."""
    db.execute("PRAGMA auto_vacuum = INCREMENTAL")
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute("BEGIN IMMEDIATE")
    try:
        for statement in _statements(_SCHEMA):
            db.execute(statement)
        db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                   (str(SCHEMA_VERSION),))
        db.execute("INSERT OR IGNORE INTO meta VALUES ('application', ?)",
                   (json.dumps("pytest-graphflow"),))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def create_statements() -> list[str]:
    """The statements that lay out a new store's tables (for migrations)."""
    return _statements(_SCHEMA)
