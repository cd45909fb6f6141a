"""Issue 24 — LangGraph's ``AsyncPostgresSaver`` under the harness, on a real server.

The server is the tests' own (``postgres_dsn``: ``GRAPHFLOW_POSTGRES_DSN``, or a throwaway
cluster; skipped without one, failed under CI). Each test gets schemas of its own. The saver
is opened in the test's loop and the harness is awaited there (``atrace``/``aresume``), as
for ``AsyncSqliteSaver``: same seed, same events and the same stored rows; faults; a crash at
every saver operation, then a fresh harness resumes; and a restart between the interrupt
and the resume (a fresh interpreter) stores the rows an uninterrupted run stores.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from lg_postgres_app import build

from pytest_graphflow import StoreFault
from pytest_graphflow.langgraph import FaultySaver, LangGraphHarness, check_crash_recovery

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent

_TABLES = {
    "checkpoints": "thread_id, checkpoint_ns, checkpoint_id",
    "checkpoint_blobs": "thread_id, checkpoint_ns, channel, version",
    "checkpoint_writes": "thread_id, checkpoint_ns, checkpoint_id, task_id, idx",
}


@pytest.fixture
def schemas(postgres_dsn: str) -> Iterator[Callable[[], str]]:
    """Make empty schemas for this test (dropped when it ends); returns each one's DSN."""
    import psycopg

    made: list[str] = []

    def make() -> str:
        name = f"lg{os.getpid()}_{len(made)}"
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
            conn.execute(f"CREATE SCHEMA {name}")
        made.append(name)
        return f"{postgres_dsn} options='-c search_path={name}'"

    yield make
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        for name in made:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@asynccontextmanager
async def _saver(dsn: str) -> AsyncIterator[Any]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
        await saver.setup()
        yield saver


def _rows(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return {table: conn.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
                for table, order in _TABLES.items()}


async def _run(dsn: str, seed: int) -> tuple[str, dict[str, Any]]:
    async with _saver(dsn) as saver:
        h = LangGraphHarness(build(), seed=seed, saver=saver)
        paused = await h.atrace({"hits": []})
        assert paused.result.status == "interrupted"
        assert h.clock.elapsed == 3 + 2 * 3600  # the searches overlap
        done = await h.aresume("approved")
        assert done.result.status == "completed"
        assert done.result.data["hits"] == ["docs", "tickets"]
        assert await h.astate() == done.result.data
    return "\n".join(e.model_dump_json() for e in h.events), _rows(dsn)


async def test_same_seed_gives_the_same_events_and_stored_rows(
        schemas: Callable[[], str]) -> None:
    first, again, other = schemas(), schemas(), schemas()
    events, rows = await _run(first, seed=5)

    assert len(rows["checkpoints"]) >= 5
    assert rows["checkpoint_writes"]
    assert (events, rows) == await _run(again, seed=5)
    assert (await _run(other, seed=6))[0] != events


async def test_a_rejected_save_raises_what_langgraph_raises_and_resume_continues(
        schemas: Callable[[], str]) -> None:
    async with _saver(schemas()) as inner:
        saver = FaultySaver(inner)
        saver.reject_save(when=lambda cp: cp.step == 2, times=1)  # after the searches
        h = LangGraphHarness(build(), seed=1, saver=saver, durability="sync")
        with pytest.raises(StoreFault):
            await h.atrace({"hits": []})
        assert (await h.aresume()).result.status == "interrupted"
        done = await h.aresume("approved")
        assert done.result.data["verdict"] == "approved"
        assert [(c.op, c.outcome) for c in saver.calls if c.outcome != "ok"] == [
            ("put", "rejected")]


async def test_a_crash_at_every_saver_operation_then_a_fresh_harness_resumes(
        schemas: Callable[[], str]) -> None:
    import psycopg

    dsn = schemas()
    async with _saver(dsn) as inner:
        async def empty() -> None:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                for table in _TABLES:
                    await conn.execute(f"DELETE FROM {table}")

        def fresh_saver() -> Any:
            # every crash point starts from an empty database (one at a time)
            anyio.from_thread.run(empty)
            return inner

        # The check drives sync legs: on a worker thread, while this loop answers the saver.
        # A crash before the ticket's write was saved re-runs `open` later, which draws a
        # new id (in production too, as InMemorySaver shows): `ticket` is left out, as
        # `closed_at` is (a recovered run closes later).
        seen: list[Any] = []
        found = await anyio.to_thread.run_sync(lambda: check_crash_recovery(
            build(), {"hits": []}, answers={"approve": "approved"}, seed=2,
            saver_factory=fresh_saver, ignore=["closed_at", "ticket"], progress=seen.append))
    assert found == []
    assert len(seen) >= 2 * 10  # both phases of every call of the clean run's ~13


RESTART = '''
import asyncio, sys
from datetime import timedelta
sys.path.insert(0, {here!r})
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from pytest_graphflow import DEFAULT_START, VirtualClock
from pytest_graphflow.langgraph import LangGraphHarness
from lg_postgres_app import build

async def main(dsn, part):
    async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
        await saver.setup()
        if part in ("interrupt", "both"):
            h = LangGraphHarness(build(), seed=3, saver=saver)
            print((await h.atrace({{"hits": []}})).result.status, h.clock.elapsed)
        if part == "resume":  # a new process: a fresh harness, its clock where it was
            at = DEFAULT_START + timedelta(seconds=3 + 2 * 3600)
            h = LangGraphHarness(build(), seed=3, saver=saver, clock=VirtualClock(start=at))
        if part in ("resume", "both"):
            print((await h.aresume("approved")).result.status)

asyncio.run(main(sys.argv[1], sys.argv[2]))
'''


def test_a_restart_between_interrupt_and_resume_stores_the_rows_of_an_uninterrupted_run(
        schemas: Callable[[], str], tmp_path: Any) -> None:
    script = tmp_path / "restart.py"
    script.write_text(RESTART.format(here=str(HERE)))
    restarted, straight = schemas(), schemas()

    def run(dsn: str, part: str, hash_seed: str) -> str:
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        return subprocess.run([sys.executable, str(script), dsn, part], check=True,
                              capture_output=True, text=True, env=env, timeout=300).stdout

    assert run(restarted, "interrupt", "1").split() == ["interrupted", "7203.0"]
    assert run(restarted, "resume", "2").split() == ["completed"]
    assert run(straight, "both", "3").split() == ["interrupted", "7203.0", "completed"]
    rows = _rows(restarted)
    assert len(rows["checkpoints"]) >= 5
    assert rows == _rows(straight)
