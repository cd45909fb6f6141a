"""A step's statement goes straight through libpq, prepared once per connection, its
parameters and row through psycopg's own adapters (issue 29: calls a step on the async pool
336 -> 158, on the sync connection 190 -> 151). What is stored is byte for byte what
psycopg's cursor stores; what psycopg refuses is refused; a statement the server dropped is
prepared again."""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from pydantic import BaseModel

from graphflow_postgres import stored_rows
from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    PostgresCheckpointStore,
    VirtualClock,
)
from pytest_graphflow._stores.postgres import _conn
from pytest_graphflow._stores.postgres._prepared import Statements

MakeStore = Callable[..., PostgresCheckpointStore]


class _Text(BaseModel):
    n: int = 0
    text: str = ""


def _graph(steps: int, name: str = "prepared") -> Any:
    g = Graph(name, _Text)
    prev = START
    for i in range(steps):
        node = f"n{i}.a-b_c"
        g.node(node, lambda s: {"n": s.n + 1, "text": s.text + "é✓😀\"\\\n"})
        g.edge(prev, node)
        prev = node
    return g.edge(prev, END).compile(checkpoint_policy="every_step")


def _through_psycopg(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every statement through psycopg's cursor (the path before)."""
    monkeypatch.setattr(Statements, "statement", lambda self, query, params: None)


def test_the_prepared_path_stores_the_same_bytes(
    make_pg_store: MakeStore, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dumps = []
    for name in ("prepared", "cursor"):
        if name == "cursor":
            _through_psycopg(monkeypatch)
        store = make_pg_store(schema=f"{pg_schema}_{name}")
        runtime = GraphRuntime(store, clock=VirtualClock(), seed=3)
        assert runtime.invoke(_graph(6)).data["n"] == 6
        runtime.invoke(_graph(2, "second"))
        dumps.append(stored_rows(store))
        store.drop()
    assert all(dumps[0][table] for table in ("checkpoints", "events", "runs", "claims"))
    assert dumps[0] == dumps[1]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_values_and_refusals_are_psycopgs(
    make_pg_store: MakeStore, anyio_backend: str
) -> None:
    sql = "SELECT %s::text, %s::bigint, %s::boolean, %s::text"
    values = ["héllo ✓ 😀 \"'\\", 2**40, True, None]
    store = make_pg_store()
    on_pool = make_pg_store()
    await on_pool.aopen()
    try:
        for pg in (store._pg, on_pool._pg):  # the sync connection, then the pool's
            assert await pg.fetch_one(sql, values) == tuple(values)
            assert await pg.fetch_one(sql, ["", -1, False, "x"]) == ("", -1, False, "x")
            with pytest.raises(psycopg.DataError, match="NUL"):
                await pg.fetch_one(sql, ["a\x00b", 1, True, None])
            # Another type where an int was: through psycopg's cursor, as it was.
            assert await pg.fetch_one(sql, ["a", "7", True, None]) == ("a", 7, True, None)
            assert await pg.fetch_one("SELECT 1 WHERE false", []) is None
    finally:
        await on_pool.aclose()


def test_a_statement_is_typed_by_its_first_call() -> None:
    statements = Statements()
    first = statements.statement("SELECT %s, %s, %s, %s", [1, "a", None, True])
    assert first is not None
    assert first.text == b"SELECT $1, $2, $3, $4"
    assert first.types == [20, 0, 0, 16]
    assert statements.statement("SELECT %s, %s, %s, %s", [2, None, "b", False]) is first
    assert statements.statement("SELECT %s, %s, %s, %s", [True, "a", None, True]) is None
    assert statements.statement("SELECT %s, %s, %s, %s", [1, 2, None, True]) is None
    assert statements.statement("SELECT %s, %s, %s, %s", [1, "a", None]) is None
    assert statements.statement("SELECT 5 %% 2, %s", [1]) is None  # a % not a placeholder


def test_each_connection_keeps_its_own_names_and_transformer(
    make_pg_store: MakeStore,
) -> None:
    """The last connection's entry is kept at hand (pg9: no weak dictionary look-up a
    step): asked in turns, each connection gets its own names and ``Transformer``, and a
    connection forgotten (the server dropped its statements) starts afresh."""
    store = make_pg_store()
    one = store._pg.sync_connection()
    with psycopg.connect(store._pg.dsn, autocommit=True) as two:
        statements = Statements()
        first = statements.on(one)
        assert statements.on(one) is first
        second = statements.on(two)
        assert second is not first
        assert second[1] is not first[1]
        assert statements.on(one) is first
        assert statements.on(two) is second
        first[0].add(b"graphflow_x")
        statements.forget(one)
        again = statements.on(one)
        assert again is not first
        assert not again[0]
        assert statements.on(two) is second


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_statement_the_server_dropped_is_prepared_again(
    make_pg_store: MakeStore, anyio_backend: str
) -> None:
    store = make_pg_store()
    on_pool = make_pg_store()
    await on_pool.aopen()
    try:
        assert await store._pg.fetch_one("SELECT %s::int + 1", [1]) == (2,)
        store._pg.sync_connection().execute("DEALLOCATE ALL")
        assert await store._pg.fetch_one("SELECT %s::int + 1", [2]) == (3,)
        assert await on_pool._pg.fetch_one("SELECT %s::int + 1", [1]) == (2,)
        hot = on_pool._pg._hot
        assert hot is not None
        await hot[0].execute("DEALLOCATE ALL")
        assert await on_pool._pg.fetch_one("SELECT %s::int + 1", [2]) == (3,)
    finally:
        await on_pool.aclose()


def _calls(fn: Callable[[], Any]) -> int:
    profile = cProfile.Profile()
    profile.enable()
    fn()
    profile.disable()
    return int(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]


def test_calls_a_step_on_the_sync_connection(make_pg_store: MakeStore) -> None:
    store = make_pg_store()
    runtime = GraphRuntime(store, clock=VirtualClock())
    short, long = _graph(5, "short"), _graph(25, "long")
    runtime.invoke(short)
    runtime.invoke(long)
    per_step = (_calls(lambda: runtime.invoke(long)) - _calls(lambda: runtime.invoke(short))) / 20
    # 190 through psycopg's cursor, 149 at e2012b7, 122 at 5c2255f, 70 with the plain step,
    # 74 with path blocks (pg8: placing the path, 2 a step, a tail's JSON past step 16; a
    # row's bytes flat as the run grows), 59.5 with fetch_one's sync connection, the
    # prepared statement's look-ups and the tail's JSON inline (pg9); 76.5 with the step's
    # commit sent while the next step runs (s42: made ready, sent, settled, the run's
    # position marked: ~14 calls a step for ~50 us of the wait hidden); 74.5 with the
    # events handed over as text (s42); 81.75 with the step's statement made ahead, while
    # the commit before it is on the wire (s44: its path placed, its parameters dumped; ~6
    # calls a step more, ~5 us less of what the server waits for); 90.35 with two commits
    # on the wire, the next sent behind the last in libpq's pipeline mode (s44: a sync point
    # sent and read a statement, the pipeline entered and left; the server never waits for
    # the client between two pure steps: ~185 -> ~80 us a step)
    assert per_step <= 92, per_step


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_calls_a_step_on_the_async_pool(
    make_pg_store: MakeStore, monkeypatch: pytest.MonkeyPatch, anyio_backend: str
) -> None:
    monkeypatch.setattr(_conn, "_QUICK_WAIT", 30.0)  # however slow the host
    monkeypatch.setattr(_conn, "_MAX_BUSY", 3600.0)
    async with make_pg_store() as store:
        runtime = GraphRuntime(store)
        short, long = _graph(5, "short"), _graph(25, "long")
        await runtime.ainvoke(short, {})
        await runtime.ainvoke(long, {})
        counts = []
        for graph in (long, short):
            profile = cProfile.Profile()
            profile.enable()
            await runtime.ainvoke(graph, {})
            profile.disable()
            counts.append(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]
    per_step = (counts[0] - counts[1]) / 20
    # 336 through psycopg's cursor and the loop, 175 at e2012b7, 137 at 5c2255f, 85 with
    # the plain step (``_stores/postgres/_plain.py``), 90 with path blocks (pg8), 73.5 with
    # the pool's hot connection taken and kept inline (pg9: no _take/_give_back/_run_async
    # frames a step); 89.5 with the step's commit sent while the next step runs (s42),
    # 87.5 with the events handed over as text (s42), 94.75 with the step's statement made
    # ahead (s44), 102.4 with two commits on the wire in pipeline mode (s44)
    assert per_step <= 104, per_step
