"""The PostgreSQL store's folded claims (``StoreFeatures.folded_claims``, issue 29): a new
run's free-run-id read rides on its claim (``claim_fresh``) and a leg's release on its last
commit (``commit(..., release=True)``): round trips of a one-node run 5 -> 3, calls of one
(sync, cProfile) 574 -> 527. The runs store the bytes, draw the run ids and raise the errors
of the unfolded path (``latest``, ``claim``, ``release``), and a commit that writes nothing
releases nothing (seed 004)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from graphflow_chains import counting_chain
from graphflow_folded import every_leg_kind, paused_approval
from graphflow_postgres import stored_rows
from pytest_graphflow import (
    FaultyStore,
    GraphRuntime,
    ParentNotLatest,
    PostgresCheckpointStore,
    Resume,
    StaleClaim,
    ThreadBusy,
    VirtualClock,
)
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._records._json import DumpedEvents
from pytest_graphflow._stores._features import features_of
from pytest_graphflow._stores.postgres._conn import run_now

MakeStore = Callable[..., PostgresCheckpointStore]
MakeCheckpoint = Callable[..., Checkpoint]
T0 = datetime(2025, 1, 1, tzinfo=UTC)


class _Unfolded(PostgresCheckpointStore):
    """The store without the feature: the runtime reads, claims and releases apart."""

    features = replace(PostgresCheckpointStore.features, folded_claims=False)


def _released(row: str) -> bool:
    """Whether a claims row (its text) is released: no run, expiry nor ttl."""
    _thread, run, token, expires, ttl = row.strip("()").split(",")
    return (run, expires, ttl) == ("", "", "") and int(token) > 0


def test_runs_store_the_bytes_and_draw_the_ids_of_the_unfolded_path(
    make_pg_store: MakeStore, pg_schema: str, postgres_dsn: str
) -> None:
    found = []
    for cls in (PostgresCheckpointStore, _Unfolded):
        store = cls(postgres_dsn, schema=f"{pg_schema}_{cls.__name__.lower()}")
        try:
            assert features_of(store).folded_claims is (cls is PostgresCheckpointStore)
            seen = every_leg_kind(store)
            rows = stored_rows(store)
            store.drop()
        finally:
            store.close()
        found.append((seen, rows))
    (seen, rows), (seen_unfolded, rows_unfolded) = found
    assert "UpdateRejected" in seen, seen
    assert "MidExecution" in seen, seen
    assert seen == seen_unfolded
    assert all(rows[table] for table in ("checkpoints", "events", "runs", "claims"))
    assert all(_released(claim) for claim in rows["claims"])
    assert rows == rows_unfolded


def test_async_runs_on_the_pool_store_what_the_unfolded_path_stores(
    pg_schema: str, postgres_dsn: str
) -> None:
    async def runs(cls: type[PostgresCheckpointStore]) -> tuple[list[str], dict[str, Any]]:
        async with cls(postgres_dsn, schema=f"{pg_schema}_a{cls.__name__.lower()}") as store:
            assert store._pg._pool is not None
            seen = []
            for _ in range(2):
                runtime = GraphRuntime(store, clock=VirtualClock(), seed=3)
                seen.append((await runtime.ainvoke(counting_chain("chain", 2), {})).run_id)
                paused = await runtime.ainvoke(paused_approval(), {}, thread_id="t")
                done = await runtime.aresume(paused.run_id, Resume("ok"))
                seen.append(f"{paused.status} {done.status} {done.data}")
            rows = stored_rows(store)
            store.drop()
        return seen, rows

    folded = asyncio.run(runs(PostgresCheckpointStore))
    assert folded == asyncio.run(runs(_Unfolded))
    assert all(_released(claim) for claim in folded[1]["claims"])


def test_claim_fresh_claims_only_for_a_run_id_without_checkpoints(
    make_pg_store: MakeStore, make_cp: MakeCheckpoint
) -> None:
    store = make_pg_store()
    token = run_now(store.claim_fresh("t-1", "run-a", now=T0, ttl=10))
    assert token is not None
    assert run_now(store.current_claim("t-1")) == ("run-a", token, T0 + timedelta(seconds=10))
    run_now(store.commit("t-1", token, run_id="run-a",
                         checkpoints=[make_cp("cp-1", run="run-a", thread="t-1")]))
    # A taken run id: nothing written, whatever the thread (new, held, free).
    for thread in ("t-2", "t-1"):
        assert run_now(store.claim_fresh(thread, "run-a", now=T0, ttl=10)) is None
    assert run_now(store.current_claim("t-2")) is None
    assert run_now(store.current_claim("t-1")) == ("run-a", token, T0 + timedelta(seconds=10))
    run_now(store.release("t-1", token))
    assert run_now(store.claim_fresh("t-1", "run-a", now=T0)) is None
    assert run_now(store.current_claim("t-1")) is None
    # A free run id: claim()'s answers (a next token; a live claim refused).
    again = run_now(store.claim_fresh("t-1", "run-b", now=T0, ttl=10))
    assert again == token + 1
    with pytest.raises(ThreadBusy):
        run_now(store.claim_fresh("t-1", "run-c", now=T0 + timedelta(seconds=5)))
    later = run_now(store.claim_fresh("t-1", "run-c", now=T0 + timedelta(seconds=11)))
    assert later == token + 2  # the expired claim taken over
    assert run_now(store.current_claim("t-2")) is None


def _piece(make_cp: MakeCheckpoint, cid: str, parent: str | None,
           thread: str = "t-1") -> dict[str, Any]:
    cp = make_cp(cid, run="run-a", thread=thread, parent_id=parent, at=int(cid[-1]))
    return {"run_id": "run-a", "checkpoints": [cp], "events": DumpedEvents(
        [{"seq": int(cid[-1]), "run_id": "run-a", "type": "checkpoint_saved",
          "checkpoint_id": cid}])}


def test_a_commit_that_releases_frees_the_claim_only_when_it_writes(
    make_pg_store: MakeStore, make_cp: MakeCheckpoint
) -> None:
    store = make_pg_store()
    token = run_now(store.claim("t-1", "run-a", now=T0, ttl=10))
    run_now(store.commit("t-1", token, **_piece(make_cp, "cp-1", None)))
    # Refused (a parent that is not the thread's latest): nothing written, nothing released.
    with pytest.raises(ParentNotLatest):
        run_now(store.commit("t-1", token, release=True,
                             **_piece(make_cp, "cp-2", "cp-0")))
    assert run_now(store.current_claim("t-1")) is not None
    # A stale token: refused, the holder's claim kept.
    with pytest.raises(StaleClaim):
        run_now(store.commit("t-1", token + 1, release=True,
                             **_piece(make_cp, "cp-2", "cp-1")))
    assert run_now(store.current_claim("t-1")) == ("run-a", token, T0 + timedelta(seconds=10))
    # Written: released in the same statement.
    run_now(store.commit("t-1", token, release=True, **_piece(make_cp, "cp-2", "cp-1")))
    assert run_now(store.latest("run-a")).id == "cp-2"  # type: ignore[union-attr]
    assert run_now(store.current_claim("t-1")) is None
    with pytest.raises(StaleClaim):  # released: the token holds nothing
        run_now(store.release("t-1", token))
    assert run_now(store.claim("t-1", "run-b", now=T0)) == token + 1


def test_a_commit_that_releases_through_the_transaction_path_releases_too(
    make_pg_store: MakeStore, make_cp: MakeCheckpoint
) -> None:
    """A checkpoint id already stored makes the statement fail (it inserts): the commit's
    transaction upserts it, and releases the claim in that transaction."""
    store = make_pg_store()
    token = run_now(store.claim("t-1", "run-a", now=T0, ttl=10))
    run_now(store.commit("t-1", token, **_piece(make_cp, "cp-1", None)))
    run_now(store.commit("t-1", token, release=True, **_piece(make_cp, "cp-1", None)))
    assert run_now(store.current_claim("t-1")) is None
    # And refused there (the claim taken over meanwhile): the other's claim stays.
    other = run_now(store.claim("t-1", "run-b", now=T0))
    with pytest.raises(StaleClaim):
        run_now(store.commit("t-1", token, release=True,
                             **_piece(make_cp, "cp-1", None)))
    assert run_now(store.current_claim("t-1"))[:2] == ("run-b", other)  # type: ignore[index]


def test_a_wrapper_keeps_the_calls_its_rules_watch(make_pg_store: MakeStore) -> None:
    """A ``FaultyStore`` over the store does not fold: its rules see ``latest``, ``claim``
    and ``release`` (a kill at each of them stays possible)."""
    store = make_pg_store()
    faulty = FaultyStore(store)
    assert features_of(store).folded_claims
    assert not features_of(faulty).folded_claims
    start = faulty.call_count
    GraphRuntime(faulty, clock=VirtualClock(), seed=1).invoke(counting_chain("chain", 1))
    names = [call.op for call in faulty.calls_since(start)]
    assert names[:2] == ["latest", "claim"], names
    assert names[-1] == "release", names


_COUNT = """
import cProfile, gc, pstats, sys
from pydantic import BaseModel
from pytest_graphflow import END, START, Graph, GraphRuntime, PostgresCheckpointStore
from pytest_graphflow import VirtualClock

