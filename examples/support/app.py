"""A support-ticket agent, as a user of pytest-graphflow would write it.

triage ──► [customer, orders, shipping] ──► decide ─┬─► approve (asks a human) ──► refund ─► reply
                                                    └─────────────────────────────────────► reply
* three tools run in parallel; ``shipping`` is flaky and retries on the runtime's clock;
* a refund waits for a human's approval (an interrupt), then calls the payment service;
* every step appends to an audit log through a reducer, stamped with ``ctx.now()``;
* the fake services are built into the graph by ``build(services)``; ``make_app()`` is the
  factory the checkers call to get a fresh graph with fresh fakes for every run.

The payment fake is idempotent: a refund carries an idempotency key derived from the run
(which a resumed or recovered run keeps), and a key it has seen returns the first refund.
It calls ``record_effect`` where the money actually moves, so the crash-recovery checker
counts real refunds, not node calls.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Annotated, Any

import anyio
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, Reducer, Retry, interrupt, record_effect


class Ticket(BaseModel):
    ticket_id: str = ""
    customer_id: str = ""
    order_id: str = ""
    text: str = ""
    customer: dict[str, Any] = {}
    order: dict[str, Any] = {}
    shipment: dict[str, Any] = {}
    wants_refund: bool = False
    approved: bool | None = None
    refund_id: str = ""
    reply: str = ""
    audit: Annotated[list[dict[str, Any]], Reducer(operator.add)] = []


# --------------------------------------------------------------------------- fake services


class CRM:
    """A fake customer database."""

    def __init__(self) -> None:
        self.customers = {"c-1": {"name": "Ada", "tier": "gold"}}

    async def customer(self, customer_id: str) -> dict[str, Any]:
        await anyio.sleep(0.3)  # latency, on the runtime's clock
        return dict(self.customers.get(customer_id, {"name": "?", "tier": "none"}))


class Orders:
    """A fake order service."""

    def __init__(self) -> None:
        self.orders = {"o-7": {"amount": 120, "status": "delivered_damaged"}}

    async def order(self, order_id: str) -> dict[str, Any]:
        await anyio.sleep(0.5)
        return dict(self.orders.get(order_id, {"amount": 0, "status": "unknown"}))


class Shipping:
    """A fake carrier API that times out on its first ``flaky`` calls."""

    def __init__(self, flaky: int = 1) -> None:
        self.flaky = flaky
        self.calls = 0

    async def track(self, order_id: str) -> dict[str, Any]:
        self.calls += 1
        await anyio.sleep(1.0)
        if self.calls <= self.flaky:
            raise TimeoutError(f"carrier API timed out (call {self.calls})")
        return {"carrier": "UPS", "state": "delivered"}


class Payments:
    """A fake payment service. ``idempotent=False`` plants the bug: a repeated call with the
    same idempotency key refunds again."""

    def __init__(self, idempotent: bool = True) -> None:
        self.idempotent = idempotent
        self.refunds: dict[str, str] = {}
        self.issued: list[tuple[str, int]] = []

    async def refund(self, order_id: str, amount: int, key: str) -> str:
        await anyio.sleep(0.2)
        if self.idempotent and key in self.refunds:
            return self.refunds[key]
        refund_id = f"rf-{len(self.issued) + 1}"
        self.issued.append((order_id, amount))
        record_effect("refund", key=order_id)  # the money moved: count it
        self.refunds[key] = refund_id
        return refund_id


@dataclass
class Services:
    """The fakes one graph is built around."""

    crm: CRM = field(default_factory=CRM)
    orders: Orders = field(default_factory=Orders)
    shipping: Shipping = field(default_factory=Shipping)
    payments: Payments = field(default_factory=Payments)


# --------------------------------------------------------------------------- the graph


def build(services: Services) -> Any:
    """Compile the support agent around ``services``."""

    def log(ctx: Any, what: str) -> list[dict[str, Any]]:
        return [{"what": what, "at": ctx.now().isoformat()}]

    def triage(s: Ticket, ctx: Any) -> dict[str, Any]:
        wants = "refund" in s.text.lower()
        return {"ticket_id": s.ticket_id or f"t-{ctx.uuid().hex[:8]}", "wants_refund": wants,
                "audit": log(ctx, "triage")}

    async def customer(s: Ticket, ctx: Any) -> dict[str, Any]:
        return {"customer": await services.crm.customer(s.customer_id),
                "audit": log(ctx, "customer")}

    async def orders(s: Ticket, ctx: Any) -> dict[str, Any]:
        return {"order": await services.orders.order(s.order_id), "audit": log(ctx, "orders")}

    async def shipping(s: Ticket, ctx: Any) -> dict[str, Any]:
        shipment = await services.shipping.track(s.order_id)
        return {"shipment": shipment,
                "audit": [{**log(ctx, "shipping")[0], "attempt": ctx.attempt}]}

    def decide(s: Ticket, ctx: Any) -> dict[str, Any]:
        return {"audit": log(ctx, "decide")}

    def route(s: Ticket) -> str:
        damaged = s.order.get("status") == "delivered_damaged"
        return "approve" if s.wants_refund and damaged else "reply"

    def approve(s: Ticket, ctx: Any) -> dict[str, Any]:
        answer = interrupt({"order": s.order_id, "amount": s.order.get("amount")},
                           id="refund-approval")
        return {"approved": answer == "yes", "audit": log(ctx, f"approval: {answer}")}

    def after_approval(s: Ticket) -> str:
        return "refund" if s.approved else "reply"

    async def refund(s: Ticket, ctx: Any) -> dict[str, Any]:
        key = f"{ctx.run_id}:{s.order_id}"  # kept by a resumed or recovered run
        refund_id = await services.payments.refund(s.order_id, s.order["amount"], key)
        return {"refund_id": refund_id, "audit": log(ctx, "refund")}

    def reply(s: Ticket, ctx: Any) -> dict[str, Any]:
        name = s.customer.get("name", "there")
        if s.refund_id:
            text = f"Hi {name}, your refund {s.refund_id} is on its way."
        elif s.approved is False:
            text = f"Hi {name}, we could not approve a refund for this order."
        else:
            text = f"Hi {name}, your order is {s.shipment.get('state', 'on its way')}."
        return {"reply": text, "audit": log(ctx, "reply")}

    g = Graph("support", Ticket)
    g.node("triage", triage)
    g.node("customer", customer)
    g.node("orders", orders)
    g.node("shipping", shipping, retry=Retry(attempts=3, backoff=2.0))
    g.node("decide", decide)
    g.node("approve", approve, effect="human")
    g.node("refund", refund, effect="external")
    g.node("reply", reply)
    g.edge(START, "triage")
    g.edge("triage", ["customer", "orders", "shipping"])
    g.edge(["customer", "orders", "shipping"], "decide")
    g.branch("decide", route, ["approve", "reply"])
    g.branch("approve", after_approval, ["refund", "reply"])
    g.edge("refund", "reply")
    g.edge("reply", END)
    return g.compile()


def make_app() -> Any:
    """A fresh graph with fresh fakes: what every independent run should get."""
    return build(Services())


REFUND_TICKET = {"customer_id": "c-1", "order_id": "o-7",
                 "text": "Box arrived crushed, refund please"}
"""A ticket that ends in a refund, once a human approves it."""

ANSWERS = {"refund-approval": "yes"}
"""The human's answer, keyed by interrupt id (any answer-key form works)."""

IGNORE = ["audit.*.at", "audit.*.attempt"]
"""What legitimately differs between a run and its recovery: the audit log's timestamps
(recovery waits out the dead process's claim, so the steps after a crash happen later) and
the flaky tool's attempt number (a crash between its failed try and the next checkpoint
means the recovered process tries afresh, and the carrier may have recovered meanwhile)."""

EXPLORE_NODE_SEED = 0
"""The ticket id comes from ``ctx.uuid()``, seeded by the run, and every explore() run has
its own seed (so its own run id) by design: ``explore(..., node_seed=EXPLORE_NODE_SEED)``
holds node randomness fixed across its runs, so the ticket id is compared too."""
