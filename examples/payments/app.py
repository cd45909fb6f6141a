"""A refund agent built from tools with declared contracts, middleware and a guardrail.

agent ──(refund)──► pay ──► reply ──► END
  │  └─(answer)─────────────► reply
  └─(guardrail Block: over the limit)──► escalate ──► END

* ``agent`` asks a model (a fake behind the ``think`` tool) what to do with the customer's
  message; the model's answer is recorded like any ``external`` call, so a resumed run sees
  the same decision;
* a guardrail blocks a refund over the limit before anything is paid; the block takes the
  agent's ``on_error`` route to ``escalate``;
* ``pay`` calls the ``refund`` tool, which asks a human to approve it (an ``interrupt`` it
  declares in ``asks=``) and then pays through a fake payment service, handing it the call's
  key (``call.key``) as the idempotency key; its update (``updates=["payment"]``) joins the
  node's patch;
* a timing middleware around every node emits how long it took, on the virtual clock.

``make_app()`` builds a fresh graph around fresh fakes (what the checkers call per run);
``build(services)`` builds one around the fakes given.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Annotated, Any

import anyio
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Allow,
    Block,
    Graph,
    Guardrail,
    Middleware,
    Reducer,
    ToolCall,
    ToolResult,
    interrupt,
    record_effect,
    tool,
)

REFUND_LIMIT = 200
"""The largest refund the agent may give without a supervisor."""


class Conversation(BaseModel):
    """One customer conversation."""

    customer: str = ""
    message: str = ""
    decision: dict[str, Any] = {}
    payment: dict[str, Any] = {}
    reply: str = ""
    log: Annotated[list[str], Reducer(operator.add)] = []


# --------------------------------------------------------------------------- fake services


class FakeModel:
    """Stands in for a model client: answers each prompt from a script."""

    def __init__(self, script: dict[str, dict[str, Any]]) -> None:
        self.script = script
        self.calls = 0

    async def complete(self, prompt: str) -> dict[str, Any]:
        self.calls += 1
        await anyio.sleep(0.8)  # the model's latency, on the runtime's clock
        return dict(self.script[prompt])


class PaymentService:
    """A fake payment service that keeps its state between calls, as the real one does.

    A refund carries an idempotency key: a key it has seen returns the first refund's id
    and moves no money. ``calls`` counts every request, ``refunds`` the money that moved.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.refunds: dict[str, tuple[str, int]] = {}
        self.ids: dict[str, str] = {}

    async def refund(self, order: str, amount: int, *, idempotency_key: str) -> str:
        self.calls += 1
        await anyio.sleep(0.2)
        if idempotency_key not in self.ids:
            self.refunds[idempotency_key] = (order, amount)
            self.ids[idempotency_key] = f"rf-{len(self.ids) + 1}"
            record_effect("refund", key=idempotency_key)  # the money moved: count it
        return self.ids[idempotency_key]


SCRIPT = {
    "Ada: my blender arrived broken, order o-7": {
        "action": "refund", "order": "o-7", "amount": 80},
    "Bob: the sofa never came, order o-9": {"action": "refund", "order": "o-9", "amount": 900},
    "Cy: where is order o-3?": {"action": "answer", "text": "Order o-3 ships tomorrow."},
}


@dataclass
class Services:
    """The fakes one graph is built around."""

    model: FakeModel = field(default_factory=lambda: FakeModel(SCRIPT))
    payments: PaymentService = field(default_factory=PaymentService)


# --------------------------------------------------------------------------- the graph


def build(services: Services) -> Any:
    """Compile the refund agent around ``services``."""

    @tool(effect="external")
    async def think(args: dict[str, Any]) -> dict[str, Any]:
        return await services.model.complete(args["prompt"])

    @tool(updates=["payment"], asks=["approve"], effect="external")
    async def refund(args: dict[str, Any], call: ToolCall) -> ToolResult:
        approved = interrupt({"order": args["order"], "amount": args["amount"]}, id="approve")
        if approved != "yes":
            return ToolResult(value=None, update={"payment": {"status": "declined"}})
        refund_id = await services.payments.refund(args["order"], args["amount"],
                                                   idempotency_key=call.key)
        return ToolResult(value=refund_id, update={"payment": {
            "status": "refunded", "id": refund_id, "amount": args["amount"]}})

    async def agent(s: Conversation, ctx: Any) -> dict[str, Any]:
        decision = await ctx.acall_tool(think, {"prompt": f"{s.customer}: {s.message}"})
        return {"decision": decision, "log": [f"model: {decision['action']}"]}

    def route(s: Conversation) -> str:
        return "pay" if s.decision.get("action") == "refund" else "reply"

    async def pay(s: Conversation, ctx: Any) -> dict[str, Any]:
        d = s.decision
        refund_id = await ctx.acall_tool(refund, {"order": d["order"], "amount": d["amount"]})
        return {"log": [f"refund: {refund_id or 'declined'}"]}

    def reply(s: Conversation) -> dict[str, Any]:
        if s.payment.get("status") == "refunded":
            text = f"Hi {s.customer}, your refund {s.payment['id']} is on its way."
        elif s.payment.get("status") == "declined":
            text = f"Hi {s.customer}, we could not approve this refund."
        else:
            text = f"Hi {s.customer}. {s.decision.get('text', '')}"
        return {"reply": text, "log": ["reply"]}

    def escalate(s: Conversation, ctx: Any) -> dict[str, Any]:
        return {"reply": f"Hi {s.customer}, a supervisor will look at your refund.",
                "log": [f"escalated: {ctx.failure['error_type']}"]}

    def refund_limit(s: Conversation, ctx: Any, patch: dict[str, Any] | None) -> Any:
        decision = (patch or {}).get("decision", {})
        if decision.get("action") == "refund" and decision["amount"] > REFUND_LIMIT:
            return Block(f"refund {decision['amount']} is over the limit {REFUND_LIMIT}")
        return Allow()

    async def timed(s: Conversation, ctx: Any, call_next: Any) -> Any:
        started = ctx.now()
        result = await call_next(s)
        ctx.emit({"node": ctx.node, "seconds": (ctx.now() - started).total_seconds()},
                 channel="timing")
        return result

    g = Graph("refund-agent", Conversation,
              middleware=[Middleware("timing", wrap=timed)],
              guardrails=[Guardrail("refund-limit", refund_limit, nodes="agent")])
    g.node("agent", agent, on_error="escalate")
    g.node("pay", pay, effect="external")
    g.node("reply", reply)
    g.node("escalate", escalate)
    g.edge(START, "agent")
    g.branch("agent", route, ["pay", "reply"])
    g.edge("pay", "reply")
    g.edge("reply", END)
    g.edge("escalate", END)
    return g.compile()


def make_app() -> Any:
    """A fresh graph with fresh fakes: what every independent run should get."""
    return build(Services())


REFUND = {"customer": "Ada", "message": "my blender arrived broken, order o-7"}
"""A conversation that ends in a refund, once a human approves it."""

TOO_LARGE = {"customer": "Bob", "message": "the sofa never came, order o-9"}
"""A conversation whose refund is over the limit: the guardrail blocks it."""

QUESTION = {"customer": "Cy", "message": "where is order o-3?"}
"""A conversation the model answers without a tool."""

ANSWERS = {"approve": "yes"}
"""The human's answer, keyed by interrupt id."""
