"""Seed 003 ``InMemoryCheckpointStore``: save/get/load/latest/list/delete/fork, and the
runtime's use of it (resume by run id continues from the last checkpoint the store saved)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pytest_graphflow import (
    Checkpoint,
    CheckpointNotFound,
    CheckpointStore,
    InMemoryCheckpointStore,
    Resume,
)

from .conftest import Script, chain_graph, fan_graph, of, resume, run, runtime

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def cp(cid: str, *, run: str = "run-a", at: float = 0, node: str | None = None,
       nodes: list[str] | None = None, state: dict[str, Any] | None = None,
       thread: str = "thread-a", **extra: Any) -> Checkpoint:
    return Checkpoint(
        id=cid, run_id=run, thread_id=thread, graph_id="g", revision="rev-x", step=0,
        timestamp=T0 + timedelta(seconds=at), state={"n": 0} if state is None else state,
        node_id=node, node_ids=nodes or ([] if node is None else [node]), **extra,
    )


def test_the_in_memory_store_implements_the_protocol() -> None:
    """SPEC §5: ``CheckpointStore`` protocol, async: save, get, load, latest, list, delete,
    fork."""
    assert isinstance(InMemoryCheckpointStore(), CheckpointStore)


async def test_save_overwrites_a_checkpoint_with_the_same_id() -> None:
    """Seed 003 save: "If a checkpoint with the same id already exists it is overwritten." """
    store = InMemoryCheckpointStore()
    await store.save(cp("cp-1", state={"n": 1}))
    await store.save(cp("cp-1", state={"n": 2}))
    got = await store.get("cp-1")
    assert got is not None
    assert got.state == {"n": 2}
    assert [c.id for c in await store.list("run-a")] == ["cp-1"]


async def test_get_returns_a_copy_or_none() -> None:
    """Seed 003: "All checkpoints are stored in a Map keyed by checkpoint id." — ``get`` by id;
    SPEC §5 protocol: "mutating what get returned changes nothing in the store"."""
    store = InMemoryCheckpointStore()
    original = cp("cp-1", state={"items": [1, 2]})
    await store.save(original)
    original.state["items"].append("after save")
    got = await store.get("cp-1")
    assert got is not None
    assert got.state == {"items": [1, 2]}
    got.state["items"].append("after get")
    again = await store.get("cp-1")
    assert again is not None
    assert again.state == {"items": [1, 2]}
    assert await store.get("cp-nope") is None


async def test_load_with_a_node_id_returns_the_run_s_most_recent_checkpoint_for_that_node(
) -> None:
    """Seed 003 load: "When nodeId is supplied, returns the most recent checkpoint for that
    specific node within the run." SPEC §5: node_id is "for a superstep's checkpoint the last of
    node_ids ... load(run, node) matches either"; "Returns ... null when none exists"."""
    store = InMemoryCheckpointStore()
    await store.save(cp("cp-1", at=1, node="a"))
    await store.save(cp("cp-2", at=2, node="c", nodes=["b", "c"]))
    await store.save(cp("cp-3", at=3, node="a"))
    await store.save(cp("cp-4", at=4, node="d"))
    await store.save(cp("cp-x", run="run-b", at=9, node="a"))
    assert (await store.load("run-a", "a")).id == "cp-3"  # type: ignore[union-attr]
    assert (await store.load("run-a", "b")).id == "cp-2"  # type: ignore[union-attr]
    assert (await store.load("run-a", "c")).id == "cp-2"  # type: ignore[union-attr]
    assert await store.load("run-a", "zzz") is None
    assert await store.load("run-none", "a") is None


async def test_load_without_a_node_id_is_latest() -> None:
    """Seed 003 load: "When nodeId is omitted, returns the most recent checkpoint for the run
    regardless of node (equivalent to latest(runId))." """
    store = InMemoryCheckpointStore()
    await store.save(cp("cp-1", at=5, node="a"))
    await store.save(cp("cp-2", at=1, node="b"))
    assert (await store.load("run-a")).id == (await store.latest("run-a")).id == "cp-1"  # type: ignore[union-attr]
    assert await store.load("run-none") is None
    assert await store.latest("run-none") is None


async def test_latest_is_by_timestamp_then_by_save_order() -> None:
    """Seed 003 load: "The most recent checkpoint has the latest timestamp and, of
    checkpoints with the same timestamp, was saved last: the runtime can save several in one
    millisecond." """
    store = InMemoryCheckpointStore()
    await store.save(cp("cp-late", at=10))
    await store.save(cp("cp-early", at=1))  # saved after, but older
    assert (await store.latest("run-a")).id == "cp-late"  # type: ignore[union-attr]
    await store.save(cp("cp-tie-1", at=20, node="n"))
    await store.save(cp("cp-tie-0", at=20, node="n"))  # same time, saved last; id sorts first
    assert (await store.latest("run-a")).id == "cp-tie-0"  # type: ignore[union-attr]
    assert (await store.load("run-a", "n")).id == "cp-tie-0"  # type: ignore[union-attr]


async def test_list_is_oldest_first_by_run_thread_or_all() -> None:
    """SPEC §5 ``list``: checkpoints of a run (or thread, or all), oldest first (timestamp,
    then save order)."""
    store = InMemoryCheckpointStore()
    await store.save(cp("cp-3", at=3))
    await store.save(cp("cp-1", at=1))
    await store.save(cp("cp-2b", at=2))
    await store.save(cp("cp-2a", at=2))
    await store.save(cp("cp-other", run="run-b", thread="thread-b", at=0))
    assert [c.id for c in await store.list("run-a")] == ["cp-1", "cp-2b", "cp-2a", "cp-3"]
    assert [c.id for c in await store.list(thread_id="thread-b")] == ["cp-other"]
    assert [c.id for c in await store.list()] == ["cp-other", "cp-1", "cp-2b", "cp-2a", "cp-3"]
    assert await store.list("run-none") == []


