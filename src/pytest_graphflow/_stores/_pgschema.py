"""The PostgreSQL store's tables, their version and the migrations between versions.

The schema is created (or migrated) when a store opens, under a transaction-scoped advisory
lock, so any number of workers may start at once against a fresh database. A database written
by a newer build is refused with ``UnsupportedFormat`` and left untouched.
"""

from __future__ import annotations

from ..errors import UnsupportedFormat
from ._pgconn import Cursor
from ._pgqueue import QUEUE_SCHEMA

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "ensure_schema"]

SCHEMA_VERSION = 1
"""The layout of the tables this build writes and reads."""

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
        save_order BIGINT NOT NULL,
        status TEXT NOT NULL,
        tenant_id TEXT,
        format_version INTEGER NOT NULL,
        data TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS checkpoints_run ON checkpoints (run_id, ts_us, save_order)",
    "CREATE INDEX IF NOT EXISTS checkpoints_thread ON checkpoints (thread_id, ts_us, save_order)",
    "CREATE INDEX IF NOT EXISTS checkpoints_order ON checkpoints (ts_us, save_order)",
    """CREATE TABLE IF NOT EXISTS events (
        run_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        type TEXT,
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
    *QUEUE_SCHEMA,
]

MIGRATIONS: dict[int, list[str]] = {}
"""``MIGRATIONS[n]``: the statements that turn schema version ``n`` into ``n + 1``.

Empty while there is one version; a build that changes the layout adds its step here and
bumps :data:`SCHEMA_VERSION`, and every store that opens the database runs the missing steps
once (under the advisory lock).
"""


async def ensure_schema(cur: Cursor, schema: str, where: str) -> int:
    """Create the schema's tables, or migrate them, inside the caller's transaction.

    Returns the version found before (0 for a fresh schema).

    Raises:
        UnsupportedFormat: the schema was written by a newer build (nothing is changed).
    """
    await cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                      (f"graphflow-schema:{schema}",))
    await cur.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    await cur.execute("SELECT to_regclass(%s)", (f"{schema}.meta",))
    row = await cur.fetchone()
    if row is None or row[0] is None:
        for statement in _CREATE:
            await cur.execute(statement)
        await cur.execute("INSERT INTO meta VALUES ('schema_version', %s)", (str(SCHEMA_VERSION),))
        return 0
    await cur.execute("SELECT value FROM meta WHERE key = 'schema_version'")
    found_row = await cur.fetchone()
    found = int(found_row[0]) if found_row is not None else 0
    if found > SCHEMA_VERSION:
        raise UnsupportedFormat(
            f"PostgreSQL store {where} has schema version {found}; this build of "
            f"pytest-graphflow reads schema version {SCHEMA_VERSION} (and migrates older ones). "
            "Open it with the version that wrote it, or use another schema."
        )
    for version in range(found, SCHEMA_VERSION):
        for statement in MIGRATIONS.get(version, []):
            await cur.execute(statement)
    if found != SCHEMA_VERSION:
        await cur.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'",
                          (str(SCHEMA_VERSION),))
    return found
