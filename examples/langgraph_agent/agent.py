"""A travel-desk agent written with LangGraph, as a team would have it before adopting
pytest-graphflow: nothing in here knows about the tests.

Flow: ``plan`` (a scripted stand-in for an LLM) asks for three tools at once; each tool call
runs as its own parallel task (``Send``); ``exchange_rate`` talks to a service that is down
for the first 20 minutes and is retried with exponential back-off; ``draft`` writes the
answer; ``review`` waits for a human (``interrupt``); ``send`` delivers the approved answer.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph, add_messages
from langgraph.types import Command, RetryPolicy, Send, interrupt


class AgentState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: bool
    sent_at: str


@dataclass
class Services:
    """The outside world the agent talks to (latencies in seconds)."""

    latency: dict[str, float] = field(default_factory=lambda: {
        "search": 2.0, "weather": 0.5, "exchange_rate": 1.0})
    outage_until: datetime = datetime(2025, 1, 1, 0, 20, tzinfo=UTC)
    outbox: list[str] = field(default_factory=list)
    rate_calls: int = 0


class ServiceDown(ConnectionError):
    """The exchange-rate service refused the call."""


def build_agent(services: Services | None = None) -> StateGraph:
    """The agent's graph builder (compile it with your checkpointer)."""
    svc = services if services is not None else Services()

    async def plan(state: AgentState) -> dict[str, Any]:
        question = state["messages"][-1].content
        calls = [
            {"name": "search", "args": {"q": question}, "id": "call_search"},
            {"name": "weather", "args": {"city": "Lisbon"}, "id": "call_weather"},
            {"name": "exchange_rate", "args": {"pair": "EUR/USD"}, "id": "call_rate"},
        ]
        return {"messages": [AIMessage(content="", tool_calls=calls, id="ai-plan")]}

    def fan_out(state: AgentState) -> list[Send]:
        last = state["messages"][-1]
        return [Send("call_tool", {"call": call}) for call in last.tool_calls]

    async def call_tool(payload: dict[str, Any]) -> dict[str, Any]:
        call = payload["call"]
        await asyncio.sleep(svc.latency.get(call["name"], 0.0))
        if call["name"] == "search":
            content = f"3 flights found for {call['args']['q']!r}"
        elif call["name"] == "weather":
            content = "sunny, 21°C"
        else:
            svc.rate_calls += 1
            if datetime.now(UTC) < svc.outage_until:
                raise ServiceDown("exchange-rate service unavailable")
            content = "1 EUR = 1.08 USD"
        return {"messages": [ToolMessage(content=content, tool_call_id=call["id"])]}

    def draft(state: AgentState) -> dict[str, Any]:
        tools = sorted((m for m in state["messages"] if isinstance(m, ToolMessage)),
                       key=lambda m: m.tool_call_id)
        notes = [m.content for m in state["messages"]
                 if isinstance(m, HumanMessage) and m.content.startswith("note:")]
        text = "; ".join(str(t.content) for t in tools)
        if notes:
            text += " (" + ", ".join(str(n) for n in notes) + ")"
        return {"messages": [AIMessage(content=f"Proposal: {text}")]}

    def review(state: AgentState) -> Command[Any]:
        proposal = state["messages"][-1].content
        decision = interrupt({"proposal": proposal})
        if decision == "approve":
            return Command(update={"approved": True}, goto="send")
        return Command(update={"messages": [HumanMessage(content=f"note: {decision}")]},
                       goto="draft")

    def send(state: AgentState) -> dict[str, Any]:
        svc.outbox.append(str(state["messages"][-1].content))
        return {"sent_at": datetime.now(UTC).isoformat()}

    g = StateGraph(AgentState)
    g.add_node("plan", plan)
    g.add_node("call_tool", call_tool, retry_policy=RetryPolicy(
        initial_interval=600.0, backoff_factor=2.0, max_interval=3600.0, max_attempts=5,
        retry_on=ServiceDown))
    g.add_node("draft", draft)
    g.add_node("review", review, destinations=("send", "draft"))
    g.add_node("send", send)
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", fan_out, ["call_tool"])
    g.add_edge("call_tool", "draft")
    g.add_edge("draft", "review")
    g.add_edge("send", END)
    return g


def question(text: str = "Lisbon next Friday") -> dict[str, Any]:
    """The agent's input for a user question."""
    return {"messages": [HumanMessage(content=text, id="user-1")]}


__all__ = ["AgentState", "ServiceDown", "Services", "build_agent", "question"]
