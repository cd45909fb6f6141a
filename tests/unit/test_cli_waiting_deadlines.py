"""``graphflow waiting`` reads ``store.waiting()`` (issue 26): each waiting run shows its
deadline (the earliest of its questions'), every tenant's runs are listed, and a run whose
deadline fired is no longer listed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphflow_deadline_graphs import T0, THREE_DAYS, build
from pytest_graphflow import GraphRuntime, SQLiteCheckpointStore, VirtualClock
from pytest_graphflow._cli._main import main


def test_waiting_shows_deadlines_of_every_tenant(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    path = tmp_path / "approvals.db"
    with SQLiteCheckpointStore(path) as store:
        clock = VirtualClock(start=T0)
        acme = GraphRuntime(store, clock=clock, seed=1, tenant_id="acme")
        first = acme.invoke(build(), {"amount": 120}, thread_id="refund-1")
        clock.advance(3600)
        GraphRuntime(store, clock=clock, seed=2).invoke(build(), {"amount": 5},
                                                        thread_id="refund-2")
    assert main(["waiting", str(path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split()[:6] == ["RUN", "ID", "THREAD", "GRAPH", "SINCE", "DEADLINE"]
    assert "refund-1" in rows[1]
    assert "2025-01-04T00:00:00Z" in rows[1]
    assert "refund-2" in rows[2]
    assert "2025-01-04T01:00:00Z" in rows[2]

    assert main(["waiting", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(r["thread_id"], r["deadline"]) for r in doc] == [
        ("refund-1", "2025-01-04T00:00:00Z"), ("refund-2", "2025-01-04T01:00:00Z")]
    assert doc[0]["interrupts"][0]["deadline"] == "2025-01-04T00:00:00Z"

    with SQLiteCheckpointStore(path) as store:
        late = GraphRuntime(store, clock=VirtualClock(start=T0 + THREE_DAYS), seed=3)
        (fired,) = late.expire_due(any_tenant=True, graphs=[build()])
        assert fired.run_id == first.run_id
    assert main(["waiting", str(path), "--json"]) == 0
    assert [r["thread_id"] for r in json.loads(capsys.readouterr().out)] == ["refund-2"]
