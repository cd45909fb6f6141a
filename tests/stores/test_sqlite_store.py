"""The checkpoint protocol on every store (the SQLite store must match the in-memory one),
and what only the durable SQLite store does: files, processes, formats."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_graphflow import CheckpointStore, InMemoryCheckpointStore, SQLiteCheckpointStore
from pytest_graphflow._records._checkpoint import FORMAT_VERSION, Checkpoint, TaskOutput, TaskRecord
from pytest_graphflow._records._events import Interrupt
from pytest_graphflow._records._ids import derived_hex
from pytest_graphflow.errors import (
    CheckpointNotFound,
    EventsCompacted,
    InvalidArgument,
    StoreFileError,
    ThreadBusy,
    UnsupportedFormat,
)

Store = InMemoryCheckpointStore | SQLiteCheckpointStore
MakeCheckpoint = Callable[..., Checkpoint]
T0 = datetime(2025, 1, 1, tzinfo=UTC)  # make_cp's at=0


# -- the protocol, on every store ---------------------------------------------------------------


@pytest.mark.anyio
async def test_both_stores_implement_the_protocol(any_store: Store) -> None:
    assert isinstance(any_store, CheckpointStore)


@pytest.mark.anyio
async def test_save_then_get_round_trips_every_field(
    any_store: Store, make_cp: MakeCheckpoint
) -> None:
    cp = make_cp(
        "cp-1", state={"items": ["a", {"b": [1, 2.5, None, True]}]}, node="b", nodes=["a", "b"],
        parent_id="cp-0", status="interrupted", next_step=3, tenant_id="acme",
        tasks=[TaskRecord(task_id="task-1", node="a", item={"x": 1}, has_item=True)],
        completed={"task-1": TaskOutput(task_id="task-1", node="a", patch={"n": 1},
                                        started_at=T0, finished_at=T0 + timedelta(seconds=1))},
        interrupts=[Interrupt(key="task-1:q", id="q", node="a", task_id="task-1", payload=[1])],
        answers={"task-1:q": "yes"}, visited=["a"], arrivals={"a->j": ["a"]}, next_seq=7,
        error={"type": "ValueError", "message": "boom"}, metadata={"k": "v"},
    )
    await any_store.save(cp)
    assert await any_store.get("cp-1") == cp
    assert await any_store.get("cp-missing") is None


@pytest.mark.anyio
async def test_save_and_reads_copy(any_store: Store, make_cp: MakeCheckpoint) -> None:
    cp = make_cp("cp-1", state={"items": [1]})
    await any_store.save(cp)
    cp.state["items"].append(2)
    got = await any_store.get("cp-1")
    assert got is not None
    assert got.state == {"items": [1]}
    got.state["items"].append(3)
    again = await any_store.latest("run-a")
    assert again is not None
    assert again.state == {"items": [1]}


@pytest.mark.anyio
async def test_save_overwrites_by_id(any_store: Store, make_cp: MakeCheckpoint) -> None:
    await any_store.save(make_cp("cp-1", state={"n": 1}))
    await any_store.save(make_cp("cp-1", state={"n": 2}))
    assert [c.state for c in await any_store.list("run-a")] == [{"n": 2}]


@pytest.mark.anyio
async def test_overwrite_can_move_a_checkpoint_to_another_run(
    any_store: Store, make_cp: MakeCheckpoint
) -> None:
    await any_store.save(make_cp("cp-1", run="run-a"))
    await any_store.save(make_cp("cp-1", run="run-b", thread="thread-b"))
    assert await any_store.latest("run-a") is None
    assert await any_store.list("run-a") == []
    assert [c.id for c in await any_store.list(thread_id="thread-b")] == ["cp-1"]


@pytest.mark.anyio
async def test_latest_is_latest_timestamp_not_last_saved(
    any_store: Store, make_cp: MakeCheckpoint
) -> None:
    await any_store.save(make_cp("cp-new", at=10))
    await any_store.save(make_cp("cp-old", at=5))
    latest = await any_store.latest("run-a")
    assert latest is not None
    assert latest.id == "cp-new"
    assert await any_store.latest("run-unknown") is None


@pytest.mark.anyio
async def test_latest_breaks_timestamp_ties_by_save_order(
    any_store: Store, make_cp: MakeCheckpoint
) -> None:
    for cid in ("cp-b", "cp-a", "cp-c"):
        await any_store.save(make_cp(cid, at=1))
    latest = await any_store.latest("run-a")
    assert latest is not None
    assert latest.id == "cp-c"
    await any_store.save(make_cp("cp-a", at=1, state={"n": 9}))  # re-saved: now saved last
    latest = await any_store.latest("run-a")
    assert latest is not None
    assert (latest.id, latest.state) == ("cp-a", {"n": 9})
    assert [c.id for c in await any_store.list("run-a")] == ["cp-b", "cp-c", "cp-a"]


@pytest.mark.anyio
async def test_latest_orders_aware_timestamps_by_instant(
    any_store: Store, make_cp: MakeCheckpoint
) -> None:
    plus2 = timezone(timedelta(hours=2))
    await any_store.save(make_cp("cp-utc", timestamp=datetime(2025, 1, 1, 1, tzinfo=UTC)))
    # 02:30+02:00 is 00:30 UTC: earlier, although its wall time reads later
    await any_store.save(make_cp("cp-plus2", timestamp=datetime(2025, 1, 1, 2, 30, tzinfo=plus2)))
    latest = await any_store.latest("run-a")
    assert latest is not None
    assert latest.id == "cp-utc"


@pytest.mark.anyio
async def test_load_without_node_is_latest(any_store: Store, make_cp: MakeCheckpoint) -> None:
    await any_store.save(make_cp("cp-1", at=1))
    await any_store.save(make_cp("cp-2", at=2))
    assert await any_store.load("run-a") == await any_store.latest("run-a")
    assert await any_store.load("run-unknown") is None


@pytest.mark.anyio
async def test_load_by_node_matches_node_id_or_node_ids(
    any_store: Store, make_cp: MakeCheckpoint
) -> None:
    await any_store.save(make_cp("cp-1", at=1, node="a"))
    await any_store.save(make_cp("cp-2", at=2, node="c", nodes=["b", "c"]))
    await any_store.save(make_cp("cp-3", at=3, node="d", nodes=["d"]))
    await any_store.save(make_cp("cp-4", at=4, node="a", run="run-b"))

    async def loaded(node: str) -> str | None:
        cp = await any_store.load("run-a", node)
        return None if cp is None else cp.id

    assert await loaded("a") == "cp-1"
    assert await loaded("b") == "cp-2"
    assert await loaded("c") == "cp-2"
    assert await loaded("d") == "cp-3"
    assert await loaded("zzz") is None


@pytest.mark.anyio
async def test_load_by_node_takes_the_most_recent_match(
    any_store: Store, make_cp: MakeCheckpoint
) -> None:
    await any_store.save(make_cp("cp-late", at=9, node="a"))
    await any_store.save(make_cp("cp-tie-1", at=5, nodes=["x", "a"], node="a"))
    await any_store.save(make_cp("cp-tie-2", at=5, nodes=["a", "y"], node="y"))
    cp = await any_store.load("run-a", "a")
    assert cp is not None
    assert cp.id == "cp-late"
    assert await any_store.delete("cp-late")
    cp = await any_store.load("run-a", "a")
    assert cp is not None
    assert cp.id == "cp-tie-2"  # same timestamp: saved last wins


@pytest.mark.anyio
async def test_list_filters_and_orders(any_store: Store, make_cp: MakeCheckpoint) -> None:
    await any_store.save(make_cp("cp-a2", at=2, run="run-a", thread="t1"))
    await any_store.save(make_cp("cp-b1", at=1, run="run-b", thread="t1"))
    await any_store.save(make_cp("cp-a1", at=1, run="run-a", thread="t2"))
    await any_store.save(make_cp("cp-a0", at=0, run="run-a", thread="t1"))

    async def ids(run: str | None = None, thread: str | None = None) -> list[str]:
        return [c.id for c in await any_store.list(run, thread_id=thread)]

    assert await ids("run-a") == ["cp-a0", "cp-a1", "cp-a2"]
    assert await ids(thread="t1") == ["cp-a0", "cp-b1", "cp-a2"]
    assert await ids("run-a", "t1") == ["cp-a0", "cp-a2"]
    assert await ids() == ["cp-a0", "cp-b1", "cp-a1", "cp-a2"]
    assert await ids("run-none") == []


@pytest.mark.anyio
async def test_delete(any_store: Store, make_cp: MakeCheckpoint) -> None:
    await any_store.save(make_cp("cp-1", at=1, node="a"))
    await any_store.save(make_cp("cp-2", at=2, node="a"))
    assert await any_store.delete("cp-2") is True
    assert await any_store.delete("cp-2") is False
    assert await any_store.get("cp-2") is None
    latest = await any_store.latest("run-a")
    assert latest is not None
    assert latest.id == "cp-1"
    loaded = await any_store.load("run-a", "a")
    assert loaded is not None
    assert loaded.id == "cp-1"
    assert await any_store.delete("cp-1") is True
    assert await any_store.latest("run-a") is None
    assert await any_store.list() == []


@pytest.mark.anyio
async def test_fork_makes_a_new_run_from_a_deep_clone(
    any_store: Store, make_cp: MakeCheckpoint
) -> None:
    source = make_cp("cp-src", state={"items": [1], "deep": {"k": [1]}}, metadata={"m": 1})
    await any_store.save(source)
    run_id = await any_store.fork("cp-src", patch_state={"items": (2, 3)})
    token = derived_hex("fork", "cp-src", 0)
    assert run_id == f"run-{token}"
    forked = await any_store.latest(run_id)
    assert forked is not None
    assert forked.id == f"cp-{token}-f"
    assert forked.thread_id == f"thread-{token}"
    assert forked.parent_id == "cp-src"
    assert forked.state == {"items": [2, 3], "deep": {"k": [1]}}  # patch in JSON form
    assert forked.metadata == {"m": 1, "forked_from": "cp-src"}
    assert (forked.graph_id, forked.revision, forked.timestamp) == ("g", "rev-x", T0)
    assert await any_store.get("cp-src") == source  # the source is untouched
    forked.state["deep"]["k"].append(2)
    assert await any_store.get("cp-src") == source


@pytest.mark.anyio
async def test_forking_twice_gives_two_runs(any_store: Store, make_cp: MakeCheckpoint) -> None:
    await any_store.save(make_cp("cp-src"))
    first = await any_store.fork("cp-src")
    second = await any_store.fork("cp-src", patch_state={"n": 5})
    assert first != second
    assert second == f"run-{derived_hex('fork', 'cp-src', 1)}"
    assert len(await any_store.list()) == 3


@pytest.mark.anyio
async def test_fork_of_a_missing_checkpoint_raises(any_store: Store) -> None:
    with pytest.raises(CheckpointNotFound, match="cp-nope"):
        await any_store.fork("cp-nope")
    assert await any_store.list() == []


# -- agreement: the same operations give the same answers on both stores -------------------------

_ids = st.sampled_from(["cp-1", "cp-2", "cp-3", "cp-4"])
_runs = st.sampled_from(["run-a", "run-b"])
_ops = st.one_of(
    st.tuples(st.just("save"), _ids, _runs, st.integers(0, 3), st.sampled_from(["a", "b", None])),
    st.tuples(st.just("delete"), _ids),
    st.tuples(st.just("fork"), _ids),
    st.tuples(st.just("prune"), _runs, st.integers(0, 2)),
)


async def _apply(store: Store, ops: list[tuple[Any, ...]]) -> list[Any]:
    seen: list[Any] = []
    for n, op in enumerate(ops):
        if op[0] == "save":
            _, cid, run, at, node = op
            await store.save(Checkpoint(
                id=cid, run_id=run, thread_id=f"t-{run}", graph_id="g", revision="rev-x", step=0,
                timestamp=T0 + timedelta(seconds=at), state={"n": n}, node_id=node,
                node_ids=[node] if node else [],
            ))
        elif op[0] == "delete":
            seen.append(await store.delete(op[1]))
        elif op[0] == "fork":
            try:
                seen.append(await store.fork(op[1], patch_state={"n": 100 + n}))
            except CheckpointNotFound:
                seen.append("not found")
        else:
            seen.append(await store.prune(op[1], op[2]))
        for run in ("run-a", "run-b"):
            seen.append(await store.latest(run))
            seen.append(await store.load(run, "a"))
            seen.append(await store.list(run))
    seen.append(await store.list())
    return seen


@settings(max_examples=40, deadline=None)
@given(st.lists(_ops, max_size=12))
def test_sqlite_store_agrees_with_the_in_memory_store(ops: list[tuple[Any, ...]]) -> None:
    async def both() -> tuple[list[Any], list[Any]]:
        with SQLiteCheckpointStore(":memory:") as durable:
            return await _apply(InMemoryCheckpointStore(), ops), await _apply(durable, ops)

    memory, durable = anyio.run(both)
    assert durable == memory


# -- only the SQLite store ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_second_instance_reads_what_the_first_saved(
    store_path: Path, make_cp: MakeCheckpoint
) -> None:
    with SQLiteCheckpointStore(store_path) as first:
        await first.save(make_cp("cp-1", at=1, node="a", nodes=["a"]))
        await first.save(make_cp("cp-2", at=1, node="b"))
    with SQLiteCheckpointStore(store_path) as second:
        latest = await second.latest("run-a")
        assert latest is not None
        assert latest.id == "cp-2"
        loaded = await second.load("run-a", "a")
        assert loaded is not None
        assert loaded.id == "cp-1"
        assert [c.id for c in await second.list()] == ["cp-1", "cp-2"]


@pytest.mark.anyio
async def test_two_open_instances_share_save_order(
    store_path: Path, make_cp: MakeCheckpoint
) -> None:
    with SQLiteCheckpointStore(store_path) as a, SQLiteCheckpointStore(store_path) as b:
        await a.save(make_cp("cp-1", at=1))
        await b.save(make_cp("cp-2", at=1))
        await a.save(make_cp("cp-3", at=0))
        for store in (a, b):
            latest = await store.latest("run-a")
            assert latest is not None
            assert latest.id == "cp-2"
        run_id = await b.fork("cp-2")
        assert await a.latest(run_id) is not None


@pytest.mark.anyio
async def test_extras_persist_across_instances(store_path: Path) -> None:
    with SQLiteCheckpointStore(store_path) as first:
        await first.record_events("run-a", [{"seq": 0, "type": "run_start"},
                                            {"seq": 1, "type": "run_end"}])
        await first.compact_events("run-a", 1)
        await first.record_run({"run_id": "run-a", "status": "running"})
        await first.put_artifact("run-a", "log.txt", "hello", "text/plain")
        token = await first.claim("thread-a", "run-a", now=T0)
    with SQLiteCheckpointStore(store_path, claim_ttl=5) as second:
        assert await second.events("run-a", after_seq=0) == [{"seq": 1, "type": "run_end"}]
        with pytest.raises(EventsCompacted):
            await second.events("run-a")
        assert await second.run("run-a") == {"run_id": "run-a", "status": "running"}
        assert await second.get_artifact("run-a", "log.txt") == b"hello"
        with pytest.raises(ThreadBusy) as busy:
            await second.claim("thread-a", "run-b", now=T0 + timedelta(seconds=29))
        assert busy.value.holder == "run-a"
        # the claim's own ttl (30 s, the first store's) decides, not the second store's
        later = await second.claim("thread-a", "run-b", now=T0 + timedelta(seconds=30))
        assert later > token


@pytest.mark.anyio
async def test_checkpointed_runs_in_first_save_order(
    store_path: Path, make_cp: MakeCheckpoint
) -> None:
    with SQLiteCheckpointStore(store_path) as store:
        assert store.checkpointed_runs() == []
        await store.save(make_cp("cp-1", run="run-b", at=9))
        await store.save(make_cp("cp-2", run="run-a", at=0))
        await store.save(make_cp("cp-3", run="run-b", at=0))
        assert store.checkpointed_runs() == ["run-b", "run-a"]


@pytest.mark.anyio
async def test_the_file_is_in_wal_mode(store_path: Path) -> None:
    with SQLiteCheckpointStore(store_path):
        db = sqlite3.connect(store_path)
        try:
            assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        finally:
            db.close()


@pytest.mark.anyio
async def test_unsupported_format_names_checkpoint_and_versions(
    store_path: Path, make_cp: MakeCheckpoint
) -> None:
    with SQLiteCheckpointStore(store_path) as store:
        await store.save(make_cp("cp-future", format_version=FORMAT_VERSION + 1, node="a"))
        await store.save(make_cp("cp-ok", at=-1))
        reads = [store.get("cp-future"), store.latest("run-a"), store.load("run-a", "a"),
                 store.list("run-a"), store.fork("cp-future")]
        for read in reads:
            with pytest.raises(UnsupportedFormat) as caught:
                await read
            message = str(caught.value)
            assert "cp-future" in message
            assert f"format version {FORMAT_VERSION + 1}" in message
            assert f"reads format version {FORMAT_VERSION}" in message
        assert await store.get("cp-ok") is not None


@pytest.mark.anyio
async def test_unsupported_format_of_a_row_an_older_build_wrote(
    store_path: Path, make_cp: MakeCheckpoint
) -> None:
    with SQLiteCheckpointStore(store_path) as store:
        await store.save(make_cp("cp-old"))
    db = sqlite3.connect(store_path)
    with db:
        for table in ("checkpoints", "log"):  # wherever the row is (see sqlite/_tail.py)
            db.execute(f"UPDATE {table} SET format_version = 0, data = '{{\"legacy\": true}}' "
                       "WHERE id IS NOT NULL")
    db.close()
    with (
        SQLiteCheckpointStore(store_path) as store,
        pytest.raises(UnsupportedFormat, match=r"'cp-old'.*format version 0"),
    ):
        await store.get("cp-old")


def test_a_file_of_another_schema_version_is_refused(store_path: Path) -> None:
    SQLiteCheckpointStore(store_path).close()
    db = sqlite3.connect(store_path)
    with db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.close()
    with pytest.raises(UnsupportedFormat, match="schema version 99"):
        SQLiteCheckpointStore(store_path)


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database, just some text that is long enough " * 20)
    with pytest.raises(StoreFileError, match=r"notes\.txt.*not a SQLite database"):
        SQLiteCheckpointStore(path)
    assert path.read_text().startswith("not a database")


@pytest.mark.anyio
async def test_closed_store_refuses_operations_and_closes_twice(store_path: Path) -> None:
    store = SQLiteCheckpointStore(store_path)
    assert repr(store) == f"SQLiteCheckpointStore({str(store_path)!r})"
    store.close()
    store.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        await store.latest("run-a")


@pytest.mark.anyio
async def test_async_context_manager_closes(store_path: Path, make_cp: MakeCheckpoint) -> None:
    async with SQLiteCheckpointStore(store_path) as store:
        await store.save(make_cp("cp-1"))
    with pytest.raises(sqlite3.ProgrammingError):
        await store.get("cp-1")


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), True, "30"], ids=repr)
def test_claim_ttl_must_be_positive_seconds(store_path: Path, ttl: Any) -> None:
    with pytest.raises(InvalidArgument, match="ttl"):
        SQLiteCheckpointStore(store_path, claim_ttl=ttl)
    assert not store_path.exists()  # refused before the file is created


@pytest.mark.anyio
async def test_a_failed_write_changes_nothing(store_path: Path, make_cp: MakeCheckpoint) -> None:
    with SQLiteCheckpointStore(store_path) as store:
        await store.save(make_cp("cp-1", state={"n": 1}))
        with pytest.raises(InvalidArgument):
            await store.record_events("run-a", [{"seq": 0}, {"no": "seq"}])
        assert await store.events("run-a") == []
        latest = await store.latest("run-a")
        assert latest is not None
        assert latest.state == {"n": 1}


def test_naive_timestamps_read_as_utc(store_path: Path, make_cp: MakeCheckpoint) -> None:
    async def check() -> None:
        with SQLiteCheckpointStore(store_path) as store:
            await store.save(make_cp("cp-naive", timestamp=datetime(2025, 1, 1, 0, 0, 1)))
            got = await store.get("cp-naive")
            assert got is not None
            assert got.timestamp == datetime(2025, 1, 1, 0, 0, 1)
            assert got.timestamp.tzinfo is None

    anyio.run(check)


@pytest.mark.anyio
async def test_vacuum_gives_back_the_space_pruning_leaves_and_reads_the_same(
    store_path: Path, make_cp: MakeCheckpoint
) -> None:
    # Two runs written interleaved share pages: pruning one frees no whole page of the
    # other's, so incremental auto-vacuum cannot give that space back; VACUUM repacks it.
    store = SQLiteCheckpointStore(store_path)
    pad = "x" * 400
    for n in range(200):
        for run in ("run-a", "run-b"):
            await store.save(make_cp(f"cp-{run}-{n}", run=run, thread=f"t-{run}", at=n,
                                     state={"n": n, "pad": pad}, visited=["a"] * (n + 1)))
            await store.record_events(run, [{"seq": n, "type": "tick", "pad": pad}])
    assert await store.prune("run-a", 1) == 199
    assert await store.compact_events("run-a", 199) == 199

    def size() -> int:
        store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return store_path.stat().st_size

    pruned = size()
    before = (await store.list("run-a"), await store.list("run-b"),
              await store.events("run-a", 198), await store.events("run-b"))
    store.vacuum()
    vacuumed = size()
    assert vacuumed < pruned * 0.8, (pruned, vacuumed)
    after = (await store.list("run-a"), await store.list("run-b"),
             await store.events("run-a", 198), await store.events("run-b"))
    assert after == before
    assert [c.visited for c in after[1]][-1] == ("a",) * 200
    await store.save(make_cp("cp-run-a-200", run="run-a", thread="t-run-a", at=200,
                             visited=["a"] * 201))  # the store goes on writing
    store.close()
    with SQLiteCheckpointStore(store_path, readonly=True) as reader:
        assert await reader.list("run-b") == before[1]
        assert [c.id for c in await reader.list("run-a")] == ["cp-run-a-199", "cp-run-a-200"]
        with pytest.raises(StoreFileError, match="read-only"):
            reader.vacuum()
