"""A SQLite commit reuses what its connection's previous commit read and wrote (issue 29:
the claim's token, the thread's latest checkpoint, the log's next slot, the run's path
segment) while nothing else wrote the file. What a user relies on: another store (another
connection, as another process would be) writing the same file in between is always seen,
so fencing, the commit checks, the log's slots and the stored paths stay right; and a step
of a plain chain runs four SQLite statements, was seven and a path check (counted, not
timed)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pytest_graphflow import SQLiteCheckpointStore
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._stores.sqlite._rows import TAIL
from pytest_graphflow._stores.sqlite._tail import FOLD_AT
from pytest_graphflow.errors import ParentNotLatest, StaleClaim

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _cp(n: int, *, run: str = "run-a", thread: str = "thread-a", at: float | None = None,
        parent: str | None = None, path: int = 0) -> Checkpoint:
    return Checkpoint(
        id=f"{run}-cp-{n}", run_id=run, thread_id=thread, graph_id="g", revision="rev-x",
        step=n, timestamp=T0 + timedelta(seconds=n if at is None else at), state={"n": n},
        parent_id=parent if parent is not None else f"{run}-cp-{n - 1}" if n else None,
        visited=tuple(f"node{i}" for i in range(path or n)))


def _ev(run: str, seq: int) -> dict[str, Any]:
    return {"seq": seq, "type": "node_end", "run_id": run, "node": f"n{seq}"}


async def _steps(store: SQLiteCheckpointStore, token: int, first: int, last: int, *,
                 run: str = "run-a", thread: str = "thread-a") -> None:
    for n in range(first, last):
        await store.commit(thread, token, run_id=run, checkpoints=[_cp(n, run=run,
                           thread=thread)], events=[_ev(run, n)])


async def test_a_warm_commit_is_refused_once_another_connection_took_the_thread(
        tmp_path: Path) -> None:
    a = SQLiteCheckpointStore(tmp_path / "s.db", claim_ttl=10)
    b = SQLiteCheckpointStore(tmp_path / "s.db")
    old = await a.claim("thread-a", "run-a", now=T0)
    await _steps(a, old, 0, 3)  # a's connection now knows its claim holds
    new = await b.claim("thread-a", "run-a", now=T0 + timedelta(seconds=11))  # expired: taken
    with pytest.raises(StaleClaim) as stale:
        await _steps(a, old, 3, 4)
    assert (stale.value.token, stale.value.current) == (old, new)
    assert [c.id for c in await b.list("run-a")] == [f"run-a-cp-{n}" for n in range(3)]
    a.close()
    b.close()


async def test_a_checkpoint_another_connection_saved_is_the_latest_a_commit_checks(
        tmp_path: Path) -> None:
    a = SQLiteCheckpointStore(tmp_path / "s.db")
    b = SQLiteCheckpointStore(tmp_path / "s.db")
    token = await a.claim("thread-a", "run-a", now=T0)
    await _steps(a, token, 0, 3)
    theirs = _cp(3, at=100).model_copy(update={"id": "theirs"})
    await b.save(theirs)  # the thread's latest now
    with pytest.raises(ParentNotLatest):
        await _steps(a, token, 3, 4)  # its parent, cp-2, is not the latest any more
    await a.commit("thread-a", token, run_id="run-a",
                   checkpoints=[_cp(3, at=101, parent="theirs")])
    assert [c.id for c in await a.list("run-a")][-2:] == ["theirs", "run-a-cp-3"]
    a.close()
    b.close()


async def test_commits_of_two_connections_in_turn_keep_every_piece(tmp_path: Path) -> None:
    a = SQLiteCheckpointStore(tmp_path / "s.db")
    b = SQLiteCheckpointStore(tmp_path / "s.db")
    ta = await a.claim("thread-a", "run-a", now=T0)
    tb = await b.claim("thread-b", "run-b", now=T0)
    for turn in range(3):  # more pieces than the log's slots: folds by either connection
        await _steps(a, ta, turn * FOLD_AT, turn * FOLD_AT + FOLD_AT // 2 + 3)
        await _steps(b, tb, turn * FOLD_AT, turn * FOLD_AT + FOLD_AT // 2 + 3,
                     run="run-b", thread="thread-b")
        await _steps(a, ta, turn * FOLD_AT + FOLD_AT // 2 + 3, (turn + 1) * FOLD_AT)
        await _steps(b, tb, turn * FOLD_AT + FOLD_AT // 2 + 3, (turn + 1) * FOLD_AT,
                     run="run-b", thread="thread-b")
    for store in (a, b, SQLiteCheckpointStore(tmp_path / "s.db", readonly=True)):
        for run in ("run-a", "run-b"):
            listed = await store.list(run)
            assert [c.step for c in listed] == list(range(3 * FOLD_AT))
            assert [c.visited for c in listed] == [_cp(n).visited for n in range(3 * FOLD_AT)]
            assert [e["seq"] for e in await store.events(run)] == list(range(3 * FOLD_AT))
    a.close()
    b.close()


async def test_a_path_another_connection_pruned_is_written_again(tmp_path: Path) -> None:
    a = SQLiteCheckpointStore(tmp_path / "s.db")
    b = SQLiteCheckpointStore(tmp_path / "s.db")
    token = await a.claim("thread-a", "run-a", now=T0)
    for n in range(20):  # paths of 17+ nodes hang from a stored segment
        await a.commit("thread-a", token, run_id="run-a", checkpoints=[_cp(n, path=17)])
    assert await b.prune("run-a", 0) == 20  # the segment is gone with the checkpoints
    await a.commit("thread-a", token, run_id="run-a", checkpoints=[_cp(20, path=17)])
    found = await b.get("run-a-cp-20")
    assert found is not None
    assert found.visited == _cp(0, path=17).visited
    a.close()
    b.close()


@pytest.mark.parametrize("folded", [False, True], ids=["in-the-log", "folded"])
async def test_a_warm_commit_rewriting_its_latest_keeps_one_row(tmp_path: Path,
                                                                 folded: bool) -> None:
    store = SQLiteCheckpointStore(tmp_path / "s.db")
    token = await store.claim("thread-a", "run-a", now=T0)
    steps = FOLD_AT if folded else 3
    await _steps(store, token, 0, steps)
    if folded:  # a piece of events alone folds the log: the latest is in the indexed table
        await store.commit("thread-a", token, run_id="run-a", events=[_ev("run-a", 100)])
        assert store._conn.execute("SELECT 1 FROM checkpoints WHERE id = ?",
                                   (f"run-a-cp-{steps - 1}",)).fetchone() is not None
    latest = _cp(steps - 1).model_copy(update={"state": {"n": -1}})
    await store.commit("thread-a", token, run_id="run-a", checkpoints=[latest])
    await _steps(store, token, steps, steps + 2)  # goes on from the rewritten one
    listed = await store.list("run-a")
    assert [c.step for c in listed] == list(range(steps + 2))
    assert listed[steps - 1].state == {"n": -1}
    store.close()


async def test_a_chain_step_runs_four_sqlite_statements(tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "s.db")
    token = await store.claim("thread-a", "run-a", now=T0)
    seen: list[str] = []
    db: sqlite3.Connection = store._conn
    db.set_trace_callback(seen.append)
    await _steps(store, token, 0, 2)  # the first commit reads what its connection knows
    seen.clear()
    steps = 4 * FOLD_AT
    await _steps(store, token, 2, 2 + steps)
    db.set_trace_callback(None)
    # BEGIN IMMEDIATE, PRAGMA data_version, the log row (unless its id is stored), COMMIT
    for start in ("BEGIN IMMEDIATE", "PRAGMA data_version", "INSERT OR REPLACE INTO log",
                  "COMMIT"):
        assert sum(s.startswith(start) for s in seen) == steps, start
    # and every FOLD_AT steps a fold (three statements and the events, each traced once),
    # every TAIL steps a segment of the run's path.
    assert sum(s.startswith("INSERT INTO checkpoints") for s in seen) == steps // FOLD_AT
    assert sum(s.startswith("INSERT INTO paths") for s in seen) <= steps // TAIL + 1
    assert len(seen) - 4 * steps <= steps // FOLD_AT * (3 + FOLD_AT) + steps // TAIL + 1, \
        seen[:12]
    store.close()
