"""How the PostgreSQL store uses its connections on asyncio: one connection kept hot for the
loop's operations one after another, the pool for operations at the same time, and nothing
left behind by a failure, a cancellation or closing the store (issue 29: a step does not pay
a pool checkout). The claim's transaction in pipeline mode leaves the connection usable
whatever it ends with."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

import psycopg
import pytest

from graphflow_chains import counting_chain
from pytest_graphflow import GraphRuntime, PostgresCheckpointStore
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow.errors import CheckpointNotFound, ThreadBusy

MakeCheckpoint = Callable[..., Checkpoint]
MakeStore = Callable[..., PostgresCheckpointStore]
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _chain(steps: int) -> object:
    return counting_chain("pgconn", steps)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_concurrent_runs_on_one_loop_each_get_a_connection(
    make_pg_store: MakeStore, anyio_backend: str
) -> None:
    async with make_pg_store() as store:
        runtime = GraphRuntime(store)
        graph = _chain(6)
        results = await asyncio.gather(*(runtime.ainvoke(graph, {}) for _ in range(8)))
        assert [r.data["n"] for r in results] == [6] * 8
        for r in results:  # every run's log is whole and in order
            seqs = [e["seq"] for e in await store.events(r.run_id)]
            assert seqs
            assert seqs == list(range(len(seqs)))


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_failed_or_cancelled_operation_leaves_the_store_usable(
    make_pg_store: MakeStore, make_cp: MakeCheckpoint, anyio_backend: str
) -> None:
    async with make_pg_store() as store:
        await store.save(make_cp("cp-1"))
        with pytest.raises(CheckpointNotFound):  # raised inside a transaction
            await store.list("run-a", before="cp-nope")
        task = asyncio.ensure_future(store.list("run-a"))
        await asyncio.sleep(0)  # the query is on its way to the server
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await store.save(make_cp("cp-2", at=1))
        assert [c.id for c in await store.list("run-a")] == ["cp-1", "cp-2"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_closing_the_store_closes_the_connection_it_kept(
    make_pg_store: MakeStore, make_cp: MakeCheckpoint, anyio_backend: str
) -> None:
    store = make_pg_store()
    async with store:
        await store.save(make_cp("cp-1"))
        kept = store._pg._hot
        assert kept is not None
    assert kept[0].closed


@pytest.mark.anyio
async def test_a_refused_claim_rolls_back_and_the_next_claim_works(
    make_pg_store: MakeStore, anyio_backend: str
) -> None:
    async with make_pg_store() as store:
        token = await store.claim("thread-a", "run-a", now=T0, ttl=60)
        with pytest.raises(ThreadBusy):
            await store.claim("thread-a", "run-b", now=T0, ttl=60)
        assert await store.current_claim("thread-a") == ("run-a", token,
                                                         T0.replace(minute=1))
        await store.release("thread-a", token)
        assert await store.claim("thread-a", "run-b", now=T0, ttl=60) == token + 1


@pytest.mark.anyio
async def test_a_claim_failing_on_the_server_leaves_no_transaction_open(
    make_pg_store: MakeStore, anyio_backend: str
) -> None:
    async with make_pg_store() as store:
        # A token floor that is not a number fails the claim's first statement on the server:
        # the pipeline aborts, the transaction rolls back, the connection stays usable.
        with psycopg.connect(store.dsn, autocommit=True) as conn:
            conn.execute(f"INSERT INTO {store.schema}.meta VALUES ('claim_token_floor', 'x') "
                         "ON CONFLICT (key) DO UPDATE SET value = excluded.value")
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            await store.claim("thread-a", "run-a", now=T0, ttl=60)
        assert await store.current_claim("thread-a") is None
        with psycopg.connect(store.dsn, autocommit=True) as conn:
            conn.execute(f"UPDATE {store.schema}.meta SET value = '41' "
                         "WHERE key = 'claim_token_floor'")
        assert await store.claim("thread-a", "run-a", now=T0, ttl=60) == 42
