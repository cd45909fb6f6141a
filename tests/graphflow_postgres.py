"""A real PostgreSQL server for the tests (a pytest plugin loaded by tests/conftest.py).

Where the server comes from, in order:

1. ``GRAPHFLOW_POSTGRES_DSN`` (CI's ``.ci/run`` starts a throwaway cluster and exports it);
2. a throwaway cluster this session starts itself when ``initdb`` is installed (Debian:
   ``apt-get install postgresql``), stopped when the session ends.

Without either, Postgres tests skip with the reason, except under ``CI=true``, where they fail:
CI must never skip them. Tests get their own data, so tests are
independent on one server and xdist workers never see each other's tables.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

DSN_ENV = "GRAPHFLOW_POSTGRES_DSN"

_counter = itertools.count()


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI must run the PostgreSQL tests, but {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests need a server: {reason}. Install PostgreSQL (Debian: "
                f"apt-get install postgresql) or set {DSN_ENV}")


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A libpq DSN of a live PostgreSQL server for this session."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the test extra installs it
        _missing("psycopg is not installed (pip install -e '.[test]')")
    dsn = os.environ.get(DSN_ENV)
    if dsn:
        try:
            psycopg.connect(dsn, connect_timeout=10).close()
        except psycopg.OperationalError as exc:
            _missing(f"{DSN_ENV}={dsn!r} does not connect: {exc}")
        yield dsn
        return
    from graphflow_pgcluster import ThrowawayCluster, find_pg_bin

    if find_pg_bin() is None:
        _missing(f"{DSN_ENV} is not set and no initdb was found")
    try:
        cluster = ThrowawayCluster().start()
    except RuntimeError as exc:
        _missing(f"a throwaway cluster did not start: {exc}")
    try:
        yield cluster.dsn
    finally:
        cluster.stop()


def _drop_schema(dsn: str, name: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture
def fresh_pg_schema(postgres_dsn: str) -> Iterator[str]:
    """The name of a schema that does not exist yet; dropped when the test ends."""
    name = f"t{os.getpid()}_{next(_counter)}"
    yield name
    _drop_schema(postgres_dsn, name)


_TABLES = ("checkpoints", "paths", "events", "event_compactions", "runs", "artifacts", "claims",
           "jobs")


def empty_schema(dsn: str, schema: str) -> None:
    """Delete every row of a store schema (if it exists); its layout and version stay."""
    import psycopg

    from pytest_graphflow._stores.postgres._schema import SCHEMA_VERSION

    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass(%s)", (f"{schema}.claims",)).fetchone()
        if exists is not None and exists[0] is not None:
            conn.execute(f"SET search_path = {schema}")
            for table in _TABLES:
                conn.execute(f"DELETE FROM {table}")  # faster than TRUNCATE on tiny tables
            conn.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'",
                         (str(SCHEMA_VERSION),))


@pytest.fixture(scope="session")
def _pg_process_schema(postgres_dsn: str) -> Iterator[str]:
    """This process's test schema's name, the schema dropped when the session ends (a
    developer's long-lived server keeps no ``tests_<pid>`` schema per pytest worker)."""
    name = f"tests_{os.getpid()}"
    yield name
    _drop_schema(postgres_dsn, name)


@pytest.fixture
def pg_schema(postgres_dsn: str, _pg_process_schema: str) -> Iterator[str]:
    """This process's test schema, emptied when the test ends (creating a schema per test
    costs ~0.2 s; emptying one, a few ms) and dropped when the session ends. Sequences keep
    counting, as they would in a shared database."""
    yield _pg_process_schema
    empty_schema(postgres_dsn, _pg_process_schema)


@pytest.fixture
def make_pg_store(postgres_dsn: str, pg_schema: str) -> Iterator[Callable[..., object]]:
    """Open PostgreSQL stores on this test's schema: ``make_pg_store(claim_ttl=5)``; every
    store opened is closed when the test ends."""
    from pytest_graphflow import PostgresCheckpointStore

    opened: list[PostgresCheckpointStore] = []

    def make(**kwargs: object) -> PostgresCheckpointStore:
        kwargs.setdefault("schema", pg_schema)
        store = PostgresCheckpointStore(postgres_dsn, **kwargs)  # type: ignore[arg-type]
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


_ROW_ORDER = {
    "checkpoints": "save_order", "events": "run_id, seq", "runs": "first_order",
    "claims": "thread_id", "event_compactions": "run_id", "paths": "chain, upto",
}
"""The tables :func:`stored_rows` reads, each with the order its rows are read in."""


def stored_rows(store: Any) -> dict[str, list[str]]:
    """Every row a ``PostgresCheckpointStore`` wrote, table by table in a stable order, as
    the server's text of it: two stores that wrote the same bytes give equal dicts."""
    import psycopg

    with psycopg.connect(store.dsn, autocommit=True) as conn:
        return {table: [r[0] for r in conn.execute(
            f"SELECT t::text FROM {store.schema}.{table} t ORDER BY {order}")]
            for table, order in _ROW_ORDER.items()}


def watch_statements(monkeypatch: pytest.MonkeyPatch, pg: Any,
                     seen: Callable[[str, Any], None]) -> None:
    """Call ``seen(sql, params)`` once before each statement ``pg`` (a store's ``_pg``) runs,
    through ``fetch_one`` or ``send_one``, until ``monkeypatch`` undoes it (a statement
    ``send_one`` declined, then asked again or run by ``fetch_one``, is seen once)."""
    fetch, send = pg.fetch_one, pg.send_one
    declined: list[Any] = [None]

    async def fetch_one(sql: str, params: Any) -> Any:
        if declined[0] is None or params != declined[0]:
            seen(sql, params)
        declined[0] = None
        return await fetch(sql, params)

    def send_one(sql: str, params: Any, ready: Any = None) -> Any:
        if declined[0] is None or params != declined[0]:  # (declined behind another, then
            seen(sql, params)                             # asked again alone: seen once)
        sent = send(sql, params, ready)
        declined[0] = params if sent is None else None
        return sent

    monkeypatch.setattr(pg, "fetch_one", fetch_one)
    monkeypatch.setattr(pg, "send_one", send_one)
