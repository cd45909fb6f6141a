"""The SQLite store's tables: their layout, its version, and the error for a file problem."""

from __future__ import annotations

import sqlite3

from ...errors import StoreFileError

__all__ = [
    "APPLICATION_ID",
    "EVENTS_V3",
    "EVENT_PIECES",
    "LAST_OF_KEYS",
    "LAYOUT",
    "LAYOUT_V3",
    "LAYOUT_V4",
    "LAYOUT_V5",
    "LAYOUT_V6",
    "LOG",
    "LOG_LAST",
    "SCHEMA_VERSION",
    "V1_CHECKPOINTS",
    "WAITING_INDEX",
    "create_statements",
    "file_error",
    "layout",
]

SCHEMA_VERSION = 7
"""The layout of the tables this build writes and reads (1: before incremental paths; 2: a
path segment per checkpoint, no tail in the row, events in a ``WITHOUT ROWID`` table; 3:
rows keep their path's tail, see :mod:`._rows`, and events are a rowid table with a
``(run_id, seq)`` index; 4: the ``log`` table, see :mod:`._tail`, of 16 slots; 5: the log
has 64 slots, and each of its rows says so in ``slots``, a column without a default, so a
build that writes version 4 fails to write into it rather than overwrite a piece not folded
yet; 6: a fold moves a piece's events into ``event_pieces`` whole, see :mod:`._tail`; 7:
each log row keeps its events' highest seq in ``last``, which the fold copies instead of
working it out of ``ev_keys`` with SQLite's JSON functions, then half a fold's cost).
Versions 2 and 3 have the same columns; version 4 adds one table, version 5 a column of it,
version 6 one table and its index, version 7 a column of ``log`` (after ``slots``: where
``ALTER TABLE`` adds it).

Why events have a row id: an event's JSON (a few hundred bytes) is too big for a ``WITHOUT
ROWID`` b-tree, whose interior pages hold whole rows; a step's events then touched four
pages of the file, now two."""

APPLICATION_ID = 0x4746_6C77
"""``PRAGMA application_id`` of a store file (``"GFlw"``), so tools can recognise one."""


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
CREATE INDEX IF NOT EXISTS checkpoints_waiting ON checkpoints (thread_id)
    WHERE status = 'interrupted';
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
    UNIQUE (run_id, seq)
);
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
CREATE TABLE IF NOT EXISTS log (
    slot INTEGER PRIMARY KEY,
    seq INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    id TEXT,
    thread_id TEXT,
    ts_us INTEGER,
    node_id TEXT,
    status TEXT,
    tenant_id TEXT,
    graph_id TEXT,
    step INTEGER,
    timestamp TEXT,
    format_version INTEGER,
    path_id INTEGER,
    path_len INTEGER,
    data TEXT,
    ev_keys TEXT,
    events TEXT,
    slots INTEGER NOT NULL,
    last INTEGER
);
CREATE TABLE IF NOT EXISTS event_pieces (
    seq INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    last INTEGER NOT NULL,
    ev_keys TEXT NOT NULL,
    events TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS event_pieces_run ON event_pieces (run_id, last);
CREATE TABLE IF NOT EXISTS claims (
    thread_id TEXT PRIMARY KEY,
    run_id TEXT,
    token INTEGER NOT NULL,
    expires_us INTEGER,
    ttl REAL
);
"""

WAITING_INDEX = next(s for s in _SCHEMA.split(";") if "checkpoints_waiting" in s).strip()
"""The partial index ``waiting()`` reads (the interrupted checkpoints, by thread). An index,
not a column: it changes no table's layout, so the schema version stays 3, a writable open of
an older file adds it (:func:`~._file.open_store`), and a build without it reads such
a file as before."""

EVENTS_V3 = next(s for s in _SCHEMA.split(";") if "TABLE IF NOT EXISTS events " in s).strip()
"""The statement that creates the events table of schema version 3."""

LOG = next(s for s in _SCHEMA.split(";") if "TABLE IF NOT EXISTS log " in s).strip()
"""The statement that creates the ``log`` table (schema version 7): the pieces written since
the last fold, without an index (see :mod:`._tail`)."""

LAST_OF_KEYS = "(SELECT MAX(json_extract(value, '$[0]')) FROM json_each(ev_keys))"
"""A ``log`` row's highest event seq worked out of its ``ev_keys`` (what its ``last`` holds
since schema version 7), as an SQL expression."""

LOG_LAST = ["ALTER TABLE log ADD COLUMN last INTEGER",
            f"UPDATE log SET last = {LAST_OF_KEYS} WHERE events IS NOT NULL"]
"""The statements that give a ``log`` of schema version 5 or 6 the ``last`` of version 7,
filled in for every row that has events."""

EVENT_PIECES = [s.strip() for s in _SCHEMA.split(";") if "event_pieces" in s]
"""The statements that create the ``event_pieces`` table and its index (schema version 6):
the folded pieces' events as the log kept them, one row a piece (see :mod:`._tail`)."""

V1_CHECKPOINTS = ["id", "run_id", "thread_id", "graph_id", "node_id", "node_ids", "step",
                   "timestamp", "ts_us", "save_order", "status", "tenant_id", "format_version",
                   "data"]
"""The columns of the checkpoints table of schema version 1 (migrated on a writable open)."""


def create_statements() -> list[str]:
    """The statements that lay out a new store's tables (idempotent)."""
    return _statements(_SCHEMA)


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def layout(db: sqlite3.Connection) -> dict[str, list[str]]:
    """Each table of ``db`` and its column names."""
    tables = [r[0] for r in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    return {t: [c[1] for c in db.execute(f"PRAGMA table_info('{t}')")] for t in tables}


def _expected_layout() -> dict[str, list[str]]:
    db = sqlite3.connect(":memory:")
    try:
        for statement in _statements(_SCHEMA):
            db.execute(statement)
        return layout(db)
    finally:
        db.close()


LAYOUT = _expected_layout()
"""The tables of a store file of this schema version and their columns."""

LAYOUT_V6 = {**LAYOUT, "log": [c for c in LAYOUT["log"] if c != "last"]}
"""The tables of a file of schema version 6 (its ``log`` has no ``last``)."""

LAYOUT_V5 = {table: columns for table, columns in LAYOUT_V6.items() if table != "event_pieces"}
"""The tables of a file of schema version 5 (no ``event_pieces``)."""

LAYOUT_V3 = {table: columns for table, columns in LAYOUT_V5.items() if table != "log"}
"""The tables of a file of schema version 2 or 3 (no ``log``)."""

LAYOUT_V4 = {**LAYOUT_V5, "log": [c for c in LAYOUT_V5["log"] if c != "slots"]}
"""The tables of a file of schema version 4 (its ``log`` has no ``slots``)."""


def file_error(path: str, problem: str, fix: str) -> StoreFileError:
    """The error for a store file ``path`` with ``problem``; ``fix`` says what to do."""
    exc = StoreFileError(f"store file {path!r} {problem}; {fix}")
    exc.path = path  # type: ignore[attr-defined]
    return exc


PASS_EXISTING = "pass the path of a file written by SQLiteCheckpointStore"
"""The fix for a file that is not a store, when the store is opened read-only (it creates
nothing, so a new path would not do)."""

PASS_STORE = f"{PASS_EXISTING}, or a new path to create one"
