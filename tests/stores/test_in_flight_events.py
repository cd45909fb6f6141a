"""Seed 002: "When a side-effect outcome is unknown, inspect Events before resuming." A durable
store's event log shows an ``external`` node that started and never reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    FaultyStore,
    Graph,
    GraphRuntime,
    SQLiteCheckpointStore,
    StoreFault,
    VirtualClock,
)

pytestmark = pytest.mark.anyio


class S(BaseModel):
    charged: int = 0


def build(charges: list[int]) -> Any:
    def charge(state: S) -> dict[str, Any]:
        charges.append(1)  # the payment API was called
        return {"charged": state.charged + 1}

    g = Graph("payment", S)
    g.node("prepare", lambda s: None).node("charge", charge, effect="external")
    g.node("receipt", lambda s: None)
    g.edge(START, "prepare").edge("prepare", "charge").edge("charge", "receipt")
    g.edge("receipt", END)
    return g.compile()


async def test_the_log_shows_an_external_node_whose_outcome_is_unknown(tmp_path: Path) -> None:
    charges: list[int] = []
    graph = build(charges)
    sqlite = SQLiteCheckpointStore(tmp_path / "runs.db")
    store = FaultyStore(sqlite)
    store.reject_save(when=lambda cp: cp.node_ids == ["charge"], times=1)
    rt = GraphRuntime(store=store, clock=VirtualClock(), seed=3)
    seen: list[str] = []

    async def consume() -> None:
        async for event in rt.stream(graph):
            seen.append(event.run_id)

    with pytest.raises(StoreFault):
        await consume()
    run_id = seen[0]
    assert charges == [1]  # the API was called, but the run never reported it
    log = await sqlite.events(run_id)
    last = log[-1]
    assert (last["type"], last["node"]) == ("node_start", "charge")
    assert not [e for e in log if e["type"] == "node_end" and e["node"] == "charge"]

    done = await rt.aresume(run_id)
    assert done.status == "completed"
    log = await sqlite.events(run_id)
    assert [e["seq"] for e in log] == list(range(len(log)))
    charge_events = [e["type"] for e in log if e["node"] == "charge"
                     and e["type"] in ("node_start", "node_end")]
    assert charge_events == ["node_start", "node_end"]  # the marker was overwritten
    sqlite.close()


async def test_a_completed_run_logs_exactly_its_stream(tmp_path: Path) -> None:
    sqlite = SQLiteCheckpointStore(tmp_path / "runs.db")
    rt = GraphRuntime(store=sqlite, clock=VirtualClock(), seed=3)
    trace = await rt.atrace(build([]))
    assert await sqlite.events(trace.result.run_id) == [
        e.model_dump(mode="json") for e in trace.events]
    sqlite.close()
