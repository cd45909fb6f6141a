"""Fixtures shared by the store tests: every store backend, both anyio backends."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pytest_graphflow import InMemoryCheckpointStore, SQLiteCheckpointStore
from pytest_graphflow._records._checkpoint import Checkpoint

T0 = datetime(2025, 1, 1, tzinfo=UTC)

MakeCheckpoint = Callable[..., Checkpoint]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run every ``@pytest.mark.anyio`` store test on asyncio and on trio."""
    return str(request.param)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def make_any_store(
    request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str
) -> AsyncIterator[Callable[..., Any]]:
    """Each store backend in turn, as a factory taking the store's keyword arguments
    (``make_any_store(claim_ttl=1.0)``); every store it made is closed when the test ends.

    The PostgreSQL store (on a fresh schema of the session's server) talks through psycopg's
    async pool on asyncio and through its sync connection on trio: both paths are tested.
    """
    opened: list[Any] = []

    def make(**kwargs: Any) -> Any:
        if request.param == "memory":
            store: Any = InMemoryCheckpointStore(**kwargs)
        elif request.param == "postgres":
            store = request.getfixturevalue("make_pg_store")(**kwargs)
        else:
            name = f"store-{len(opened)}.db" if opened else "store.db"
            store = SQLiteCheckpointStore(tmp_path / name, **kwargs)
        opened.append(store)
        return store

    yield make
    for store in opened:
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()
        else:
            store.close()


@pytest.fixture
async def any_store(make_any_store: Callable[..., Any]) -> Any:
    """Each store backend in turn; all must give the same answers."""
    return make_any_store()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A fresh SQLite store file path."""
    return tmp_path / "graphflow.db"


@pytest.fixture
def make_cp() -> MakeCheckpoint:
    """Build a checkpoint: ``make_cp("cp-1", run="run-a", at=3, state={...})``.

    ``at`` is seconds after 2025-01-01T00:00Z (``timestamp=`` sets it directly).
    """

    def build(
        cid: str,
        *,
        run: str = "run-a",
        thread: str = "thread-a",
        at: float = 0,
        timestamp: datetime | None = None,
        state: dict[str, Any] | None = None,
        node: str | None = None,
        nodes: list[str] | None = None,
        **extra: Any,
    ) -> Checkpoint:
        when = T0 + timedelta(seconds=at) if timestamp is None else timestamp
        return Checkpoint(
            id=cid, run_id=run, thread_id=thread, graph_id="g", revision="rev-x", step=0,
            timestamp=when, state={"n": 0} if state is None else state,
            node_id=node, node_ids=nodes or [], **extra,
        )

    return build
