"""The approval graph of the deadline tests (issue 26, "Deadlines on human input"): a refund
waits for a human's approval for 3 days; unanswered, it is escalated. Importable by the
worker processes of ``tests/workers``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel

from pytest_graphflow import END, START, CompiledGraph, Graph, TimeoutAnswer, interrupt

T0 = datetime(2025, 1, 1, tzinfo=UTC)
"""Where every test's virtual clock starts (``VirtualClock``'s default start)."""

THREE_DAYS = timedelta(days=3)


class Approval(BaseModel):
    amount: int = 0
    decision: Any = None
    escalated: bool = False


def approve(state: Approval) -> dict[str, Any]:
    answer = interrupt({"refund": state.amount}, id="approve", deadline=THREE_DAYS)
    return {"decision": answer}


def escalate(state: Approval) -> dict[str, Any]:
    return {"escalated": True}


def build(on_timeout: str | TimeoutAnswer | None = "escalate", *,
          graph_id: str = "approval") -> CompiledGraph:
    """The approval graph; ``escalate`` (reached only by the timeout route) is there when
    the route names it."""
    g = Graph(graph_id, Approval)
    g.node("approve", approve, effect="human")
    g.edge(START, "approve").edge("approve", END)
    if on_timeout == "escalate":
        g.node("escalate", escalate).edge("escalate", END)
    return g.compile(on_timeout=on_timeout)
