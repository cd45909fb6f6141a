"""The PostgreSQL store's tables, their version and the migrations between versions.

The schema is created (or migrated) when a store opens, under a transaction-scoped advisory
lock, so any number of workers may start at once against a fresh database. A database written
by a newer build is refused with ``UnsupportedFormat`` and left untouched.
"""

from __future__ import annotations

import re

import psycopg

from ...errors import InvalidArgument, UnsupportedFormat
from ._conn import Cursor
from ._queue import QUEUE_SCHEMA

__all__ = ["CLAIMS_RUN_INDEX", "MIGRATIONS", "OWN_TABLES", "PATHS", "SCHEMA_VERSION", "drop_tables",
           "ensure_schema"]

SCHEMA_VERSION = 4
"""The layout of the tables this build writes and reads (4: a checkpoint's ``visited`` path
kept as blocks of ``paths``, :mod:`._paths`; 3: no ``checkpoints_order`` index,
an index of claims by run; 2: a run's events written together are one row of ``events``; 1:
one row an event)."""

CLAIMS_RUN_INDEX = "CREATE INDEX IF NOT EXISTS claims_run ON claims (run_id)"
"""The claims of a run: an unfenced merge of its events marks them (see
:func:`._events.write_events`)."""

WAITING_INDEX = ('CREATE INDEX IF NOT EXISTS checkpoints_waiting ON checkpoints '
                 '(thread_id COLLATE "C") WHERE status = \'interrupted\'')
"""The partial index ``waiting()`` reads (the interrupted checkpoints, by thread id in
``"C"`` order). An index, not a table: the schema version stays; :func:`ensure_schema` adds
it to a schema written before it, and a build without it does not see it."""

SAVE_ORDER_DEFAULT = ("ALTER TABLE checkpoints ALTER COLUMN save_order SET DEFAULT "
                      "nextval('save_order')")
"""A checkpoint's ``save_order`` drawn by the insert's default (a step's statement names no
``nextval``: the server's plan keeps no subquery scan for it). A default, not a table: the
schema version stays; :func:`ensure_schema` adds it to a schema written before it, and a build
that names ``save_order`` in its inserts writes the same rows with it or without."""

PATHS = [
    "CREATE SEQUENCE IF NOT EXISTS path_chains",
    # A chain's blocks: ``upto`` the chain's length after the block, ``nodes`` the JSON array
    # of the nodes it adds (see ._paths).
    """CREATE TABLE IF NOT EXISTS paths (
        chain BIGINT NOT NULL,
        upto INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        nodes TEXT NOT NULL,
        PRIMARY KEY (chain, upto)
    )""",
    "CREATE INDEX IF NOT EXISTS paths_run ON paths (run_id)",
]
"""The path blocks' table (schema version 4), its index and its chains' sequence."""

_PATH_COLUMNS = ("ALTER TABLE checkpoints ADD COLUMN IF NOT EXISTS path_chain BIGINT NOT NULL "
                 "DEFAULT 0, ADD COLUMN IF NOT EXISTS path_len INTEGER NOT NULL DEFAULT 0")
"""A checkpoint's path prefix: the first ``path_len`` nodes of the chain ``path_chain`` (0:
none; the row's ``data`` holds its whole path, as every row of version 3 does)."""

