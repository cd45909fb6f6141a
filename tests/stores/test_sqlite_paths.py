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

from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    Resume,
    SQLiteCheckpointStore,
    VirtualClock,
    interrupt,
)
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._stores.sqlite import _rows as _sqlite_rows
from pytest_graphflow._stores.sqlite._rows import SPAN


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


def test_a_run_resumed_through_another_store_object_reads_the_same_as_in_memory(
        tmp_path: Path) -> None:
    # Issue 29: the runtime hands the store its run's log, not a tuple of every node so far;
    # a resume in another process starts from the checkpoint's path, in a log of its own.
    g = Graph("paused", S)
    g.node("a", lambda s: {"n": s.n + 1}).node("b", lambda s: {"pad": "y"})
    g.node("ask", lambda s: {"pad": interrupt("go on?", id="ask")})
    g.edge(START, "a").edge("a", "b")
    g.branch("b", lambda s: "ask" if s.n == s.limit else "again" if s.n < 2 * s.limit
             else "done", {"ask": "ask", "again": "a", "done": END})
    g.edge("ask", "a")
    graph = g.compile()
    steps = SPAN + 7
    memory = GraphRuntime(InMemoryCheckpointStore(), clock=VirtualClock(), seed=2,
                          max_supersteps=10_000)
    paused = memory.invoke(graph, {"limit": steps})
    memory.resume(paused.run_id, Resume("yes"))
    with SQLiteCheckpointStore(tmp_path / "s.db") as first:
        rt = GraphRuntime(first, clock=VirtualClock(), seed=2, max_supersteps=10_000)
        assert rt.invoke(graph, {"limit": steps}).status == "interrupted"
    with SQLiteCheckpointStore(tmp_path / "s.db") as second:
        rt = GraphRuntime(second, clock=VirtualClock(), seed=2, max_supersteps=10_000)
        assert rt.resume(paused.run_id, Resume("yes"), graph=graph).status == "completed"
        got = _views(anyio.run(rt.history, paused.run_id))
    expected = _views(anyio.run(memory.history, paused.run_id))
    assert got == expected
    assert len(got[-1][1]) == 2 * (2 * steps) + 1


def test_a_subclass_of_the_store_gets_every_path_as_a_tuple(tmp_path: Path) -> None:
    seen: list[type] = []

    class Watching(SQLiteCheckpointStore):
        async def commit(self, thread_id: str, token: int, **parts: Any) -> None:
            seen.extend(type(cp.visited) for cp in parts.get("checkpoints", ()))
            await super().commit(thread_id, token, **parts)

    with Watching(tmp_path / "s.db") as store:
        rt = GraphRuntime(store, clock=VirtualClock(), seed=1, max_supersteps=10_000)
        result = rt.invoke(_loop(), {"limit": 20})
        assert result.status == "completed"
        latest = anyio.run(store.latest, result.run_id)
    assert len(seen) > 20
    assert set(seen) == {tuple}
    assert latest is not None
    assert len(latest.visited) == 40


class M(BaseModel):
    n: int = 0
    limit: int = 0
    mode: str = "x"


def test_a_later_leg_on_another_path_than_the_last_one_written_keeps_its_own(
        tmp_path: Path) -> None:
    # The store remembers the last path it wrote per run and extends it. A leg resumed
    # from a checkpoint further along than that path, on another branch, is no extension.
    g = Graph("modes", M)
    g.node("a", lambda s: {"n": s.n + 1}).node("x", lambda s: None).node("y", lambda s: None)
    g.edge(START, "a").edge("x", "a").edge("y", "a")
    g.branch("a", lambda s: "done" if s.n >= s.limit else s.mode,
             {"x": "x", "y": "y", "done": END})
    graph = g.compile()
    runtimes = [GraphRuntime(store, clock=VirtualClock(), seed=4, max_supersteps=10_000)
                for store in (InMemoryCheckpointStore(), SQLiteCheckpointStore(tmp_path / "m.db"))]
    views = []
    for rt in runtimes:
        run_id = rt.invoke(graph, {"limit": SPAN}).run_id
        history = anyio.run(rt.history, run_id)
        early, late = history[4], history[SPAN]
        # a short leg on the y branch: the last path written is now a short one with a "y"
        assert rt.resume(early.id, Resume(update={"mode": "y", "limit": 4}),
                         graph=graph).status == "completed"
        # then a leg from far along the x path
        assert rt.resume(late.id, graph=graph).status == "completed"
        views.append(_views(anyio.run(rt.history, run_id)))
    runtimes[1].store.close()  # type: ignore[attr-defined]
    assert views[1] == views[0]
    assert any("y" in path for _, path, _ in views[0])
