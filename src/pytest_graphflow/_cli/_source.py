"""Where a ``graphflow`` command reads: a SQLite store file or a PostgreSQL DSN.

Every command that takes a store takes either; ``--schema`` names the PostgreSQL store's
schema (default ``graphflow``, as ``PostgresCheckpointStore``). A :class:`Source` *is* the
text a message may show: a file's path as given, a DSN with its password replaced by ``***``
(:mod:`._dsn`), so a message that names the store never prints a password. Only
:func:`open_source` reads the real DSN (``Source.raw``).

A PostgreSQL store is opened only if its schema already holds a store: inspecting never
creates a schema (``--schema`` misspelt is an error naming the fix, not an empty store).
"""

from __future__ import annotations

import re
import shlex
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio

from ..errors import GraphflowError
from ._dsn import redact, scrub

__all__ = ["DEFAULT_SCHEMA", "Source", "add_store_argument", "is_dsn", "open_source"]

T = TypeVar("T")

DEFAULT_SCHEMA = "graphflow"

_URI = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)
_KEYWORDS = frozenset((
    "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "service", "sslmode",
    "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name", "options",
    "target_session_attrs", "channel_binding", "gssencmode", "keepalives", "client_encoding"))
_PAIR = re.compile(r"^\s*([a-z_]+)\s*=")


def is_dsn(text: str) -> bool:
    """Whether ``text`` is a PostgreSQL DSN (``postgresql://...``, or libpq ``key=value``
    pairs starting with a libpq keyword such as ``host=`` or ``dbname=``) rather than a file
    path. An existing file is always a file."""
    if Path(text).is_file():
        return False
    if _URI.match(text):
        return True
    match = _PAIR.match(text)
    return match is not None and match.group(1) in _KEYWORDS


class Source(str):
    """A store as a command was given it; its text is what messages show (the password of a
    DSN hidden); ``raw`` is what was given, ``schema`` the PostgreSQL schema."""

    raw: str
    schema: str | None
    postgres: bool

    def __new__(cls, text: str, schema: str | None = None) -> Source:
        postgres = is_dsn(text)
        self = super().__new__(cls, redact(text) if postgres else text)
        self.raw, self.schema, self.postgres = text, schema, postgres
        return self

    @property
    def as_argument(self) -> str:
        """How to name this store again on a command line (``graphflow runs <this>``)."""
        text = shlex.quote(str(self))
        if self.postgres and self.schema not in (None, DEFAULT_SCHEMA):
            text += f" --schema {self.schema}"
        return text


def add_store_argument(parser: Any, dest: str = "file", *, nargs: str | None = None) -> None:
    """Add the store positional (a SQLite file or a PostgreSQL DSN) and ``--schema``."""
    kwargs: dict[str, Any] = {} if nargs is None else {"nargs": nargs}
    parser.add_argument(dest, metavar="STORE", help="a SQLite store file, or a PostgreSQL DSN "
                        "('postgresql://USER@HOST/DB' or 'host=HOST dbname=DB'; a password "
                        "in it is never printed)", **kwargs)
    add_schema_option(parser)


def add_schema_option(parser: Any) -> None:
    """Add ``--schema`` (the PostgreSQL store's schema)."""
    parser.add_argument("--schema", default=None, metavar="SCHEMA",
                        help=f"a PostgreSQL store's schema (default {DEFAULT_SCHEMA!r})")


def open_source(source: Source, action: Callable[[Any], Awaitable[T]], fail: type[Exception],
                *, write: bool = False) -> T:
    """Open the store ``source`` (read-only unless ``write``), run ``action`` on it, close it.
    Any problem (a missing file, a file or schema that is not a store, an unreachable server)
    raises ``fail`` with one line naming the store and the fix."""
    if source.postgres:
        return _postgres(source, action, fail)
    if source.schema is not None:
        raise fail(f"--schema={source.schema} applies to a PostgreSQL store, and {source!r} is "
                   "a file; leave --schema out, or pass a DSN such as "
                   "'postgresql://USER@HOST/DB'")
    return _sqlite(source, action, fail, write=write)


def _sqlite(source: Source, action: Callable[[Any], Awaitable[T]], fail: type[Exception],
            *, write: bool) -> T:
    from .._stores.sqlite._store import SQLiteCheckpointStore

    path = Path(source.raw)
    if path.is_dir():
        raise fail(f"{source.raw!r} is a directory, not a store file; pass the path of a SQLite "
                   "file written by SQLiteCheckpointStore, or a PostgreSQL DSN")
    if not path.is_file():
        raise fail(f"no store file {source.raw!r}; pass the path of a SQLite file written by "
                   "SQLiteCheckpointStore, or a PostgreSQL DSN ('postgresql://USER@HOST/DB')")

    async def run() -> T:
        with SQLiteCheckpointStore(path, readonly=not write) as store:
            return await action(store)

    try:
        return anyio.run(run)
    except (GraphflowError, sqlite3.Error) as exc:
        text = str(exc)
        raise fail(text if source.raw in text else f"{source.raw!r}: {text}") from None


def _postgres(source: Source, action: Callable[[Any], Awaitable[T]],
              fail: type[Exception]) -> T:
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        from .._stores.postgres._store import PostgresCheckpointStore
    except ImportError as exc:
        raise fail(f"a PostgreSQL store needs the postgres extra ({exc}); install it with "
                   "pip install 'pytest-graphflow[postgres]'") from None
    from .._stores.postgres._conn import check_schema_name

    dsn, schema = source.raw, source.schema or DEFAULT_SCHEMA
    try:
        check_schema_name(schema)
    except ValueError as exc:
        raise fail(f"--schema: {exc}") from None
    try:
        conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise fail(f"DSN {source!r} is not a libpq connection string or URI "
                   f"({scrub(str(exc), dsn)}); write it as 'host=HOST dbname=DB user=USER' "
                   "or 'postgresql://USER@HOST/DB'") from None
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            found = conn.execute("SELECT to_regclass(%s)", (f"{schema}.meta",)).fetchone()
        if found is None or found[0] is None:
            raise fail(f"no pytest-graphflow store in schema {schema!r} of {source!r}; pass "
                       "--schema with the schema the store was opened with "
                       f"(PostgresCheckpointStore(schema=...), default {DEFAULT_SCHEMA!r})")
        store = PostgresCheckpointStore(dsn, schema=schema)
    except psycopg.Error as exc:
        raise fail(f"cannot open the store on {source!r}: {scrub(str(exc), dsn)}") from None
    except GraphflowError as exc:
        raise fail(scrub(str(exc), dsn)) from None
    try:
        return anyio.run(action, store)
    except GraphflowError as exc:
        raise fail(f"{source!r} (schema {schema!r}): {scrub(str(exc), dsn)}") from None
    except psycopg.Error as exc:
        raise fail(f"lost the store on {source!r}: {scrub(str(exc), dsn)}") from None
    finally:
        store.close()
