"""The graph the HTML page tests draw: a parallel batch that sleeps, a join, an interrupt, a
retried call and a node that can fail, with the run recorded as a history.

``record(...)`` runs it on a recording runtime over a SQLite store (when ``store_path`` is
given) and returns the history and the graph.
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any

import anyio
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    CompiledGraph,
    Graph,
    History,
    Reducer,
    Resume,
    Retry,
    SQLiteCheckpointStore,
    VirtualClock,
    interrupt,
)
from pytest_graphflow.testing import RecordingRuntime


class Order(BaseModel):
    item: str = ""
    log: Annotated[list[str], Reducer(operator.add)] = []
    approved: bool | None = None
    receipt: str = ""


def build(*, broken: bool = False) -> CompiledGraph:
    """plan -> (risk sleeps 1 s | stock sleeps 0.5 s) -> review (asks) -> charge (fails once,
    retried) -> END; ``broken``: charge always fails."""
    calls = [0]

    def plan(s: Order) -> dict[str, Any]:
        return {"log": ["plan"]}

    async def risk(s: Order) -> dict[str, Any]:
        await anyio.sleep(1.0)
        return {"log": ["risk"]}

    async def stock(s: Order) -> dict[str, Any]:
        await anyio.sleep(0.5)
        return {"log": ["stock"]}

    def review(s: Order) -> dict[str, Any]:
        answer = interrupt({"item": s.item}, id="approve")
        return {"approved": answer == "yes", "log": [f"review:{answer}"]}

    async def charge(s: Order) -> dict[str, Any]:
        calls[0] += 1
        await anyio.sleep(0.25)
        if broken or calls[0] == 1:
            raise ConnectionError(f"payments down (call {calls[0]})")
        return {"receipt": f"rcpt-{calls[0]}", "log": ["charge"]}

    g = Graph("shop", Order)
    g.node("plan", plan)
    g.node("risk", risk, effect="read")
    g.node("stock", stock, effect="read")
    g.node("review", review, effect="human")
    g.node("charge", charge, effect="external", retry=Retry(attempts=2, backoff=2.0))
    g.edge(START, "plan")
    g.edge("plan", ["risk", "stock"])
    g.edge(["risk", "stock"], "review")
    g.edge("review", "charge")
    g.edge("charge", END)
    return g.compile()


def record(*, item: str = "lamp", answer: str | None = "yes", broken: bool = False,
           store_path: Path | None = None, store: Any = None) -> tuple[History, CompiledGraph]:
    """Run the graph (resumed with ``answer`` unless ``None``) on ``store``, a SQLite store
    at ``store_path`` (closed afterwards), or in memory; its history and graph."""
    graph = build(broken=broken)
    opened = SQLiteCheckpointStore(store_path) if store_path is not None else None
    runtime = RecordingRuntime(opened or store, clock=VirtualClock(), seed=3)
    try:
        result = runtime.invoke(graph, {"item": item})
        if answer is not None and result.status == "interrupted":
            runtime.resume(result.run_id, Resume(answer))
        checkpoints = anyio.run(runtime.store.list, result.run_id)
    finally:
        if opened is not None:
            opened.close()
    return History.from_legs(runtime.recordings, checkpoints, source="tests/html"), graph


class Counter(BaseModel):
    """The ticker's state."""

    n: int = 0


def ticker_events(ticks: int = 2500) -> tuple[list[dict[str, Any]], CompiledGraph]:
    """A one-node loop run ``ticks`` times (four events a tick: 10,003 for 2,500), as JSON
    events, with its graph: the long run the page's size test and its load benchmark draw."""
    from pytest_graphflow import GraphRuntime, InMemoryCheckpointStore

    g = Graph("ticker", Counter)
    g.node("tick", lambda s: {"n": s.n + 1})
    g.edge(START, "tick")
    g.branch("tick", lambda s: "tick" if s.n < ticks else "done", {"tick": "tick", "done": END})
    graph = g.compile()
    runtime = GraphRuntime(InMemoryCheckpointStore(), clock=VirtualClock(), seed=1,
                           max_supersteps=ticks + 500)
    return [e.model_dump(mode="json") for e in runtime.trace(graph, {}).events], graph
