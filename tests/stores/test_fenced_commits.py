"""Fenced commits (SPEC §5, seed 004): every write of a run carries its claim's token, and a
commit under a superseded token is refused with ``StaleClaim`` changing nothing — on the
in-memory and the SQLite store alike, and through a ``FaultyStore``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pytest_graphflow import (
    FaultyStore,
    InMemoryCheckpointStore,
    SimulatedCrash,
    SQLiteCheckpointStore,
    StoreFault,
)
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._records._json import DumpedEvents
from pytest_graphflow.errors import InvalidArgument, StaleClaim
from pytest_graphflow.stores import ClaimingStore

Store = InMemoryCheckpointStore | SQLiteCheckpointStore
MakeCheckpoint = Callable[..., Checkpoint]
T0 = datetime(2025, 1, 1, tzinfo=UTC)

pytestmark = pytest.mark.anyio


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _ev(seq: int, run: str = "run-a") -> dict[str, Any]:
    return {"seq": seq, "run_id": run, "type": "custom"}


async def _snapshot(store: Any) -> tuple[Any, ...]:
    return ([c.id for c in await store.list()], await store.events("run-a"),
            await store.run("run-a"))


def test_both_stores_implement_the_claiming_protocol(any_store: Store) -> None:
    assert isinstance(any_store, ClaimingStore)


async def test_a_commit_writes_checkpoints_events_and_run_record_together(
    any_store: Store, make_cp: MakeCheckpoint
) -> None:
    token = await any_store.claim("thread-a", "run-a", now=T0)
    await any_store.commit("thread-a", token, run_id="run-a",
                           checkpoints=[make_cp("cp-1", at=1), make_cp("cp-2", at=2)],
                           events=[_ev(0), _ev(1)], run={"run_id": "run-a", "status": "running"})
    assert [c.id for c in await any_store.list("run-a")] == ["cp-1", "cp-2"]
    assert [e["seq"] for e in await any_store.events("run-a")] == [0, 1]
    assert (await any_store.run("run-a") or {})["status"] == "running"


async def test_a_taken_over_holder_cannot_commit_and_nothing_changes(
    any_store: Store, make_cp: MakeCheckpoint
) -> None:
    old = await any_store.claim("thread-a", "run-a", now=T0, ttl=10)
    await any_store.commit("thread-a", old, run_id="run-a", checkpoints=[make_cp("cp-1")],
                           events=[_ev(0)], run={"run_id": "run-a", "status": "running"})
    new = await any_store.claim("thread-a", "run-a", now=_at(10))  # expired: taken over
    before = await _snapshot(any_store)
    writes: list[tuple[str, Callable[[], Any]]] = [
        ("commit", lambda: any_store.commit(
            "thread-a", old, run_id="run-a", checkpoints=[make_cp("cp-1", state={"n": 9})],
            events=[_ev(0), _ev(1)], run={"run_id": "run-a", "status": "completed"})),
        ("fenced save", lambda: any_store.save(make_cp("cp-2", at=5), fence=("thread-a", old))),
    ]
    for what, write in writes:
        with pytest.raises(StaleClaim) as stale:
            await write()
        assert (stale.value.token, stale.value.current) == (old, new), what
        assert "another run took the thread over" in str(stale.value)
        assert await _snapshot(any_store) == before, what
    assert (await any_store.get("cp-1") or make_cp("x")).state == {"n": 0}
    await any_store.save(make_cp("cp-2", at=5), fence=("thread-a", new))  # the new holder may
    assert [c.id for c in await any_store.list("run-a")] == ["cp-1", "cp-2"]


async def test_a_released_claim_fences_its_holder_out(
    any_store: Store, make_cp: MakeCheckpoint
) -> None:
    token = await any_store.claim("thread-a", "run-a", now=T0)
    await any_store.release("thread-a", token)
    with pytest.raises(StaleClaim) as stale:
        await any_store.commit("thread-a", token, run_id="run-a", checkpoints=[make_cp("cp-1")])
    assert stale.value.current is None
    assert await any_store.list() == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"checkpoints": "cp-1"}, "list of Checkpoint"),
        ({"events": [{"seq": "x"}]}, "seq"),
        ({"events": [_ev(0, run="run-b")]}, "of run run-b"),
        ({"run": {"run_id": "run-b"}}, "run record is of run run-b"),
        ({"events": {"seq": 0}}, "list of events"),
    ],
    ids=["checkpoints-not-a-list", "bad-seq", "event-of-another-run", "record-of-another-run",
         "events-not-a-list"],
)
async def test_a_malformed_commit_writes_nothing(
    any_store: Store, kwargs: dict[str, Any], match: str
) -> None:
    token = await any_store.claim("thread-a", "run-a", now=T0)
    with pytest.raises(InvalidArgument, match=match):
        await any_store.commit("thread-a", token, run_id="run-a", **kwargs)
    assert await _snapshot(any_store) == ([], [], None)


async def test_a_commit_drops_events_before_the_compaction_point(any_store: Store) -> None:
    # Seed 004: compacted events are gone for good; a late writer does not bring them back.
    token = await any_store.claim("thread-a", "run-a", now=T0)
    await any_store.commit("thread-a", token, run_id="run-a", events=[_ev(0), _ev(1)])
    await any_store.compact_events("run-a", 2)
    await any_store.commit("thread-a", token, run_id="run-a",
                           events=DumpedEvents([_ev(1), _ev(2), _ev(3)]))
    await any_store.commit("thread-a", token, run_id="run-a", events=[_ev(0), _ev(4)])
    assert [e["seq"] for e in await any_store.events("run-a", after_seq=1)] == [2, 3, 4]


async def test_the_runtimes_dumped_events_are_stored_like_any_list(
    any_store: Store, tmp_path: Path
) -> None:
    plain = [{**_ev(0), "update": {"n": 1, "at": "2025-01-01T00:00:00+00:00"}}, _ev(1)]
    token = await any_store.claim("thread-a", "run-a", now=T0)
    await any_store.commit("thread-a", token, run_id="run-a", events=DumpedEvents(plain))
    assert await any_store.events("run-a") == plain
    # A float no JSON reader takes back is refused on this path too, and nothing is written.
    with pytest.raises(InvalidArgument, match="not JSON"):
        await any_store.commit("thread-a", token, run_id="run-a",
                               events=DumpedEvents([{**_ev(2), "x": float("nan")}]))
    assert await any_store.events("run-a") == plain


@pytest.mark.parametrize(("run", "thread"), [("run-b", "thread-a"), ("run-a", "thread-b")],
                         ids=["other-run", "other-thread"])
async def test_a_commit_writes_its_own_run_on_its_own_thread_only(
    any_store: Store, make_cp: MakeCheckpoint, run: str, thread: str
) -> None:
    token = await any_store.claim("thread-a", "run-a", now=T0)
    with pytest.raises(InvalidArgument, match="commit: checkpoint cp-2"):
        await any_store.commit("thread-a", token, run_id="run-a",
                               checkpoints=[make_cp("cp-1"), make_cp("cp-2", run=run,
                                                                      thread=thread)])
    assert await any_store.list() == []
    with pytest.raises(InvalidArgument, match="fence is for thread"):
        await any_store.save(make_cp("cp-1", thread="thread-b"), fence=("thread-a", token))


async def test_a_fork_never_lands_on_a_claimed_thread(
    any_store: Store, make_cp: MakeCheckpoint
) -> None:
    await any_store.save(make_cp("cp-1"))
    first = await any_store.fork("cp-1")
    forked = await any_store.latest(first)
    assert forked is not None
    # Another process claimed the thread a second fork would have taken: it takes another.
    await any_store.delete(forked.id)
    await any_store.claim(forked.thread_id, "run-x", now=T0)
    second = await any_store.fork("cp-1")
    again = await any_store.latest(second)
    assert again is not None
    assert again.thread_id != forked.thread_id


# -- through a FaultyStore ----------------------------------------------------------------------


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Any:
    store = SQLiteCheckpointStore(tmp_path / "f.db")
    yield store
    store.close()


async def test_save_rules_watch_commits_and_a_rejected_commit_writes_nothing(
    sqlite_store: SQLiteCheckpointStore, make_cp: MakeCheckpoint
) -> None:
    faulty = FaultyStore(sqlite_store).reject_save(when=lambda cp: cp.id == "cp-2")
    token = await faulty.claim("thread-a", "run-a", now=T0)
    await faulty.commit("thread-a", token, run_id="run-a", checkpoints=[make_cp("cp-1")],
                        events=[_ev(0)])
    with pytest.raises(StoreFault, match=r"save #2 .*rejected"):
        await faulty.commit("thread-a", token, run_id="run-a",
                            checkpoints=[make_cp("cp-2"), make_cp("cp-3")], events=[_ev(1)])
    await faulty.commit("thread-a", token, run_id="run-a", events=[_ev(1)])  # no checkpoint
    assert [c.id for c in await sqlite_store.list()] == ["cp-1"]
    assert [e["seq"] for e in await sqlite_store.events("run-a")] == [0, 1]
    assert faulty.saves == ["cp-1"]
    assert [(c.op, c.outcome) for c in faulty.calls] == [
        ("claim", "ok"), ("commit", "ok"), ("commit", "rejected"), ("commit", "ok")]
    assert faulty.last_rule.hits == 1
    assert "token 1, run run-a: cp-2, cp-3; 1 event(s)" in str(faulty.calls[2])


@pytest.mark.parametrize("phase", ["before", "after"])
async def test_a_crash_at_a_commit_writes_all_of_it_or_nothing(
    sqlite_store: SQLiteCheckpointStore, make_cp: MakeCheckpoint, phase: Any
) -> None:
    faulty = FaultyStore(sqlite_store).crash_at("commit", phase=phase)
    token = await sqlite_store.claim("thread-a", "run-a", now=T0)
    with pytest.raises(SimulatedCrash):
        await faulty.commit("thread-a", token, run_id="run-a", checkpoints=[make_cp("cp-1")],
                            events=[_ev(0), _ev(1)], run={"run_id": "run-a", "status": "x"})
    written = ([c.id for c in await sqlite_store.list()],
               [e["seq"] for e in await sqlite_store.events("run-a")],
               await sqlite_store.run("run-a") is not None)
    assert written == ((["cp-1"], [0, 1], True) if phase == "after" else ([], [], False))


async def test_a_fenced_save_through_a_faulty_store_reaches_the_fence(
    make_cp: MakeCheckpoint,
) -> None:
    inner = InMemoryCheckpointStore()
    faulty = FaultyStore(inner)
    old = await inner.claim("thread-a", "run-a", now=T0, ttl=1)
    await inner.claim("thread-a", "run-b", now=_at(2))
    with pytest.raises(StaleClaim):
        await faulty.save(make_cp("cp-1"), fence=("thread-a", old))
    assert await inner.list() == []
    assert faulty.saves == []
    assert str(faulty.calls[0]).startswith("#0 save(cp-1 of run run-a) -> failed: StaleClaim")
