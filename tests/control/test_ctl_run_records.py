"""Run records of a long-lived runtime (seed 002 "Run records lifecycle status ..."): over a
store that keeps run records, a runtime (a ``Worker``, a service running thousands of runs)
holds the records of its live runs and of its last ``KEPT`` ended ones only; older ones are
read back from the store, and resuming, ``history`` and record lookups of old runs work as
before. Over the in-memory store the runtime is where records live, so it keeps them all."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    CheckpointNotFound,
    Graph,
    GraphRuntime,
    Resume,
    SQLiteCheckpointStore,
    VirtualClock,
    interrupt,
)

pytestmark = pytest.mark.anyio
T0 = datetime(2025, 1, 1, tzinfo=UTC)
KEPT = 256
"""The ended runs whose records a runtime holds (docs/running.md, "Run records")."""
RUNS = 2000


class S(BaseModel):
    answer: str = ""


def _graph(name: str, fn: Any) -> Any:
    g = Graph(name, S)
    g.node("only", fn).edge(START, "only").edge("only", END)
    return g.compile()


def _fail(state: S) -> None:
    raise ValueError("out of paper")


QUICK = _graph("quick", lambda s: {"answer": "done"})
ASK = _graph("ask", lambda s: {"answer": interrupt("ok?", id="ok")})
FAIL = _graph("fail", _fail)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the records are the backend's same
async def test_a_long_lived_runtime_holds_a_bounded_number_of_run_records(
    tmp_path: Path, anyio_backend: str
) -> None:
    """Issue 23 item 18: after 2,000 runs the runtime holds ``KEPT`` records, not 2,000;
    the records of the first runs, their history and a resume of a run paused before them
    all still work (from the store)."""
    with SQLiteCheckpointStore(tmp_path / "runs.db", synchronous="off") as store:
        rt = GraphRuntime(store, clock=VirtualClock(start=T0), seed=0)
        paused = await rt.ainvoke(ASK)
        failed = await rt.ainvoke(FAIL)
        done = [(await rt.ainvoke(QUICK)).run_id for _ in range(RUNS)]
        assert len(rt.runs) == KEPT
        assert [r.run_id for r in rt.runs] == done[-KEPT:]  # the newest, in start order

        first = await rt.arun_record(done[0])
        assert (first.run_id, first.status, first.graph_id, first.legs) == (
            done[0], "completed", "quick", 1)
        assert (await rt.arun_record(failed.run_id)).error["message"].endswith(
            "ValueError: out of paper")
        assert [cp.status for cp in await rt.history(done[0])][-1] == "completed"

        resumed = await rt.aresume(paused.run_id, Resume("yes"))
        assert (resumed.status, resumed.data) == ("completed", {"answer": "yes"})
        record = rt.run_record(paused.run_id)  # held again: it ran here just now
        assert (record.status, record.legs, record.started_at) == ("completed", 2, T0)
        assert len(rt.runs) == KEPT
        with pytest.raises(CheckpointNotFound):
            await rt.arun_record("run-never")


async def test_over_the_in_memory_store_every_record_is_held() -> None:
    """The twin: the in-memory store keeps no run records, so the runtime keeps them all
    (it keeps every checkpoint in memory anyway)."""
    rt = GraphRuntime(clock=VirtualClock(start=T0), seed=0)
    done = [(await rt.ainvoke(QUICK)).run_id for _ in range(KEPT + 10)]
    assert [r.run_id for r in rt.runs] == done
    assert rt.run_record(done[0]).status == "completed"
    assert (await rt.arun_record(done[0])).status == "completed"
