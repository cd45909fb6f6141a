"""Seed 004's commit checks, by the shared rule every store uses
(``_claims.check_lineage``), on the in-memory, SQLite and PostgreSQL stores and both anyio
backends: a write under a claim goes on from the thread's latest checkpoint
(``ParentNotLatest``), and a commit's events are in order and name only the checkpoints it
writes or the thread's latest (``MalformedCommit``). A refused write changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    CompiledGraph,
    Graph,
    GraphRuntime,
    InvalidArgument,
    MalformedCommit,
    ParentNotLatest,
    VirtualClock,
)
from pytest_graphflow._records._checkpoint import Checkpoint

MakeCheckpoint = Callable[..., Checkpoint]
T0 = datetime(2025, 1, 1, tzinfo=UTC)

pytestmark = pytest.mark.anyio

SEED_PARENT = ("A new checkpoint's parent is not the thread's latest: another writer advanced "
               "the thread.")
SEED_MALFORMED = ("A commit is malformed, such as a pending write naming a checkpoint other "
                  "than the latest.")


def _ev(seq: int, **fields: Any) -> dict[str, Any]:
    return {"seq": seq, "run_id": "run-a", "type": "custom", **fields}


def _saved(seq: int, checkpoint_id: str) -> dict[str, Any]:
    return _ev(seq, type="checkpoint_saved", checkpoint_id=checkpoint_id)


async def _rows(store: Any) -> tuple[Any, ...]:
    return ([c.model_dump(mode="json") for c in await store.list(thread_id="thread-a")],
            await store.events("run-a"), await store.run("run-a"))


async def _thread(store: Any, make_cp: MakeCheckpoint) -> int:
    """``thread-a`` holding cp-1 then cp-2 (its latest) and events 0..2, claimed; the token."""
    token = await store.claim("thread-a", "run-a", now=T0)
    await store.commit("thread-a", token, run_id="run-a",
                       checkpoints=[make_cp("cp-1", at=1),
                                    make_cp("cp-2", at=2, parent_id="cp-1")],
                       events=[_ev(0), _saved(1, "cp-1"), _saved(2, "cp-2")],
                       run={"run_id": "run-a", "status": "running"})
    return token


def _cp3(make_cp: MakeCheckpoint, parent: str | None, **extra: Any) -> Checkpoint:
    return make_cp("cp-3", at=3, parent_id=parent, **extra)


STALE_PARENTS: list[tuple[str, Callable[[Any, int, MakeCheckpoint], Any]]] = [
    ("commit-parent-is-an-older-checkpoint", lambda s, t, mk: s.commit(
        "thread-a", t, run_id="run-a", checkpoints=[_cp3(mk, "cp-1")], events=[_ev(3)])),
    ("fenced-save-parent-is-an-older-checkpoint", lambda s, t, mk: s.save(
        _cp3(mk, "cp-1"), fence=("thread-a", t))),
    ("commit-parent-the-thread-never-had", lambda s, t, mk: s.commit(
        "thread-a", t, run_id="run-a", checkpoints=[_cp3(mk, "cp-9")])),
    ("commit-second-checkpoint-skips-the-first", lambda s, t, mk: s.commit(
        "thread-a", t, run_id="run-a",
        checkpoints=[_cp3(mk, "cp-2"), mk("cp-4", at=4, parent_id="cp-2")])),
]


@pytest.mark.parametrize("write", [w for _, w in STALE_PARENTS],
                         ids=[i for i, _ in STALE_PARENTS])
async def test_a_write_whose_parent_is_not_the_threads_latest_is_refused_changing_nothing(
    any_store: Any, make_cp: MakeCheckpoint, write: Any
) -> None:
    assert ParentNotLatest.__doc__ is not None
    assert ParentNotLatest.__doc__.startswith(SEED_PARENT)
    token = await _thread(any_store, make_cp)
    before = await _rows(any_store)
    with pytest.raises(ParentNotLatest) as info:
        await write(any_store, token, make_cp)
    err = info.value
    assert err.thread_id == "thread-a"
    assert err.latest in ("cp-2", "cp-3")  # the thread's, or the commit's own before it
    assert err.parent_id != err.latest
    assert "another writer advanced the thread" in str(err)
    assert await _rows(any_store) == before


SOUND_WRITES: list[tuple[str, Callable[[Any, int, MakeCheckpoint], Any]]] = [
    ("commit-after-the-latest", lambda s, t, mk: s.commit(
        "thread-a", t, run_id="run-a", checkpoints=[_cp3(mk, "cp-2")], events=[_ev(3)])),
    ("fenced-save-after-the-latest", lambda s, t, mk: s.save(
        _cp3(mk, "cp-2"), fence=("thread-a", t))),
    ("commit-of-a-chain", lambda s, t, mk: s.commit(
        "thread-a", t, run_id="run-a",
        checkpoints=[_cp3(mk, "cp-2"), mk("cp-4", at=4, parent_id="cp-3")])),
    ("a-branch-marked-as-such", lambda s, t, mk: s.commit(
        "thread-a", t, run_id="run-a",
        checkpoints=[_cp3(mk, "cp-1", metadata={"branch": True})])),
    ("no-parent", lambda s, t, mk: s.save(_cp3(mk, None), fence=("thread-a", t))),
    ("the-latest-rewritten", lambda s, t, mk: s.save(
        mk("cp-2", at=2, parent_id="cp-1", state={"n": 5}), fence=("thread-a", t))),
    ("a-plain-save-is-not-a-claimed-write", lambda s, t, mk: s.save(_cp3(mk, "cp-1"))),
]


@pytest.mark.parametrize("write", [w for _, w in SOUND_WRITES],
                         ids=[i for i, _ in SOUND_WRITES])
async def test_a_write_that_goes_on_from_the_latest_is_accepted(
    any_store: Any, make_cp: MakeCheckpoint, write: Any
) -> None:
    token = await _thread(any_store, make_cp)
    await write(any_store, token, make_cp)
    ids = [c.id for c in await any_store.list(thread_id="thread-a")]
    assert ids[:2] == ["cp-1", "cp-2"]


async def test_a_writer_that_read_the_thread_before_another_advanced_it_gets_parent_not_latest(
    any_store: Any, make_cp: MakeCheckpoint
) -> None:
    """The claim does not cover what a writer read before it claimed: it names that
    checkpoint as its parent, and the store refuses it once another writer went on."""
    token = await _thread(any_store, make_cp)
    seen = (await any_store.list(thread_id="thread-a"))[-1].id  # writer A reads: cp-2
    await any_store.commit("thread-a", token, run_id="run-a",  # writer B goes on
                           checkpoints=[_cp3(make_cp, "cp-2")], events=[_saved(3, "cp-3")])
    await any_store.release("thread-a", token)
    mine = await any_store.claim("thread-a", "run-a", now=T0 + timedelta(seconds=5))
    before = await _rows(any_store)
    with pytest.raises(ParentNotLatest) as info:
        await any_store.commit("thread-a", mine, run_id="run-a",
                               checkpoints=[make_cp("cp-a", at=4, parent_id=seen)],
                               events=[_saved(4, "cp-a")])
    assert (info.value.checkpoint_id, info.value.parent_id, info.value.latest) == (
        "cp-a", "cp-2", "cp-3")
    assert await _rows(any_store) == before


MALFORMED: list[tuple[str, list[Any], list[dict[str, Any]], str]] = [
    ("events-out-of-order", [], [_ev(4), _ev(3)], "seq=3 follows seq=4"),
    ("the-same-seq-twice", [], [_ev(3), _ev(3)], "seq=3 follows seq=3"),
    ("a-saved-event-naming-an-older-checkpoint", [], [_saved(3, "cp-1")],
     "says checkpoint 'cp-1' was saved"),
    ("a-saved-event-naming-a-checkpoint-not-written", ["cp-3"], [_saved(3, "cp-9")],
     "says checkpoint 'cp-9' was saved"),
]


@pytest.mark.parametrize(("cps", "events", "says"), [m[1:] for m in MALFORMED],
                         ids=[m[0] for m in MALFORMED])
async def test_a_malformed_commit_is_refused_changing_nothing(
    any_store: Any, make_cp: MakeCheckpoint, cps: list[str], events: list[dict[str, Any]],
    says: str,
) -> None:
    assert MalformedCommit.__doc__ is not None
    assert MalformedCommit.__doc__.startswith(SEED_MALFORMED)
    token = await _thread(any_store, make_cp)
    before = await _rows(any_store)
    with pytest.raises(MalformedCommit) as info:
        await any_store.commit("thread-a", token, run_id="run-a",
                               checkpoints=[_cp3(make_cp, "cp-2") for _ in cps], events=events,
                               run={"run_id": "run-a", "status": "completed"})
    assert isinstance(info.value, InvalidArgument)
    assert says in str(info.value)
    assert "Nothing was written" in str(info.value)
    assert await _rows(any_store) == before


@pytest.mark.parametrize(("cps", "events"), [
    pytest.param(["cp-3"], [_saved(3, "cp-3"), _ev(4)], id="naming-its-own-checkpoint"),
    pytest.param([], [_saved(3, "cp-2")], id="naming-the-latest"),
    pytest.param([], [_ev(3), _ev(7)], id="seq-with-gaps-in-order"),
])
async def test_a_well_formed_commit_is_written(
    any_store: Any, make_cp: MakeCheckpoint, cps: list[str], events: list[dict[str, Any]]
) -> None:
    token = await _thread(any_store, make_cp)
    await any_store.commit("thread-a", token, run_id="run-a",
                           checkpoints=[_cp3(make_cp, "cp-2") for _ in cps], events=events)
    assert [e["seq"] for e in await any_store.events("run-a")][3:] == [e["seq"] for e in events]


# -- the runtime's own writes ------------------------------------------------------------------


class _N(BaseModel):
    n: int = 0


async def _slow_inc(state: _N) -> dict[str, Any]:
    await anyio.sleep(10)
    return {"n": state.n + 1}


def _four() -> CompiledGraph:
    g = Graph("four", _N)
    for name in "abcd":
        g.node(name, _slow_inc)
    g.edge(START, "a")
    g.edge("a", "b")
    g.edge("b", "c")
    g.edge("c", "d")
    g.edge("d", END)
    return g.compile()


async def test_time_travel_from_a_fresh_runtime_branches_and_its_end_is_the_threads_latest(
    any_store: Any,
) -> None:
    """A branch goes on from an earlier checkpoint on purpose: its first checkpoint says so
    (``metadata["branch"]``), a fresh virtual clock goes on from the thread's latest, and
    every checkpoint of the branch goes on from the thread's latest — the last one is it."""
    graph = _four()
    first = await GraphRuntime(any_store, clock=VirtualClock(), seed=1).ainvoke(
        graph, {}, thread_id="t")
    old = await any_store.list(thread_id="t")
    fresh = GraphRuntime(any_store, clock=VirtualClock(), seed=2)
    ended = await fresh.aupdate_state(old[3].id, {"n": 50}, as_node="d", graph=graph)
    assert (await any_store.list(thread_id="t"))[-1].id == ended  # the branch is the latest
    updated = await fresh.aupdate_state(old[1].id, {"n": 100}, graph=graph)
    again = await fresh.aresume(updated, graph=graph)
    assert (again.status, again.state.n) == ("completed", 103)
    later = await GraphRuntime(any_store, clock=VirtualClock(), seed=3).aresume(
        old[2].id, graph=graph)
    assert (later.status, later.state.n) == ("completed", 4)
    history = await any_store.list(thread_id="t")
    assert history[-1].id == later.checkpoint_id
    branched = [cp.id for cp in history if cp.metadata.get("branch")]
    assert branched[:2] == [ended, updated]
    assert len(branched) == 3  # the updates, and the first checkpoint of the last branch
    assert first.checkpoint_id in {cp.id for cp in history}