_CREATE = [
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE SEQUENCE IF NOT EXISTS save_order",
    """CREATE TABLE IF NOT EXISTS checkpoints (
        id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        graph_id TEXT NOT NULL,
        node_id TEXT,
        node_ids TEXT[] NOT NULL,
        step INTEGER NOT NULL,
        ts_us BIGINT NOT NULL,
        save_order BIGINT NOT NULL DEFAULT nextval('save_order'),
        status TEXT NOT NULL,
        tenant_id TEXT,
        format_version INTEGER NOT NULL,
        data TEXT NOT NULL,
        path_chain BIGINT NOT NULL DEFAULT 0,
        path_len INTEGER NOT NULL DEFAULT 0
    )""",
    *PATHS,
    "CREATE INDEX IF NOT EXISTS checkpoints_run ON checkpoints (run_id, ts_us, save_order)",
    "CREATE INDEX IF NOT EXISTS checkpoints_thread ON checkpoints (thread_id, ts_us, save_order)",
    WAITING_INDEX,
    # Events written together (a step's) are one row: ``seq`` and ``last_seq`` the first and
    # last of their seqs, ``seqs`` all of them in order (comma-separated), ``data`` their JSON
    # texts in that order, one a line. The rows of a run never overlap (seq..last_seq).
    """CREATE TABLE IF NOT EXISTS events (
        run_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        last_seq BIGINT NOT NULL,
        seqs TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    )""",
    """CREATE TABLE IF NOT EXISTS event_compactions (
        run_id TEXT PRIMARY KEY,
        earliest_seq BIGINT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY,
        first_order BIGSERIAL,
        thread_id TEXT,
        graph_id TEXT,
        status TEXT,
        tenant_id TEXT,
        updated_at TEXT,
        data TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS artifacts (
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        first_order BIGSERIAL,
        media_type TEXT NOT NULL,
        size BIGINT NOT NULL,
        content BYTEA NOT NULL,
        PRIMARY KEY (run_id, name)
    )""",
    """CREATE TABLE IF NOT EXISTS claims (
        thread_id TEXT PRIMARY KEY,
        run_id TEXT,
        token BIGINT NOT NULL,
        expires_us BIGINT,
        ttl DOUBLE PRECISION
    )""",
    CLAIMS_RUN_INDEX,
    *QUEUE_SCHEMA,
]

OWN_TABLES = tuple(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", " ".join(_CREATE)))
"""The tables a store creates in its schema (``meta`` first)."""

_SEQUENCES = tuple(re.findall(r"CREATE SEQUENCE IF NOT EXISTS (\w+)", " ".join(_CREATE)))

_RELATIONS = (
    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY c.relname"
)
"""The tables (and views) in a schema."""

MIGRATIONS: dict[int, list[str]] = {
    # 1 -> 2: each event row becomes a row of one event (what a read returns is unchanged).
    1: ["ALTER TABLE events ADD COLUMN last_seq BIGINT, ADD COLUMN seqs TEXT",
        "UPDATE events SET last_seq = seq, seqs = seq::text",
        "ALTER TABLE events ALTER COLUMN last_seq SET NOT NULL, "
        "ALTER COLUMN seqs SET NOT NULL, DROP COLUMN type"],
    # 2 -> 3: no read needs the index of all checkpoints by save order (an unfiltered
    # ``list`` sorts), and each step inserted into it; an unfenced merge of a run's events
    # finds the run's claims by an index.
    2: ["DROP INDEX IF EXISTS checkpoints_order", CLAIMS_RUN_INDEX],
    # 3 -> 4: path blocks (._paths). The rows written before keep their whole path in
    # ``data`` (``path_chain`` 0), which reads the same: no row is rewritten, and adding
    # columns with a constant default rewrites no table.
    3: [*PATHS, _PATH_COLUMNS],
}
"""``MIGRATIONS[n]``: the statements that turn schema version ``n`` into ``n + 1``.

A build that changes the layout adds its step here and bumps :data:`SCHEMA_VERSION`, and
the first store that opens the database runs the missing steps, in the transaction that
checks the version (under the advisory lock): a failed migration leaves the old version.
"""


async def ensure_schema(cur: Cursor, schema: str, where: str) -> int:
    """Create the schema's tables, or migrate them, inside the caller's transaction.

    A schema that holds tables of anything but a store (an application's, even ``public``'s)
    is refused before anything is written to it: the store never adopts them, so its
    :func:`drop_tables` never touches them.

    Returns the version found before (0 for a fresh schema).

    Raises:
        InvalidArgument: the schema holds tables that are not a store's (nothing is changed).
        UnsupportedFormat: the schema was written by a newer build (nothing is changed).
    """
    await cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                      (f"graphflow-schema:{schema}",))
    await cur.execute(_RELATIONS, (schema,))
    tables = [r[0] for r in await cur.fetchall()]
    found = await _stored_version(cur, schema) if "meta" in tables else None
    if found is None and tables:
        raise _not_ours(where, tables)
    if found is None:
        await cur.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        for statement in _CREATE:
            await cur.execute(statement)
        await cur.execute("INSERT INTO meta VALUES ('schema_version', %s)", (str(SCHEMA_VERSION),))
        return 0
    if found > SCHEMA_VERSION:
        raise UnsupportedFormat(
            f"PostgreSQL store {where} has schema version {found}; this build of "
            f"pytest-graphflow reads schema version {SCHEMA_VERSION} (and migrates older ones). "
            "Open it with the version that wrote it, or use another schema."
        )
    foreign = [t for t in tables if t not in OWN_TABLES]
    if foreign:
        raise _not_ours(where, foreign)
    for version in range(found, SCHEMA_VERSION):
        for statement in MIGRATIONS.get(version, []):
            await cur.execute(statement)
    if found != SCHEMA_VERSION:
        await cur.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'",
                          (str(SCHEMA_VERSION),))
    # A schema written before waiting() gets its index, one written before the save order's
    # default gets it (looked up first: each change takes a lock that would wait for the
    # writers of a busy store).
    await cur.execute("SELECT to_regclass(%s), (SELECT atthasdef FROM pg_attribute WHERE "
                      "attrelid = to_regclass(%s) AND attname = 'save_order')",
                      (f"{schema}.checkpoints_waiting", f"{schema}.checkpoints"))
    row = await cur.fetchone()
    if row is None or row[0] is None:
        await cur.execute(WAITING_INDEX)
    if row is None or not row[1]:
        await cur.execute(SAVE_ORDER_DEFAULT)
    return found