async def test_delete_removes_one_checkpoint() -> None:
    """SPEC §5 ``delete(checkpoint_id)``: ``True`` if it existed; it is gone from get, latest,
    load and list, and latest falls back to the next most recent."""
    store = InMemoryCheckpointStore()
    await store.save(cp("cp-1", at=1, node="a"))
    await store.save(cp("cp-2", at=2, node="a"))
    assert await store.delete("cp-2") is True
    assert await store.delete("cp-2") is False
    assert await store.get("cp-2") is None
    assert (await store.latest("run-a")).id == "cp-1"  # type: ignore[union-attr]
    assert (await store.load("run-a", "a")).id == "cp-1"  # type: ignore[union-attr]
    assert [c.id for c in await store.list("run-a")] == ["cp-1"]
    assert await store.delete("cp-1") is True
    assert await store.latest("run-a") is None
    assert await store.list("run-a") == []


async def test_fork_deep_clones_into_a_new_run_with_patched_state() -> None:
    """Seed 003 fork: "The operation deep-clones the source checkpoint, assigns a fresh runId
    and checkpoint id, applies any patchState overrides, persists the new checkpoint, and
    returns the new runId." """
    store = InMemoryCheckpointStore()
    source = cp("cp-src", state={"n": 1, "nested": {"items": [1]}, "keep": "me"})
    await store.save(source)
    new_run = await store.fork("cp-src", patch_state={"n": 42})
    assert isinstance(new_run, str)
    assert new_run != "run-a"
    assert new_run.startswith("run-")
    forked = await store.latest(new_run)
    assert forked is not None
    assert forked.run_id == new_run
    assert forked.id != "cp-src"
    assert forked.id.startswith("cp-")
    assert forked.state == {"n": 42, "nested": {"items": [1]}, "keep": "me"}
    # deep: changing the fork changes nothing of the source
    forked.state["nested"]["items"].append(2)
    await store.save(forked)
    src = await store.get("cp-src")
    assert src is not None
    assert src.state == {"n": 1, "nested": {"items": [1]}, "keep": "me"}
    assert (await store.latest("run-a")).id == "cp-src"  # type: ignore[union-attr]
    # a second fork of the same checkpoint is another new run
    other = await store.fork("cp-src")
    assert other not in (new_run, "run-a")
    plain = await store.latest(other)
    assert plain is not None
    assert plain.state == src.state
    with pytest.raises(CheckpointNotFound):
        await store.fork("cp-nope")


async def test_a_fork_resumes_as_its_own_run() -> None:
    """SPEC §2: ``new_run_id = await store.fork(checkpoint_id, patch_state={...})`` "then resume
    the fork"; the source run is untouched."""
    script = Script(interrupts={"two"})
    rt = runtime()
    _events, paused = await run(rt, chain_graph(script), {"n": 1})
    fork_id = await rt.store.fork(paused.checkpoint_id, patch_state={"n": 100})  # type: ignore[arg-type]
    leg, forked = await resume(rt, fork_id, Resume("forked"))
    assert forked.run_id == fork_id
    assert forked.status == "completed"
    assert forked.data["n"] == 100
    assert forked.data["answers"] == ["forked"]
    assert {e.run_id for e in leg} == {fork_id}
    original = await rt.store.latest(paused.run_id)
    assert original is not None
    assert original.status == "interrupted"
    _, done = await resume(rt, paused.run_id, Resume("original"))
    assert done.data["n"] == 1
    assert done.data["answers"] == ["original"]


async def test_runtime_checkpoints_record_node_ids_and_load_by_node() -> None:
    """SPEC §5: ``node_id`` is "for a superstep's checkpoint the last of node_ids, the batch's
    nodes — load(run, node) matches either"."""
    rt = runtime()
    events, result = await run(rt, fan_graph(Script()))
    batch = await rt.store.load(result.run_id, "a")
    assert batch is not None
    assert batch.node_ids == ["a", "b", "c"]
    assert batch.node_id == "c"
    assert (await rt.store.load(result.run_id, "c")).id == batch.id  # type: ignore[union-attr]
    join = await rt.store.load(result.run_id, "join")
    assert join is not None
    assert join.id == result.checkpoint_id
    saved = [e.checkpoint_id for e in of(events, "checkpoint_saved")]
    assert [c.id for c in await rt.store.list(result.run_id)] == saved
    assert [c.id for c in await rt.history(result.run_id)] == saved


async def test_resume_by_run_id_continues_from_the_last_checkpoint_the_store_saved() -> None:
    """Seed 003 save / seed 000 stream: "a resume by the run id continues from the last
    checkpoint the store saved." — also when that is not the run's halt checkpoint (the store
    lost it: ``delete``)."""
    script = Script(interrupts={"three"})
    rt = runtime()
    events, paused = await run(rt, chain_graph(script))
    saved = [e.checkpoint_id for e in of(events, "checkpoint_saved")]
    assert await rt.store.delete(saved[-1])  # the halt checkpoint is gone
    leg, result = await resume(rt, paused.run_id)
    assert leg[0].resumed_from == saved[-2]
    assert script.called() == ["one", "two", "three", "three"]
    assert result.status == "interrupted"
