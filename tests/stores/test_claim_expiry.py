"""How long a claim lasts and what a caller is told while it does (SPEC §5, seed 004), on
every store: the store's ``claim_ttl`` is the one source of the ttl unless the runtime is
given its own, and ``ThreadBusy`` names when the claim expires and how to get there."""

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
    ThreadBusy,
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


async def test_thread_busy_names_the_expiry_on_the_store(
    make_any_store: Callable[..., Any]
) -> None:
    """Issue 23 item 3: a refused claim says when the live claim expires and how long is left
    on the clock of the caller's ``now``."""
    store = make_any_store()
    await store.claim("t", "run-a", now=T0, ttl=10)
    with pytest.raises(ThreadBusy) as busy:
        await store.claim("t", "run-b", now=T0 + timedelta(seconds=4))
    assert busy.value.expires_at == T0 + timedelta(seconds=10)
    assert busy.value.expires_in == 6.0
    assert "2025-01-01T00:00:10+00:00" in str(busy.value)
    assert "6 s" in str(busy.value)


async def test_thread_busy_tells_a_virtual_clock_how_far_to_advance(
    make_any_store: Callable[..., Any]
) -> None:
    """Issue 23 item 3: after a crash, a fresh runtime on a fresh VirtualClock is told the
    instant on its clock, the time left, and to advance the clock; advancing by exactly that
    recovers the run. The refused resume itself changes nothing, the clock included."""
    store = make_any_store(claim_ttl=30.0)
    graph = _counter()
    await _crash(store, graph)
    ran = await store.latest(await _run_of(store))
    fresh = GraphRuntime(store, clock=VirtualClock(start=T0), seed=1)
    with pytest.raises(ThreadBusy) as busy:
        await fresh.aresume(ran.run_id, graph=graph)
    message = str(busy.value)
    assert busy.value.expires_at == T0 + timedelta(seconds=30)
    assert busy.value.expires_in == 30.0
    assert "2025-01-01T00:00:30+00:00 on the runtime's clock" in message
    assert "30 s" in message
    assert "clock.advance(30)" in message
    assert fresh.clock.now() == T0  # the refused call did not move the clock
    fresh.clock.advance(busy.value.expires_in)
    assert (await fresh.aresume(ran.run_id, graph=graph)).data == {"n": 3}


async def test_thread_busy_on_a_real_clock_does_not_mention_advancing(
    make_any_store: Callable[..., Any]
) -> None:
    """The twin of the virtual-clock message: a clock that is not virtual cannot be advanced,
    so the caller is told when to retry instead."""
    store = make_any_store(claim_ttl=30.0)
    graph = _counter()
    await _crash(store, graph)
    fresh = GraphRuntime(store, clock=_FixedClock(T0 + timedelta(seconds=12)), seed=1)
    with pytest.raises(ThreadBusy) as busy:
        await fresh.arecover("t", graph=graph)
    message = str(busy.value)
    assert busy.value.expires_in == 18.0
    assert "2025-01-01T00:00:30+00:00 on the runtime's clock" in message
    assert "18 s" in message
    assert "advance" not in message


async def _run_of(store: Any) -> str:
    return str((await store.list(thread_id="t"))[-1].run_id)


class _FixedClock:
    """A clock that is not virtual and does not move (a real clock frozen, for the test)."""

    virtual = False

    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at

    def monotonic(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        return None
