"""A step's statement on the async pool waits for its answer without a turn of the loop when
it is the store's only operation in flight (issue 29): two turns of the loop a step (a reader,
a future, a timer each) become none. Counted, not timed: turns of the loop (its selector's
``select`` calls) over a run of 25 steps minus a run of 5. A statement answered late (a lock
wait) is still waited for on the loop, which runs its other tasks meanwhile; what is written
is the same either way."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from graphflow_chains import counting_chain
from pytest_graphflow import GraphRuntime, PostgresCheckpointStore
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._stores.postgres import _conn

MakeStore = Callable[..., PostgresCheckpointStore]
MakeCheckpoint = Callable[..., Checkpoint]
T0 = datetime(2025, 1, 1, tzinfo=UTC)

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]


def _chain(steps: int) -> Any:
    return counting_chain("quick", steps)


@pytest.fixture
def always_quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every statement waits quickly, however slow the host (the counts do not depend on it)."""
    monkeypatch.setattr(_conn, "_QUICK_WAIT", 30.0)
    monkeypatch.setattr(_conn, "_MAX_BUSY", 3600.0)


async def _turns(runtime: GraphRuntime, graph: Any) -> int:
    """Turns of the running loop (its selector's ``select`` calls) during one run."""
    loop = asyncio.get_running_loop()
    selector = loop._selector  # type: ignore[attr-defined]
    real = selector.select
    count = [0]

    def counted(timeout: float | None = None) -> Any:
        count[0] += 1
        return real(timeout)

    selector.select = counted
    try:
        await runtime.ainvoke(graph, {})
    finally:
        selector.select = real
    return count[0]


async def _turns_a_step(runtime: GraphRuntime) -> float:
    """Turns of the loop a step: a run of 25 steps minus a run of 5, over 20 (what a run
    pays once, its claim, first read and release, cancels out)."""
    short, long = _chain(5), _chain(25)
    await runtime.ainvoke(short, {})  # warm: connections, prepared statements
    await runtime.ainvoke(long, {})
    return (await _turns(runtime, long) - await _turns(runtime, short)) / 20


async def test_a_step_takes_no_turn_of_the_loop(make_pg_store: MakeStore, always_quick: None,
                                                monkeypatch: pytest.MonkeyPatch,
                                                anyio_backend: str) -> None:
    async with make_pg_store() as store:
        runtime = GraphRuntime(store)
        answered = store._pg.quick_answers
        quick = await _turns_a_step(runtime)
        assert store._pg.quick_answers - answered >= 2 * (5 + 25)  # every step of the runs
        monkeypatch.setattr(_conn, "_MAX_BUSY", 0.0)  # every statement waits on the loop
        on_loop = await _turns_a_step(runtime)
    # psycopg's wait: a reader and a timer, about two turns a statement waited for; with a
    # step's statement sent behind the last one's (pipeline mode) an answer may be read with
    # the one before it (two on the wire at most): at least a turn for every two steps
    # (about one a step on a quiet host)
    assert on_loop >= 0.4
    assert quick <= 0.1  # none a step (a run now and then takes one more turn)


def _stored(found: list[Any]) -> str:
    """What was stored, its times masked (the runs ran at different moments)."""
    text = json.dumps(found, sort_keys=True, default=str)
    return re.sub(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)?", "<time>", text)


async def _run_and_read(store: PostgresCheckpointStore) -> str:
    runtime = GraphRuntime(store, seed=7)
    result = await runtime.ainvoke(_chain(8), {})
    checkpoints = [cp.model_dump(exclude={"timestamp"}) for cp in await store.list(result.run_id)]
    return _stored([checkpoints, await store.events(result.run_id),
                    await store.run(result.run_id)])


