"""A checkout graph with switches for the changes a user makes to a graph between releases.

``build(api)`` is the graph as recorded; ``build(api, change=...)`` is the same graph after one
change. ``record(...)`` runs it on a deterministic runtime (paused at the review, or resumed to
the end) and returns the run's :class:`History`.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
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
    VirtualClock,
    interrupt,
)
from pytest_graphflow.testing import RecordingRuntime


@dataclass
class Payments:
    """A fake payment API: counts its calls; fails the first ``flaky`` of them."""

    flaky: int = 0
    calls: int = 0

    async def charge(self, amount: int) -> str:
        self.calls += 1
        await anyio.sleep(0.25)
        if self.calls <= self.flaky:
            raise ConnectionError(f"payments down (call {self.calls})")
        return f"rcpt-{amount}-{self.calls}"


class Order(BaseModel):
    amount: int = 0
    log: Annotated[list[str], Reducer(operator.add)] = []
    approved: bool | None = None
    receipt: str = ""


class OrderAsText(BaseModel):
    amount: str = "0"
    log: Annotated[list[str], Reducer(operator.add)] = []
    approved: bool | None = None
    receipt: str = ""


class OrderWithoutReceipt(BaseModel):
    amount: int = 0
    log: Annotated[list[str], Reducer(operator.add)] = []
    approved: bool | None = None


class OrderWithRequiredKey(BaseModel):
    amount: int = 0
    log: Annotated[list[str], Reducer(operator.add)] = []
    approved: bool | None = None
    receipt: str = ""
    currency: str


def build(api: Payments, change: str | None = None) -> CompiledGraph:
    """The checkout graph, or the graph after ``change``."""
    limit = 50 if change == "route" else 1000
    state: Any = {"key_type": OrderAsText, "key_removed": OrderWithoutReceipt,
                  "key_added": OrderWithRequiredKey}.get(change or "", Order)

    def plan(s: Any) -> dict[str, Any]:
        if change == "refactor":  # same result, other code
            return {"log": ["".join(["pl", "an"])]}
        return {"log": ["plan" if change != "patch" else "plan:v2"]}

    async def risk(s: Any) -> dict[str, Any]:
        await anyio.sleep(1.0)
        return {"log": ["risk"]}

    async def stock(s: Any) -> dict[str, Any]:
        await anyio.sleep(0.5)
        return {"log": ["stock"]}

    def decide(s: Any) -> dict[str, Any]:
        return {"log": ["decide"]}

    def route(s: Any) -> str:
        return "review" if int(s.amount) < limit else "reject"

    def review(s: Any) -> dict[str, Any]:
        answer = interrupt({"amount": s.amount}, id="approve")
        return {"approved": answer == "yes", "log": [f"review:{answer}"]}

    async def charge(s: Any) -> dict[str, Any]:
        receipt = await api.charge(int(s.amount))
        return {"receipt": receipt, "log": ["charge"]} if change != "key_removed" else {
            "log": ["charge"]}

    def reject(s: Any) -> dict[str, Any]:
        return {"approved": False, "log": ["reject"]}

    def notify(s: Any) -> dict[str, Any]:
        return {"log": ["notify"]}

    paused = "approve" if change == "renamed" else "review"
    g = Graph("checkout", state)
    g.node("plan", plan)
    g.node("risk", risk, effect="read")
    g.node("stock", stock, effect="read")
    g.node("decide", decide)
    g.node(paused, review, effect="external" if change == "effect" else "human")
    g.node("charge", charge, effect="external", retry=Retry(attempts=3, backoff=2.0))
    g.node("reject", reject)
    g.node("notify", notify, effect="write")
    g.edge(START, "plan")
    g.edge("plan", ["risk", "stock"])
    g.edge(["risk", "stock"], "decide")
    g.branch("decide", route, {"review": paused, "reject": "reject"})
    g.edge(paused, "charge")
    g.edge("charge", "notify")
    g.edge("notify", END)
    g.edge("reject", END)
    return g.compile()


def record(graph: CompiledGraph, *, answer: str | None = "yes", amount: int = 120,
           seed: int = 11) -> History:
    """Run ``graph`` on a recording runtime (resumed with ``answer`` unless ``None``) and
    return the run's history."""
    runtime = RecordingRuntime(clock=VirtualClock(), seed=seed)
    result = runtime.invoke(graph, {"amount": amount})
    if answer is not None and result.status == "interrupted":
        runtime.resume(result.run_id, Resume(answer))
    checkpoints = anyio.run(runtime.store.list, result.run_id)
    return History.from_legs(runtime.recordings, checkpoints, source="tests/replay")