class S(BaseModel):
    n: int = 0

g = Graph("one", S)
g.node("a", lambda s: {"n": s.n + 1}).edge(START, "a").edge("a", END)
graph = g.compile(checkpoint_policy="every_step")

def calls(fn):
    gc.collect()
    gc.disable()
    try:
        profile = cProfile.Profile()
        profile.enable()
        fn()
        profile.disable()
    finally:
        gc.enable()
    return pstats.Stats(profile).total_calls

with PostgresCheckpointStore(sys.argv[1], schema=sys.argv[2]) as store:
    runtime = GraphRuntime(store, clock=VirtualClock(), seed=0)
    for _ in range(8):  # warm: the connection, the statements prepared
        runtime.invoke(graph)
    print(min(calls(lambda: runtime.invoke(graph)) for _ in range(3)))
"""


def test_calls_a_one_node_run_on_the_sync_connection(
    postgres_dsn: str, pg_schema: str
) -> None:
    """What the client does for a one-node run, counted (cProfile, in a process of its
    own: what other tests imported changes the count): 574 calls with the free-run-id read,
    the claim and the release apart; 527 folded; 541 at 287667c, 513 with fetch_one's
    common cases inline (pg9); 523 with the run record's change, a step statement's answer
    and a path's shape and block each one function, shared with the sent commits (s42);
    525 with the run's path handed over as its snapshot (s44: a short path's row reads it
    as a tuple)."""
    found = subprocess.run([sys.executable, "-c", _COUNT, postgres_dsn, pg_schema],
                           capture_output=True, text=True, timeout=120, check=False)
    assert found.returncode == 0, found.stderr
    calls = int(found.stdout)
    assert calls <= 526, calls
