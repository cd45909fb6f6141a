"""Small LangGraph graphs the bridge's tests share (built fresh per call)."""

from __future__ import annotations

import asyncio
import operator
import uuid
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt


class FanState(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    answer: str


def fan_out(sleeps: dict[str, float] | None = None) -> StateGraph:
    """START -> a, b, c (async, each sleeping its time) -> join -> END."""
    delays = sleeps or {"a": 0.0, "b": 0.0, "c": 0.0}
    g = StateGraph(FanState)

    def make(name: str) -> Any:
        async def node(state: FanState) -> dict[str, Any]:
            await asyncio.sleep(delays[name])
            return {"log": [name]}
        return node

    for name in delays:
        g.add_node(name, make(name))
        g.add_edge(START, name)
    g.add_node("join", lambda s: {"log": ["join"]})
    g.add_edge(list(delays), "join")
    g.add_edge("join", END)
    return g


def approval() -> StateGraph:
    """START -> draft -> review (interrupts for a decision) -> END."""
    g = StateGraph(FanState)
    g.add_node("draft", lambda s: {"log": ["draft"]})

    def review(state: FanState) -> dict[str, Any]:
        decision = interrupt({"draft": state["log"][-1]})
        return {"answer": str(decision)}

    g.add_node("review", review)
    g.add_edge(START, "draft")
    g.add_edge("draft", "review")
    g.add_edge("review", END)
    return g


def two_reviews() -> StateGraph:
    """START -> left, right: both interrupt in one step (two pending interrupts)."""
    g = StateGraph(FanState)

    def make(name: str) -> Any:
        def node(state: FanState) -> dict[str, Any]:
            return {"log": [f"{name}:{interrupt(name)}"]}
        return node

    for name in ("left", "right"):
        g.add_node(name, make(name))
        g.add_edge(START, name)
        g.add_edge(name, END)
    return g


def ticket_desk() -> StateGraph:
    """START -> open (a ``uuid4`` ticket id, a ``random`` score, then an approval interrupt)
    and, in parallel, tag (async: ``random.choice``, an unseeded ``random.Random()``, a
    ``uuid1``) -> END. Node code calls ``uuid``/``random`` itself."""
    import random
    import uuid

    g = StateGraph(FanState)

    def open_ticket(state: FanState) -> dict[str, Any]:
        ticket = f"T-{uuid.uuid4().hex[:12]}"
        score = random.random()
        answer = interrupt({"ticket": ticket, "score": score})
        return {"log": [ticket, f"{score:.12f}"], "answer": str(answer)}

    async def tag(state: FanState) -> dict[str, Any]:
        first = random.choice("abcdefgh")
        await asyncio.sleep(5)
        return {"log": [f"tag:{first}:{random.Random().random():.12f}:{uuid.uuid1()}"]}

    g.add_node("open", open_ticket)
    g.add_node("tag", tag)
    g.add_edge(START, "open")
    g.add_edge(START, "tag")
    g.add_edge("open", END)
    g.add_edge("tag", END)
    return g


class RefundState(TypedDict, total=False):
    """The refund subgraph's state (``amount``, ``refund_id``, ``decision`` are shared with
    the parent; ``steps`` is its own)."""

    amount: int
    refund_id: str
    decision: str
    steps: Annotated[list[str], operator.add]


class DeskState(TypedDict, total=False):
    """The support agent's state."""

    log: Annotated[list[str], operator.add]
    amount: int
    refund_id: str
    decision: str


def refund_flow(lookup_s: float = 2.0) -> StateGraph:
    """The refund subgraph: lookup (async, ``lookup_s`` seconds, a ``uuid4`` refund id) ->
    approve (interrupts for a decision) -> pay."""
    import uuid

    g = StateGraph(RefundState)

    async def lookup(state: RefundState) -> dict[str, Any]:
        await asyncio.sleep(lookup_s)
        return {"refund_id": f"R-{uuid.uuid4().hex[:8]}", "steps": ["lookup"]}

    def approve(state: RefundState) -> dict[str, Any]:
        decision = interrupt({"refund_id": state["refund_id"], "amount": state["amount"]})
        return {"decision": str(decision), "steps": ["approve"]}

    def pay(state: RefundState) -> dict[str, Any]:
        return {"steps": [f"pay:{state['decision']}"]}

    g.add_node("lookup", lookup)
    g.add_node("approve", approve)
    g.add_node("pay", pay)
    g.add_edge(START, "lookup")
    g.add_edge("lookup", "approve")
    g.add_edge("approve", "pay")
    g.add_edge("pay", END)
    return g


def refund_desk(lookup_s: float = 2.0, notify_s: float = 1.0) -> StateGraph:
    """A support agent: classify -> (the refund subgraph, which interrupts for approval, and
    notify, async ``notify_s`` seconds, in parallel) -> reply. Plain LangGraph sleeps for
    real: its tests pass zero delays."""
    g = StateGraph(DeskState)

    async def notify(state: DeskState) -> dict[str, Any]:
        await asyncio.sleep(notify_s)
        return {"log": ["notified"]}

    g.add_node("classify", lambda s: {"log": [f"classify:{s['amount']}"]})
    g.add_node("refund", refund_flow(lookup_s).compile())
    g.add_node("notify", notify)
    g.add_node("reply", lambda s: {"log": [f"reply:{s['refund_id']}:{s['decision']}"]})
    g.add_edge(START, "classify")
    g.add_edge("classify", "refund")
    g.add_edge("classify", "notify")
    g.add_edge(["refund", "notify"], "reply")
    g.add_edge("reply", END)
    return g


class Item(TypedDict, total=False):
    """A work item and what was done with it."""

    n: int
    out: Annotated[list[str], operator.add]


class ItemOut(TypedDict, total=False):
    """What a worker subgraph gives back."""

    out: Annotated[list[str], operator.add]


def map_into_a_subgraph() -> StateGraph:
    """plan sends three items into a subgraph that works on each (map-reduce; the
    subgraph gives back ``out`` only)."""
    worker = StateGraph(Item, output_schema=ItemOut)

    async def work(state: Item) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"out": [f"w{state['n']}:R-{uuid.uuid4().hex[:8]}"]}

    worker.add_node("work", work)
    worker.add_edge(START, "work")
    worker.add_edge("work", END)
    g = StateGraph(Item)
    g.add_node("plan", lambda s: {})
    g.add_node("worker", worker.compile())
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", lambda s: [Send("worker", {"n": k}) for k in range(3)],
                            ["worker"])
    g.add_edge("worker", END)
    return g