async def _stored_version(cur: Cursor, schema: str) -> int | None:
    """The schema version a store's ``meta`` table records; ``None`` when ``meta`` is not a
    store's (other columns, no version)."""
    await cur.execute("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                      "AND attnum > 0 AND NOT attisdropped ORDER BY attnum", (f"{schema}.meta",))
    if [r[0] for r in await cur.fetchall()] != ["key", "value"]:
        return None
    await cur.execute(f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'")
    row = await cur.fetchone()
    try:
        return None if row is None else int(row[0])
    except (TypeError, ValueError):
        return None


def _not_ours(where: str, tables: list[str]) -> InvalidArgument:
    shown = ", ".join(tables[:5]) + (f", ... ({len(tables)} in all)" if len(tables) > 5 else "")
    return InvalidArgument(
        f"{where}: the schema holds tables that are not a pytest-graphflow store's ({shown}); "
        "pass a schema of its own (a new name: the store creates it), e.g. "
        "schema='graphflow'. Nothing in the schema was changed."
    )


async def drop_tables(cur: Cursor, schema: str) -> None:
    """Drop the store's tables and sequences from ``schema``, then the schema itself if
    nothing else is in it (never ``public``). Tables that are not the store's stay."""
    await cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                      (f"graphflow-schema:{schema}",))
    for table in reversed(OWN_TABLES):
        await cur.execute(f"DROP TABLE IF EXISTS {schema}.{table}")
    for sequence in _SEQUENCES:
        await cur.execute(f"DROP SEQUENCE IF EXISTS {schema}.{sequence}")
    if schema == "public":
        return
    await cur.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
    if await cur.fetchone() is None:
        return
    await cur.execute("SAVEPOINT graphflow_drop")
    try:
        await cur.execute(f"DROP SCHEMA {schema}")  # RESTRICT: refused if anything is left
    except psycopg.errors.DependentObjectsStillExist:
        await cur.execute("ROLLBACK TO SAVEPOINT graphflow_drop")
