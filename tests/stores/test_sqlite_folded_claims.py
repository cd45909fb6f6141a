"""The SQLite store's folded claims (``StoreFeatures.folded_claims``, issue 29): a new run's
free-run-id read rides on its claim's transaction (``claim_fresh``) and a leg's release on
its last commit (``commit(..., release=True)``): transactions of a run 7 -> 5. The runs
store the bytes, draw the run ids and raise the errors of the unfolded path (``latest``,
``claim``, ``release``), a commit that writes nothing releases nothing (seed 004), and a
released token commits nothing more."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from graphflow_chains import counting_chain
from graphflow_folded import every_leg_kind
from graphflow_sqlite import sqlite_rows
from pytest_graphflow import (
    GraphRuntime,
    ParentNotLatest,
    SQLiteCheckpointStore,
    StaleClaim,
    ThreadBusy,
    VirtualClock,
)
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._records._json import DumpedEvents
from pytest_graphflow._stores._features import features_of

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 1, 1, tzinfo=UTC)


class _Unfolded(SQLiteCheckpointStore):
    """The store without the feature: the runtime reads, claims and releases apart."""

    features = replace(SQLiteCheckpointStore.features, folded_claims=False)


def test_runs_store_the_bytes_and_draw_the_ids_of_the_unfolded_path(tmp_path: Path) -> None:
    found = []
    for cls in (SQLiteCheckpointStore, _Unfolded):
        path = tmp_path / f"{cls.__name__}.db"
        with cls(path) as store:
            assert features_of(store).folded_claims is (cls is SQLiteCheckpointStore)
            seen = every_leg_kind(store)
        found.append((seen, sqlite_rows(path)))
    (seen, rows), (seen_unfolded, rows_unfolded) = found
    assert "UpdateRejected" in seen, seen
    assert "MidExecution" in seen, seen
    assert seen == seen_unfolded
    assert all(rows[table] for table in ("log", "runs", "claims"))
    assert all(run is None and token > 0 for _thread, run, token, *_ in rows["claims"])
    assert rows == rows_unfolded


def test_a_run_takes_five_transactions_not_seven(tmp_path: Path) -> None:
    # the free-run-id read (a read transaction) and the release (a write one) ride on the
    # claim's transaction and the last commit's
    counted: dict[str, int] = {}
    for cls in (SQLiteCheckpointStore, _Unfolded):
        with cls(tmp_path / f"{cls.__name__}.db") as store:
            runtime = GraphRuntime(store, clock=VirtualClock(), seed=1)
            runtime.invoke(counting_chain("chain", 3))
            statements: list[str] = []
            store._conn.set_trace_callback(statements.append)
            runtime.invoke(counting_chain("chain", 3))
            store._conn.set_trace_callback(None)
        counted[cls.__name__] = sum(s.startswith("BEGIN") for s in statements)
    assert counted == {"SQLiteCheckpointStore": 5, "_Unfolded": 7}


def _cp(cid: str, parent: str | None, run: str = "run-a", thread: str = "t-1") -> Checkpoint:
    return Checkpoint(id=cid, run_id=run, thread_id=thread, graph_id="g", revision="rev-x",
                      step=int(cid[-1]), timestamp=T0 + timedelta(seconds=int(cid[-1])),
                      state={"n": 1}, parent_id=parent)


def _piece(cid: str, parent: str | None) -> dict[str, Any]:
    return {"run_id": "run-a", "checkpoints": [_cp(cid, parent)], "events": DumpedEvents(
        [{"seq": int(cid[-1]), "run_id": "run-a", "type": "checkpoint_saved",
          "checkpoint_id": cid}])}


async def test_claim_fresh_claims_only_for_a_run_id_without_checkpoints(tmp_path: Path) -> None:
    with SQLiteCheckpointStore(tmp_path / "s.db") as store:
        token = await store.claim_fresh("t-1", "run-a", now=T0, ttl=10)
        assert token is not None
        assert await store.current_claim("t-1") == ("run-a", token, T0 + timedelta(seconds=10))
        await store.commit("t-1", token, **_piece("cp-1", None))  # in the log's live rows
        # A taken run id: nothing written, whatever the thread (new, held, free).
        for thread in ("t-2", "t-1"):
            assert await store.claim_fresh(thread, "run-a", now=T0, ttl=10) is None
        assert await store.current_claim("t-2") is None
        assert await store.current_claim("t-1") == ("run-a", token, T0 + timedelta(seconds=10))
        await store.release("t-1", token)
        assert await store.claim_fresh("t-1", "run-a", now=T0) is None
        store.vacuum()  # folded into the indexed table: still taken
        assert await store.claim_fresh("t-1", "run-a", now=T0) is None
        assert await store.current_claim("t-1") is None
        # A free run id: claim()'s answers (a next token; a live claim refused).
        again = await store.claim_fresh("t-1", "run-b", now=T0, ttl=10)
        assert again == token + 1
        with pytest.raises(ThreadBusy):
            await store.claim_fresh("t-1", "run-c", now=T0 + timedelta(seconds=5))
        later = await store.claim_fresh("t-1", "run-c", now=T0 + timedelta(seconds=11))
        assert later == token + 2  # the expired claim taken over
        assert await store.current_claim("t-2") is None


async def test_a_commit_that_releases_frees_the_claim_only_when_it_writes(
        tmp_path: Path) -> None:
    with SQLiteCheckpointStore(tmp_path / "s.db") as store:
        token = await store.claim("t-1", "run-a", now=T0, ttl=10)
        await store.commit("t-1", token, **_piece("cp-1", None))
        # Refused (a parent that is not the thread's latest): nothing written or released.
        with pytest.raises(ParentNotLatest):
            await store.commit("t-1", token, release=True, **_piece("cp-2", "cp-0"))
        assert await store.current_claim("t-1") is not None
        # A stale token: refused, the holder's claim kept.
        with pytest.raises(StaleClaim):
            await store.commit("t-1", token + 1, release=True, **_piece("cp-2", "cp-1"))
        claim = ("run-a", token, T0 + timedelta(seconds=10))
        assert await store.current_claim("t-1") == claim
        # Written: released in the same transaction.
        await store.commit("t-1", token, release=True, **_piece("cp-2", "cp-1"))
        assert (await store.latest("run-a")).id == "cp-2"  # type: ignore[union-attr]
        assert await store.current_claim("t-1") is None
        # Released: the token holds nothing, the plain step's short path included.
        with pytest.raises(StaleClaim):
            await store.commit("t-1", token, **_piece("cp-3", "cp-2"))
        with pytest.raises(StaleClaim):
            await store.release("t-1", token)
        assert await store.claim("t-1", "run-b", now=T0) == token + 1
