"""The SQLite store keeps each checkpoint's visited path incrementally (issue 12): what users
read is exactly what the in-memory store gives, for long runs (past the 64-step anchors),
time travel and forks; ``history`` pages; pruning gives the space back.

Every test runs with the store's segment sizes and with tiny ones (a segment every 3 nodes,
an anchor every 4 segments), so short runs cross many segment and anchor boundaries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, VirtualClock
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._stores import _sqlite_rows
from pytest_graphflow._stores._memory import InMemoryCheckpointStore
from pytest_graphflow._stores._sqlite import SQLiteCheckpointStore
from pytest_graphflow._stores._sqlite_rows import SPAN


@pytest.fixture(autouse=True, params=["store sizes", "tiny segments"])
def _segments(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.param == "tiny segments":
        monkeypatch.setattr(_sqlite_rows, "TAIL", 3)
        monkeypatch.setattr(_sqlite_rows, "SPAN", 4)


class S(BaseModel):
    n: int = 0
    limit: int = 0
    pad: str = ""


def _loop() -> Any:
    g = Graph("loop", S)
    g.node("a", lambda s: {"n": s.n + 1}).node("b", lambda s: {"pad": "x" * 2000})
    g.edge(START, "a").edge("a", "b")
    g.branch("b", lambda s: "again" if s.n < s.limit else "done", {"again": "a", "done": END})
    return g.compile()


def _views(checkpoints: list[Checkpoint]) -> list[tuple[str, tuple[str, ...], int]]:
    return [(c.id, c.visited, c.state["n"]) for c in checkpoints]


def _both(tmp_path: Path, steps: int) -> tuple[GraphRuntime, GraphRuntime, str, Any]:
    graph = _loop()
    memory = GraphRuntime(InMemoryCheckpointStore(), clock=VirtualClock(), seed=5,
                          max_supersteps=10_000)
    durable = GraphRuntime(SQLiteCheckpointStore(tmp_path / "s.db"), clock=VirtualClock(),
                           seed=5, max_supersteps=10_000)
    first = memory.invoke(graph, {"limit": steps})
    second = durable.invoke(graph, {"limit": steps})
    assert first.run_id == second.run_id
    return memory, durable, first.run_id, graph


def test_a_long_run_reads_the_same_as_in_memory(tmp_path: Path) -> None:
    steps = 3 * SPAN + 5  # several anchors, and segments after the last one
    memory, durable, run_id, _ = _both(tmp_path, steps)
    expected = _views(anyio.run(memory.history, run_id))
    got = _views(anyio.run(durable.history, run_id))
    assert got == expected
    assert len(got[-1][1]) == 2 * steps
    store: Any = durable.store
    latest = anyio.run(store.latest, run_id)
    assert latest.visited == expected[-1][1]
    (segments,) = store._conn.execute("SELECT COUNT(*) FROM paths").fetchone()
    assert segments <= 2 * steps // _sqlite_rows.TAIL + 1  # one per TAIL nodes, not per step


def test_history_pages_walk_back_to_the_first_checkpoint(tmp_path: Path) -> None:
    memory, durable, run_id, _ = _both(tmp_path, 90)
    whole = _views(anyio.run(memory.history, run_id))
    async def walk(rt: GraphRuntime) -> list[list[tuple[str, tuple[str, ...], int]]]:
        pages: list[list[tuple[str, tuple[str, ...], int]]] = []
        page = await rt.history(run_id, limit=50)
        while page:
            pages.insert(0, _views(page))
            page = await rt.history(run_id, limit=50, before=page[0].id)
        return pages

    for rt in (memory, durable):
        pages = anyio.run(walk, rt)
        assert [len(p) for p in pages][1:] == [50] * (len(pages) - 1)
        assert [v for p in pages for v in p] == whole


def test_time_travel_and_forks_keep_their_own_paths(tmp_path: Path) -> None:
    memory, durable, run_id, graph = _both(tmp_path, SPAN + 10)
    for rt in (memory, durable):
        history = anyio.run(rt.history, run_id)
        back = history[SPAN // 2]
        rt.resume(back.id, graph=graph)  # a second continuation from the middle
        store: Any = rt.store
        fork = anyio.run(store.fork, history[SPAN + 3].id)
        forked = anyio.run(store.latest, fork)
        assert forked.visited == history[SPAN + 3].visited
    expected = _views(anyio.run(memory.history, run_id))
    assert _views(anyio.run(durable.history, run_id)) == expected
    # a fresh store on the file (another process) reads the same
    with SQLiteCheckpointStore(tmp_path / "s.db", readonly=True) as reader:
        assert _views(anyio.run(reader.list, run_id)) == expected


@pytest.mark.anyio
async def test_prune_gives_the_space_back(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    graph = _loop()
    with SQLiteCheckpointStore(path) as store:
        rt = GraphRuntime(store, clock=VirtualClock(), seed=1, max_supersteps=10_000)
        result = await rt.ainvoke(graph, {"limit": 150})
        store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        grown = path.stat().st_size
        kept = await store.latest(result.run_id)
        assert await store.prune(result.run_id, 1) > 250
        store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert path.stat().st_size < grown * 0.6  # the events (not pruned) stay
        assert store._conn.execute("PRAGMA freelist_count").fetchone() == (0,)
        assert [c.id for c in await store.list(result.run_id)] == [kept.id]  # type: ignore[union-attr]
        assert (await store.latest(result.run_id)) == kept
        await store.delete(kept.id)  # type: ignore[union-attr]
        (segments,) = store._conn.execute("SELECT COUNT(*) FROM paths").fetchone()
        assert segments == 0  # no path segment outlives every checkpoint that used it
