"""``fork(..., thread_id=)``: a fork names its new thread, and never reuses one (seed 004)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_graphflow import (
    Checkpoint,
    FaultyStore,
    ForkTargetExists,
    InMemoryCheckpointStore,
    SQLiteCheckpointStore,
)

MakeCheckpoint = Callable[..., Checkpoint]
Store = InMemoryCheckpointStore | SQLiteCheckpointStore

pytestmark = pytest.mark.anyio


async def test_fork_into_a_named_thread(any_store: Store, make_cp: MakeCheckpoint) -> None:
    await any_store.save(make_cp("cp-src", thread="thread-a"))
    run_id = await any_store.fork("cp-src", {"n": 3}, thread_id="thread-b")
    forked = await any_store.latest(run_id)
    assert forked is not None
    assert (forked.thread_id, forked.state, forked.parent_id) == ("thread-b", {"n": 3}, "cp-src")
    assert [c.id for c in await any_store.list(thread_id="thread-b")] == [forked.id]


@pytest.mark.parametrize("target", ["thread-a", "thread-b"], ids=["source-thread", "other"])
async def test_fork_into_an_existing_thread_raises_fork_target_exists_and_changes_nothing(
    any_store: Store, make_cp: MakeCheckpoint, target: str
) -> None:
    """Seed 004: "A fork's target thread already exists; a fork only ever creates a new
    thread. Nothing was changed." (``fork`` took no target, so this could never fire)."""
    await any_store.save(make_cp("cp-src", thread="thread-a"))
    await any_store.save(make_cp("cp-b", run="run-b", thread="thread-b", at=1))
    before = await any_store.list()
    with pytest.raises(ForkTargetExists, match=f"into thread '{target}'") as info:
        await any_store.fork("cp-src", thread_id=target)
    assert info.value.thread_id == target  # type: ignore[attr-defined]
    assert await any_store.list() == before


async def test_faulty_store_passes_the_target_thread_on(make_cp: MakeCheckpoint) -> None:
    store = FaultyStore(InMemoryCheckpointStore())
    await store.save(make_cp("cp-src"))
    run_id = await store.fork("cp-src", thread_id="thread-new")
    forked = await store.latest(run_id)
    assert forked is not None
    assert forked.thread_id == "thread-new"
    with pytest.raises(ForkTargetExists):
        await store.fork("cp-src", thread_id="thread-new")
    assert [c.op for c in store.calls if c.op == "fork"] == ["fork", "fork"]
