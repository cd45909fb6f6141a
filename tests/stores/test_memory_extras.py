"""The store extras the runtime uses when present — event logs, run records, artifacts, claims
with fencing tokens, retention — on the in-memory store, and identically on the SQLite store."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from pytest_graphflow import InMemoryCheckpointStore, SQLiteCheckpointStore
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._records._events import NodeEnd, NodeStart, parse_event
from pytest_graphflow.errors import EventsCompacted, InvalidArgument, StaleClaim, ThreadBusy

Store = InMemoryCheckpointStore | SQLiteCheckpointStore
MakeCheckpoint = Callable[..., Checkpoint]
T0 = datetime(2025, 1, 1, tzinfo=UTC)

pytestmark = pytest.mark.anyio


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _ev(seq: int, kind: str = "custom", **fields: Any) -> dict[str, Any]:
    return {"seq": seq, "run_id": "run-a", "type": kind, **fields}


# -- events -------------------------------------------------------------------------------------


async def test_events_come_back_in_seq_order(any_store: Store) -> None:
    await any_store.record_events("run-a", [_ev(2), _ev(0)])
    await any_store.record_events("run-a", [_ev(1)])
    await any_store.record_events("run-b", [_ev(0, run_id="run-b")])
    assert [e["seq"] for e in await any_store.events("run-a")] == [0, 1, 2]
    assert [e["seq"] for e in await any_store.events("run-a", after_seq=0)] == [1, 2]
    assert await any_store.events("run-a", after_seq=2) == []
    assert await any_store.events("run-unknown") == []


async def test_rerecording_a_seq_overwrites_it(any_store: Store) -> None:
    await any_store.record_events("run-a", [_ev(0, value=1), _ev(1)])
    await any_store.record_events("run-a", [_ev(0, value=2)])
    assert await any_store.events("run-a") == [_ev(0, value=2), _ev(1)]


async def test_events_are_stored_in_wire_form_and_copied(any_store: Store) -> None:
    start = NodeStart(seq=0, run_id="run-a", step=0, time=T0, node="a", task_id="task-1")
    end = NodeEnd(seq=1, run_id="run-a", step=0, time=_at(1), node="a", task_id="task-1",
                  patch={"items": [1]}, started_at=T0, finished_at=_at(1))
    wire = [start.model_dump(mode="json"), end.model_dump(mode="json")]
    await any_store.record_events("run-a", wire)
    got = await any_store.events("run-a")
    assert got == wire
    assert [parse_event(e) for e in got] == [start, end]
    got[1]["patch"]["items"].append(2)
    again = await any_store.events("run-a")
    assert again[1]["patch"] == {"items": [1]}


async def test_python_values_in_events_are_normalised(any_store: Store) -> None:
    await any_store.record_events("run-a", [_ev(0, time=T0, items=(1, 2))])
    assert await any_store.events("run-a") == [
        _ev(0, time="2025-01-01T00:00:00Z", items=[1, 2])
    ]


@pytest.mark.parametrize(
    "event",
    [{"type": "custom"}, {"seq": "1"}, {"seq": True}, {"seq": -1}, ["seq", 1],
     {"seq": 0, "value": object()}],
    ids=["no-seq", "str-seq", "bool-seq", "negative-seq", "not-a-dict", "not-json"],
)
async def test_bad_events_are_refused_and_nothing_is_recorded(
    any_store: Store, event: Any
) -> None:
    with pytest.raises(InvalidArgument, match="record_events"):
        await any_store.record_events("run-a", [_ev(0), event])
    assert await any_store.events("run-a") == []


async def test_compaction_removes_older_events(any_store: Store) -> None:
    await any_store.record_events("run-a", [_ev(s) for s in range(5)])
    assert await any_store.compact_events("run-a", 3) == 3
    assert [e["seq"] for e in await any_store.events("run-a", after_seq=2)] == [3, 4]
    assert [e["seq"] for e in await any_store.events("run-a", after_seq=3)] == [4]
    assert await any_store.compact_events("run-a", 2) == 0  # already gone: no-op
    assert await any_store.compact_events("run-a", 3) == 0
    assert await any_store.compact_events("run-a", 4) == 1


@pytest.mark.parametrize("after_seq", [None, -1, 0, 1])
async def test_reading_compacted_events_raises(any_store: Store, after_seq: int | None) -> None:
    await any_store.record_events("run-a", [_ev(s) for s in range(5)])
    await any_store.compact_events("run-a", 3)
    with pytest.raises(EventsCompacted, match="before seq 3") as caught:
        await any_store.events("run-a", after_seq=after_seq)
    assert caught.value.earliest_seq == 3  # type: ignore[attr-defined]
    assert "after_seq=2" in str(caught.value)


async def test_events_below_the_compaction_point_are_dropped(any_store: Store) -> None:
    await any_store.record_events("run-a", [_ev(s) for s in range(3)])
    await any_store.compact_events("run-a", 2)
    await any_store.record_events("run-a", [_ev(0), _ev(1), _ev(3)])
    assert [e["seq"] for e in await any_store.events("run-a", after_seq=1)] == [2, 3]


async def test_compaction_is_per_run(any_store: Store) -> None:
    await any_store.record_events("run-a", [_ev(0), _ev(1)])
    await any_store.record_events("run-b", [_ev(0), _ev(1)])
    await any_store.compact_events("run-a", 1)
    assert len(await any_store.events("run-b")) == 2


@pytest.mark.parametrize("bad", [-1, "1", 1.5, True])
async def test_bad_compaction_and_read_bounds(any_store: Store, bad: Any) -> None:
    with pytest.raises(InvalidArgument, match="before_seq"):
        await any_store.compact_events("run-a", bad)
    if bad != -1:
        with pytest.raises(InvalidArgument, match="after_seq"):
            await any_store.events("run-a", after_seq=bad)


# -- run records --------------------------------------------------------------------------------


def _record(run_id: str, **fields: Any) -> dict[str, Any]:
    return {"run_id": run_id, "thread_id": f"thread-{run_id}", "graph_id": "g",
            "revision": "rev-x", "status": "running", "started_at": T0, "updated_at": T0,
            "error": None, "tenant_id": None, **fields}


async def test_run_records_upsert_by_run_id(any_store: Store) -> None:
    await any_store.record_run(_record("run-b"))
    await any_store.record_run(_record("run-a"))
    await any_store.record_run({"run_id": "run-b", "status": "failed", "updated_at": _at(5),
                                "error": {"type": "NodeFailed", "message": "boom"}})
    b = await any_store.run("run-b")
    assert b == {**_record("run-b"), "status": "failed", "started_at": "2025-01-01T00:00:00Z",
                 "updated_at": "2025-01-01T00:00:05Z",
                 "error": {"type": "NodeFailed", "message": "boom"}}
    assert [r["run_id"] for r in await any_store.runs()] == ["run-b", "run-a"]
    assert await any_store.run("run-unknown") is None


async def test_run_records_are_copies(any_store: Store) -> None:
    record = _record("run-a", error={"details": [1]})
    await any_store.record_run(record)
    record["error"]["details"].append(2)
    got = await any_store.run("run-a")
    assert got is not None
    assert got["error"] == {"details": [1]}
    got["error"]["details"].append(3)
    assert (await any_store.runs())[0]["error"] == {"details": [1]}


@pytest.mark.parametrize(
    "record",
    [{"status": "running"}, {"run_id": ""}, {"run_id": 3}, "run-a",
     {"run_id": "run-a", "x": object()}],
    ids=["no-run-id", "empty-run-id", "int-run-id", "not-a-dict", "not-json"],
)
async def test_bad_run_records_are_refused(any_store: Store, record: Any) -> None:
    with pytest.raises(InvalidArgument, match="record_run"):
        await any_store.record_run(record)
    assert await any_store.runs() == []


# -- artifacts ----------------------------------------------------------------------------------


async def test_artifacts(any_store: Store) -> None:
    await any_store.put_artifact("run-a", "trace.bin", b"\x00\x01")
    await any_store.put_artifact("run-a", "report.md", "héllo", "text/markdown")
    await any_store.put_artifact("run-b", "trace.bin", b"other")
    assert await any_store.get_artifact("run-a", "trace.bin") == b"\x00\x01"
    assert await any_store.get_artifact("run-a", "report.md") == "héllo".encode()
    assert await any_store.artifacts("run-a") == [
        {"name": "trace.bin", "media_type": "application/octet-stream", "size": 2},
        {"name": "report.md", "media_type": "text/markdown", "size": 6},
    ]
    await any_store.put_artifact("run-a", "trace.bin", b"longer", "application/x-trace")
    assert await any_store.get_artifact("run-a", "trace.bin") == b"longer"
    assert (await any_store.artifacts("run-a"))[0] == {
        "name": "trace.bin", "media_type": "application/x-trace", "size": 6}
    assert await any_store.get_artifact("run-a", "missing") is None
    assert await any_store.artifacts("run-unknown") == []


@pytest.mark.parametrize(
    ("name", "data", "media_type"),
    [("", b"x", "a/b"), ("n", 3, "a/b"), ("n", b"x", ""), (None, b"x", "a/b")],
    ids=["empty-name", "int-data", "empty-media-type", "none-name"],
)
async def test_bad_artifacts_are_refused(
    any_store: Store, name: Any, data: Any, media_type: Any
) -> None:
    with pytest.raises(InvalidArgument, match="put_artifact"):
        await any_store.put_artifact("run-a", name, data, media_type)
    assert await any_store.artifacts("run-a") == []


# -- claims with fencing tokens -----------------------------------------------------------------


async def test_claim_returns_strictly_increasing_tokens(any_store: Store) -> None:
    first = await any_store.claim("thread-a", "run-a", now=T0)
    # SPEC §5: a claim belongs to the holder of its token, not to a run id — the same run
    # asking again (another process resuming it) is refused while the claim lives.
    with pytest.raises(ThreadBusy) as busy:
        await any_store.claim("thread-a", "run-a", now=_at(1))
    assert busy.value.holder == "run-a"
    again = await any_store.claim("thread-a", "run-a", now=_at(30))  # expired: taken again
    assert again > first
    assert await any_store.current_claim("thread-a") == ("run-a", again, _at(60))
    with pytest.raises(StaleClaim) as stale:
        await any_store.renew("thread-a", first, now=_at(31))
    assert (stale.value.thread_id, stale.value.token, stale.value.current) == (
        "thread-a", first, again)


async def test_another_run_is_refused_while_the_claim_lives(any_store: Store) -> None:
    token = await any_store.claim("thread-a", "run-a", now=T0, ttl=10)
    with pytest.raises(ThreadBusy) as busy:
        await any_store.claim("thread-a", "run-b", now=_at(9.999))
    assert (busy.value.thread_id, busy.value.holder) == ("thread-a", "run-a")
    assert "run-a" in str(busy.value)
    assert await any_store.current_claim("thread-a") == ("run-a", token, _at(10))
    other = await any_store.claim("thread-b", "run-b", now=_at(1))  # threads are independent
    assert await any_store.current_claim("thread-b") == ("run-b", other, _at(31))


async def test_an_expired_claim_is_taken_over_and_the_loser_is_fenced(any_store: Store) -> None:
    old = await any_store.claim("thread-a", "run-a", now=T0, ttl=10)
    new = await any_store.claim("thread-a", "run-b", now=_at(10))  # expiry is exclusive
    assert new > old
    with pytest.raises(StaleClaim) as stale:
        await any_store.renew("thread-a", old, now=_at(11))
    assert stale.value.current == new
    with pytest.raises(StaleClaim):
        await any_store.release("thread-a", old)
    assert await any_store.current_claim("thread-a") == ("run-b", new, _at(40))


async def test_renew_extends_the_claim_by_its_ttl(any_store: Store) -> None:
    token = await any_store.claim("thread-a", "run-a", now=T0, ttl=30)
    await any_store.renew("thread-a", token, now=_at(20))
    assert await any_store.current_claim("thread-a") == ("run-a", token, _at(50))
    with pytest.raises(ThreadBusy):
        await any_store.claim("thread-a", "run-b", now=_at(40))
    assert await any_store.claim("thread-a", "run-b", now=_at(50)) > token


async def test_an_expired_claim_nobody_took_can_still_be_renewed(any_store: Store) -> None:
    token = await any_store.claim("thread-a", "run-a", now=T0, ttl=5)
    await any_store.renew("thread-a", token, now=_at(100))
    with pytest.raises(ThreadBusy):
        await any_store.claim("thread-a", "run-b", now=_at(101))


async def test_release_frees_the_thread_at_once(any_store: Store) -> None:
    token = await any_store.claim("thread-a", "run-a", now=T0)
    await any_store.release("thread-a", token)
    assert await any_store.current_claim("thread-a") is None
    with pytest.raises(StaleClaim) as stale:
        await any_store.release("thread-a", token)
    assert stale.value.current is None
    with pytest.raises(StaleClaim):
        await any_store.renew("thread-a", token, now=_at(1))
    after = await any_store.claim("thread-a", "run-b", now=_at(1))
    assert after > token  # tokens keep increasing after a release


async def test_unknown_threads_have_no_claim(any_store: Store) -> None:
    assert await any_store.current_claim("thread-none") is None
    with pytest.raises(StaleClaim) as stale:
        await any_store.release("thread-none", 1)
    assert stale.value.current is None


async def test_claims_compare_instants_across_time_zones(any_store: Store) -> None:
    plus2 = timezone(timedelta(hours=2))
    token = await any_store.claim("thread-a", "run-a", now=T0, ttl=60)
    with pytest.raises(ThreadBusy):  # 02:00:59+02:00 is 00:00:59Z
        await any_store.claim("thread-a", "run-b", now=datetime(2025, 1, 1, 2, 0, 59,
                                                               tzinfo=plus2))
    claim = await any_store.current_claim("thread-a")
    assert claim == ("run-a", token, _at(60))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"now": datetime(2025, 1, 1)}, "timezone-aware"), ({"now": "2025-01-01"}, "now"),
     ({"now": T0, "ttl": 0}, "ttl"), ({"now": T0, "ttl": -5}, "ttl")],
    ids=["naive-now", "str-now", "zero-ttl", "negative-ttl"],
)
async def test_bad_claim_arguments(any_store: Store, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        await any_store.claim("thread-a", "run-a", **kwargs)
    assert await any_store.current_claim("thread-a") is None


async def test_bad_token_and_now_on_renew_and_release(any_store: Store) -> None:
    token = await any_store.claim("thread-a", "run-a", now=T0)
    with pytest.raises(InvalidArgument, match="token"):
        await any_store.renew("thread-a", str(token), now=T0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="timezone-aware"):
        await any_store.renew("thread-a", token, now=datetime(2025, 1, 1))
    with pytest.raises(InvalidArgument, match="token"):
        await any_store.release("thread-a", None)  # type: ignore[arg-type]


# -- retention ----------------------------------------------------------------------------------


async def test_prune_keeps_the_newest(any_store: Store, make_cp: MakeCheckpoint) -> None:
    for cid, at in [("cp-3", 3), ("cp-1", 1), ("cp-2b", 2), ("cp-2a", 2)]:
        await any_store.save(make_cp(cid, at=at))
    await any_store.save(make_cp("cp-other", run="run-b"))
    assert await any_store.prune("run-a", 2) == 2
    assert [c.id for c in await any_store.list("run-a")] == ["cp-2a", "cp-3"]
    assert await any_store.prune("run-a", 5) == 0
    assert await any_store.prune("run-a", 0) == 2
    assert await any_store.latest("run-a") is None
    assert [c.id for c in await any_store.list()] == ["cp-other"]
    assert await any_store.prune("run-unknown", 1) == 0


async def test_history_pages_back_the_same_on_every_store(
    any_store: Store, make_cp: MakeCheckpoint
) -> None:
    for cid, at in [("cp-1", 1), ("cp-2a", 2), ("cp-2b", 2), ("cp-3", 3), ("cp-4", 4)]:
        await any_store.save(make_cp(cid, at=at))
    await any_store.save(make_cp("cp-other", run="run-b", at=9))
    assert any_store.pages_history
    page = await any_store.list("run-a", limit=2)
    assert [c.id for c in page] == ["cp-3", "cp-4"]
    page = await any_store.list("run-a", limit=2, before=page[0].id)
    assert [c.id for c in page] == ["cp-2a", "cp-2b"]  # equal times: in save order
    page = await any_store.list("run-a", limit=2, before=page[0].id)
    assert [c.id for c in page] == ["cp-1"]
    assert [c.id for c in await any_store.list(before="cp-2b")] == ["cp-1", "cp-2a"]


@pytest.mark.parametrize("keep_last", [-1, 1.5, "2", None])
async def test_bad_keep_last(any_store: Store, keep_last: Any) -> None:
    with pytest.raises(InvalidArgument, match="keep_last"):
        await any_store.prune("run-a", keep_last)


# -- the in-memory store itself -----------------------------------------------------------------


async def test_in_memory_claim_ttl_and_context_managers() -> None:
    assert InMemoryCheckpointStore().claim_ttl == 30.0
    with InMemoryCheckpointStore(claim_ttl=5) as store:
        token = await store.claim("thread-a", "run-a", now=T0)
        assert await store.current_claim("thread-a") == ("run-a", token, _at(5))
    async with InMemoryCheckpointStore() as again:
        again.close()
        assert await again.events("run-a") == []
    with pytest.raises(InvalidArgument, match="ttl"):
        InMemoryCheckpointStore(claim_ttl=0)
