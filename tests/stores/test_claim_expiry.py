"""How long a claim lasts (SPEC §5, seed 004), on every store: the store's ``claim_ttl`` is
the one source of the ttl unless the runtime is given its own."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    FaultyStore,
    Graph,
    GraphRuntime,
    SimulatedCrash,
    VirtualClock,
)
from pytest_graphflow._graph._builder import CompiledGraph

pytestmark = pytest.mark.anyio
T0 = datetime(2025, 1, 1, tzinfo=UTC)


class S(BaseModel):
    n: int = 0


def _counter() -> CompiledGraph:
    g = Graph("count", S)
    for name in ("a", "b", "c"):
        g.node(name, lambda s: {"n": s.n + 1})
    g.edge(START, "a").edge("a", "b").edge("b", "c").edge("c", END)
    return g.compile()


async def _crash(store: Any, graph: CompiledGraph, **runtime: Any) -> None:
    """A runtime claims thread ``t`` at T0 and dies at its second save, holding the claim."""
    faulty = FaultyStore(store).crash_at("save", nth=2)
    with pytest.raises(SimulatedCrash):
        await GraphRuntime(faulty, clock=VirtualClock(start=T0), seed=0,
                           **runtime).ainvoke(graph, thread_id="t")


@pytest.mark.parametrize(("runtime_ttl", "expected"), [
    pytest.param({}, 1.0, id="runtime-without-ttl-uses-the-store's"),
    pytest.param({"claim_ttl": 5.0}, 5.0, id="an-explicit-runtime-ttl-wins"),
])
async def test_a_runtime_without_claim_ttl_uses_the_store_s(
    make_any_store: Callable[..., Any], runtime_ttl: dict[str, Any], expected: float
) -> None:
    """Issue 23 item 2: ``SQLiteCheckpointStore(path, claim_ttl=1.0)`` used by
    ``GraphRuntime(store=...)`` must not be overridden by the runtime's own default: recovery
    after a killed worker waits the store's ttl, not 30 s."""
    store = make_any_store(claim_ttl=1.0)
    assert GraphRuntime(store, **runtime_ttl).claim_ttl == expected
    graph = _counter()
    await _crash(store, graph, **runtime_ttl)
    _run, _token, expires = await store.current_claim("t")
    assert expires == T0 + timedelta(seconds=expected)  # the dead runtime's claim
    fresh = GraphRuntime(store, clock=VirtualClock(start=T0 + timedelta(seconds=expected)),
                         seed=1)
    result = await fresh.arecover("t", graph=graph)
    assert (result.status, result.data) == ("completed", {"n": 3})
