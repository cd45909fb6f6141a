"""A payment approval flow, as a user of pytest-graphflow would write it.

plan ──► [fraud_check, credit_check] ──► decide ─┬─► review (asks a human) ──► charge ─► notify
                                                 └─► reject ─────────────────────────────► END
charge is external (a payment API): it retries on the runtime's clock, and routes to refund
when it keeps failing. Resuming after the review replays completed side effects instead of
charging twice.
"""

from __future__ import annotations

import operator
from typing import Annotated

import anyio
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, Reducer, Retry, interrupt


def merge_scores(current: dict[str, int], update: dict[str, int]) -> dict[str, int]:
    """A custom reducer: parallel checks add their scores; the higher score wins a clash."""
    out = dict(current)
    for key, value in update.items():
        out[key] = max(out.get(key, value), value)
    return out


class Order(BaseModel):
    amount: int = 0
    scores: Annotated[dict[str, int], Reducer(merge_scores)] = {}
    audit: Annotated[list[str], Reducer(operator.add)] = []
    approved: bool | None = None
    charged: int = 0
    receipt: str = ""


class PaymentAPI:
    """A fake payment service that fails the first ``flaky`` calls."""

    def __init__(self, flaky: int = 0, down: bool = False) -> None:
        self.flaky = flaky
        self.down = down
        self.calls = 0

    async def charge(self, amount: int) -> str:
        self.calls += 1
        await anyio.sleep(0.2)  # network latency, on the runtime's clock
        if self.down or self.calls <= self.flaky:
            raise ConnectionError(f"payment API unavailable (call {self.calls})")
        return f"rcpt-{amount}-{self.calls}"


def build(api: PaymentAPI) -> object:
    """Compile the approval graph around ``api``."""

    def plan(s: Order) -> dict[str, object]:
        return {"audit": ["plan"]}

    async def fraud_check(s: Order) -> dict[str, object]:
        await anyio.sleep(1.5)
        return {"scores": {"fraud": 10 if s.amount < 1000 else 70}, "audit": ["fraud"]}

    async def credit_check(s: Order) -> dict[str, object]:
        await anyio.sleep(0.5)
        return {"scores": {"credit": 80}, "audit": ["credit"]}

    def decide(s: Order) -> dict[str, object]:
        return {"audit": ["decide"]}

    def route(s: Order) -> str:
        return "reject" if s.scores.get("fraud", 0) > 50 else "review"

    def review(s: Order) -> dict[str, object]:
        answer = interrupt({"amount": s.amount, "scores": s.scores}, id="approve")
        return {"approved": answer == "yes", "audit": [f"review:{answer}"]}

    def after_review(s: Order) -> str:
        return "charge" if s.approved else "reject"

    async def charge(s: Order) -> dict[str, object]:
        receipt = await api.charge(s.amount)
        return {"charged": s.amount, "receipt": receipt, "audit": ["charge"]}

    def refund(s: Order, ctx: object) -> dict[str, object]:
        failure = getattr(ctx, "failure", None) or {}
        return {"audit": [f"refund:{failure.get('error_type')}"]}

    def reject(s: Order) -> dict[str, object]:
        return {"approved": False, "audit": ["reject"]}

    def notify(s: Order) -> dict[str, object]:
        return {"audit": ["notify"]}

    g = Graph("approval", Order)
    g.node("plan", plan)
    g.node("fraud_check", fraud_check, effect="read")
    g.node("credit_check", credit_check, effect="read")
    g.node("decide", decide)
    g.node("review", review, effect="human")
    g.node("charge", charge, effect="external", retry=Retry(attempts=3, backoff=2.0),
           on_error="refund")
    g.node("refund", refund, effect="external")
    g.node("reject", reject)
    g.node("notify", notify, effect="write")
    g.edge(START, "plan")
    g.edge("plan", ["fraud_check", "credit_check"])
    g.edge(["fraud_check", "credit_check"], "decide")
    g.branch("decide", route, {"review": "review", "reject": "reject"})
    g.branch("review", after_review, {"charge": "charge", "reject": "reject"})
    g.edge("charge", "notify")
    g.edge("refund", END)
    g.edge("reject", END)
    g.edge("notify", END)
    return g.compile()