async def test_quick_and_loop_waits_store_the_same(
    make_pg_store: MakeStore, pg_schema: str, monkeypatch: pytest.MonkeyPatch,
    anyio_backend: str,
) -> None:
    monkeypatch.setattr(_conn, "_QUICK_WAIT", 30.0)
    monkeypatch.setattr(_conn, "_MAX_BUSY", 3600.0)
    async with make_pg_store(schema=f"{pg_schema}_q") as store:
        quick = await _run_and_read(store)
        assert store._pg.quick_answers >= 8
        store.drop()
    monkeypatch.setattr(_conn, "_MAX_BUSY", 0.0)  # every statement waits on the loop
    async with make_pg_store(schema=f"{pg_schema}_l") as store:
        on_loop = await _run_and_read(store)
        assert store._pg.quick_answers == 0
        store.drop()
    assert quick == on_loop


async def test_a_statement_answered_late_lets_the_loop_run(
    make_pg_store: MakeStore, make_cp: MakeCheckpoint, monkeypatch: pytest.MonkeyPatch,
    anyio_backend: str,
) -> None:
    monkeypatch.setattr(_conn, "_MAX_BUSY", 3600.0)  # the quick wait is tried every time
    async with make_pg_store() as store:
        token = await store.claim("thread-a", "run-a", now=T0, ttl=600)
        await store.commit("thread-a", token, run_id="run-a",
                           checkpoints=[make_cp("cp-0")])
        answered = store._pg.quick_answers
        with psycopg.connect(store.dsn, autocommit=True) as holder:
            with holder.transaction():  # the claim row locked: the commit waits for it
                holder.execute(f"SELECT 1 FROM {store.schema}.claims WHERE thread_id = "
                               "'thread-a' FOR UPDATE")
                commit = asyncio.ensure_future(store.commit(
                    "thread-a", token, run_id="run-a",
                    checkpoints=[make_cp("cp-1", at=1, parent_id="cp-0")]))
                ticks = 0
                for _ in range(20):
                    await asyncio.sleep(0.005)
                    ticks += 1
                assert not commit.done()  # still waiting for the lock, the loop ran
            await commit  # the lock released: answered on the loop
        assert store._pg.quick_answers == answered  # answered late, not quickly
        assert ticks == 20
        assert [c.id for c in await store.list("run-a")] == ["cp-0", "cp-1"]
        assert store._pg._out == 0


async def test_a_distant_server_holds_the_loop_once_not_every_step(
    make_pg_store: MakeStore, monkeypatch: pytest.MonkeyPatch, anyio_backend: str,
) -> None:
    """A server that never answers within the quick wait (as one across a network would not)
    costs one quick wait, then every statement waits on the loop: the loop is not held for the
    quick wait at every step. An answer within the quick wait again lets the next wait
    quickly."""
    monkeypatch.setattr(_conn, "_MAX_BUSY", 3600.0)
    distant = [False]
    waits_for_answer = [0]
    real = _conn.select.select

    def select(r: Any, w: Any, x: Any, timeout: float | None = None) -> Any:
        if r:
            waits_for_answer[0] += 1
            if distant[0]:  # the answer is not there within the quick wait
                return [], [], []
        return real(r, w, x, timeout)

    monkeypatch.setattr(_conn.select, "select", select)
    async with make_pg_store() as store:
        runtime = GraphRuntime(store)
        # Warm: connections, prepared statements (each prepared on its first use, a round
        # trip more: answered quickly here whatever the host's load, so the run starts fast).
        monkeypatch.setattr(_conn, "_QUICK_WAIT", 30.0)
        await runtime.ainvoke(_chain(3), {})
        assert not store._pg._slow
        distant[0] = True
        monkeypatch.setattr(_conn, "_QUICK_WAIT", 1e-9)  # no answer on the loop is as quick
        waits_for_answer[0] = 0
        answered = store._pg.quick_answers
        await runtime.ainvoke(_chain(12), {})
        assert store._pg.quick_answers == answered
        assert waits_for_answer[0] == 1  # the first statement's quick wait, then the loop's
        assert store._pg._slow
        distant[0] = False
        monkeypatch.setattr(_conn, "_QUICK_WAIT", 30.0)  # answers are quick again
        await runtime.ainvoke(_chain(12), {})
        assert not store._pg._slow
        assert store._pg.quick_answers - answered >= 10  # the waits after the first quick again
