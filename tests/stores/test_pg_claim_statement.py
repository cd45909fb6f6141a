"""A free or new thread is claimed in one statement on PostgreSQL (issue 29): what the claim
writes and answers is what the transaction that reads the claim row and decides writes and
answers; a thread that statement cannot take (a live claim, a row deleted while it waited, a
merge of the run's events under way) is decided by that transaction, as before.

Each case runs twice on fresh schemas, the one statement allowed and refused (its answer
replaced by "nothing written"), and compares the claim rows, the tokens and the errors.
"""

from __future__ import annotations

import cProfile
import pstats
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pytest_graphflow import PostgresCheckpointStore
from pytest_graphflow._stores.postgres import _claims, _conn
from pytest_graphflow._stores.postgres._conn import PgConnections, run_now
from pytest_graphflow.errors import ThreadBusy

MakeStore = Callable[..., PostgresCheckpointStore]
T0 = datetime(2025, 1, 1, tzinfo=UTC)

on_asyncio = pytest.mark.parametrize("anyio_backend", ["asyncio"])


@pytest.fixture
def takes(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The one statement's answers (a row, or ``None``: nothing written), in order; while
    ``takes`` holds the string ``"refuse"`` first, the statement is not sent and answers
    ``None``, so every claim is decided by the transaction."""
    answers: list[Any] = []
    real = PgConnections.fetch_one

    async def fetch_one(self: PgConnections, query: str, params: Any) -> Any:
        if query is not _claims._TAKE:
            return await real(self, query, params)
        if answers[:1] == ["refuse"]:
            return None
        found = await real(self, query, params)
        answers.append(found)
        return found

    monkeypatch.setattr(PgConnections, "fetch_one", fetch_one)
    return answers


def _rows(store: PostgresCheckpointStore) -> list[tuple[Any, ...]]:
    with psycopg.connect(store.dsn, options=f"-c search_path={store.schema}") as conn:
        return conn.execute("SELECT thread_id, run_id, token, expires_us, ttl FROM claims "
                            "ORDER BY thread_id").fetchall()


async def _story(store: PostgresCheckpointStore) -> list[Any]:
    """Claims in every state a thread's row can be in; what each answers or raises."""
    out: list[Any] = []

    async def claim(thread: str, run: str, at: float, ttl: float | None = None) -> None:
        try:
            out.append(await store.claim(thread, run, now=T0 + timedelta(seconds=at), ttl=ttl))
        except ThreadBusy as exc:
            out.append(("busy", str(exc), exc.holder, exc.expires_at))

    await claim("t-new", "run-1", 0)  # a new thread
    await claim("t-new", "run-2", 1)  # live: refused
    await claim("t-new", "run-2", 30.5)  # expired (the default ttl is 30 s): taken over
    token = out[-1]
    await store.release("t-new", token)
    await claim("t-new", "run-3", 31, ttl=2.5)  # released: taken again
    await claim("t-new", "run-4", 33.5)  # expired at exactly now: taken over
    await claim("t-new", "run-5", 34)  # live: refused
    old = await store.claim("t-gone", "run-5", now=T0, ttl=10)
    await store.release("t-gone", old)
    await store.delete_thread("t-gone", now=T0)
    await claim("t-gone", "run-6", 0)  # above the deleted thread's tokens
    await claim("t-other", "run-7", 0)  # a new thread above the floor too
    return out


@pytest.mark.anyio
@on_asyncio
async def test_a_claim_writes_and_answers_what_the_transaction_does(
    make_pg_store: MakeStore, postgres_dsn: str, takes: list[Any]
) -> None:
    fast = make_pg_store(schema="claim_one_statement")
    general = make_pg_store(schema="claim_transaction")
    try:
        seen = await _story(fast)
        fast_rows = _rows(fast)
        answered = list(takes)
        takes[:] = ["refuse"]
        assert await _story(general) == seen
        assert _rows(general) == fast_rows
    finally:
        fast.drop()
        general.drop()
    # The statement took every free or new thread, and wrote nothing on a live claim.
    assert [a is not None for a in answered] == [
        True, False, True, True, True, False, True, True, True]
    assert [a[0] for a in answered if a is not None] == [1, 2, 3, 4, 1, 2, 2]
    assert seen[6] == seen[7] == 2  # above the token the deletion left (1)
    assert [s[0] for s in seen if isinstance(s, tuple)] == ["busy", "busy"]


def _hold_then(dsn: str, schema: str, lock_sql: str, then: Callable[[psycopg.Connection[Any]],
               None], ready: threading.Event, failures: list[BaseException]) -> None:
    """In a transaction of its own: take a lock, wait until another backend waits for a lock,
    do ``then`` and commit."""
    try:
        with psycopg.connect(dsn) as holder, psycopg.connect(dsn, autocommit=True) as probe:
            holder.execute(f"SET search_path = {schema}")
            holder.execute(lock_sql)
            ready.set()
            for _ in range(1_000_000):
                row = probe.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND pid <> %s", (holder.info.backend_pid,)).fetchone()
                if row is not None and row[0]:
                    break
            else:
                raise AssertionError("no claim waited for the lock")
            then(holder)
            holder.commit()
    except BaseException as exc:  # pragma: no cover - reported by the test
        failures.append(exc)
        ready.set()


@pytest.mark.anyio
@on_asyncio
async def test_a_row_deleted_while_the_statement_waited_is_claimed_above_its_tokens(
    make_pg_store: MakeStore, postgres_dsn: str, takes: list[Any]
) -> None:
    """The statement finds the released row, waits for its lock while delete_thread deletes
    it and raises the token floor: it writes nothing (it inserts only a row its snapshot did
    not have, whose token it computed before the wait), and the transaction takes the thread
    above the deleted tokens."""
    store = make_pg_store()
    old = await store.claim("t-1", "run-a", now=T0, ttl=10)
    await store.release("t-1", old)
    ready = threading.Event()
    failures: list[BaseException] = []

    def delete(holder: psycopg.Connection[Any]) -> None:
        holder.execute("DELETE FROM claims WHERE thread_id = 't-1'")
        holder.execute("INSERT INTO meta VALUES ('claim_token_floor', %s) ON CONFLICT (key) "
                       "DO UPDATE SET value = excluded.value", (str(old + 5),))

    deleter = threading.Thread(target=_hold_then, args=(
        postgres_dsn, store.schema, "SELECT 1 FROM claims WHERE thread_id = 't-1' FOR UPDATE",
        delete, ready, failures))
    deleter.start()
    ready.wait()
    takes.clear()
    new = await store.claim("t-1", "run-b", now=T0, ttl=10)
    deleter.join()
    assert not failures, failures
    assert takes == [None]  # the statement wrote nothing
    assert new == old + 6
    assert await store.current_claim("t-1") == ("run-b", new, T0 + timedelta(seconds=10))


@pytest.mark.anyio
@on_asyncio
async def test_a_merge_of_the_runs_events_under_way_sends_the_claim_to_wait_for_it(
    make_pg_store: MakeStore, postgres_dsn: str, takes: list[Any]
) -> None:
    """The run's events lock held (a merge under way): the statement does not wait for it
    and writes nothing; the transaction waits for the lock, then claims."""
    store = make_pg_store()
    ready = threading.Event()
    failures: list[BaseException] = []
    key = _claims.events_lock_key("run-a")
    holder = threading.Thread(target=_hold_then, args=(
        postgres_dsn, store.schema, f"SELECT pg_advisory_xact_lock(hashtextextended('{key}', 0))",
        lambda _: None, ready, failures))
    holder.start()
    ready.wait()
    takes.clear()
    token = await store.claim("t-1", "run-a", now=T0, ttl=10)
    holder.join()
    assert not failures, failures
    assert takes == [None]
    assert await store.current_claim("t-1") == ("run-a", token, T0 + timedelta(seconds=10))



def test_calls_a_claim_of_a_new_thread_on_the_sync_connection(make_pg_store: MakeStore) -> None:
    """What the client does for a claim of a new thread, counted (cProfile): one statement
    through libpq, not a transaction in pipeline mode through psycopg's cursor."""
    store = make_pg_store()
    for i in range(3):  # warm: the connection, the statement prepared
        run_now(store.claim(f"t-{i}", f"run-{i}", now=T0))
    profile = cProfile.Profile()
    profile.enable()
    for i in range(3, 23):
        run_now(store.claim(f"t-{i}", f"run-{i}", now=T0))
    profile.disable()
    per_claim = int(pstats.Stats(profile).total_calls) / 20  # type: ignore[attr-defined]
    assert per_claim <= 60, per_claim  # 443 as a transaction in pipeline mode, 35 now


@pytest.mark.anyio
@on_asyncio
async def test_calls_a_claim_of_a_new_thread_on_the_async_pool(
    make_pg_store: MakeStore, monkeypatch: pytest.MonkeyPatch, anyio_backend: str
) -> None:
    monkeypatch.setattr(_conn, "_QUICK_WAIT", 30.0)  # however slow the host
    monkeypatch.setattr(_conn, "_MAX_BUSY", 3600.0)
    async with make_pg_store() as store:
        for i in range(3):
            await store.claim(f"t-{i}", f"run-{i}", now=T0)
        profile = cProfile.Profile()
        profile.enable()
        for i in range(3, 23):
            await store.claim(f"t-{i}", f"run-{i}", now=T0)
        profile.disable()
    per_claim = int(pstats.Stats(profile).total_calls) / 20  # type: ignore[attr-defined]
    assert per_claim <= 80, per_claim  # 779 as a transaction in pipeline mode, 42 now
