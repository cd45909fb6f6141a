"""The support-desk app of test_lg_postgres.py (imported there and by the fresh
interpreters of its restart test): a ``uuid4`` ticket id, two ``Send`` searches that block
3 s (virtual, at the same time), a two-hour webhook wait before an approval interrupt, and a
``datetime.now()`` stamp."""

from __future__ import annotations

import asyncio
import operator
import time
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt


class Desk(TypedDict, total=False):
    ticket: str
    hits: Annotated[list[str], operator.add]
    verdict: str
    closed_at: str


def open_ticket(state: Desk) -> dict[str, Any]:
    return {"ticket": f"T-{uuid.uuid4().hex[:12]}"}


def search(state: dict[str, Any]) -> dict[str, Any]:
    time.sleep(3)  # a blocking client: virtual, the two searches at once
    return {"hits": [state["source"]]}


async def approve(state: Desk) -> dict[str, Any]:
    await asyncio.sleep(2 * 3600)  # the webhook wait
    return {"verdict": interrupt({"ticket": state["ticket"], "hits": state["hits"]})}


def close(state: Desk) -> dict[str, Any]:
    return {"closed_at": datetime.now(UTC).isoformat()}


def build() -> StateGraph:
    """The app's builder."""
    g = StateGraph(Desk)
    g.add_node("open", open_ticket)
    g.add_node("search", search)
    g.add_node("approve", approve)
    g.add_node("close", close)
    g.add_edge(START, "open")
    g.add_conditional_edges(
        "open", lambda s: [Send("search", {"source": x}) for x in ("docs", "tickets")],
        ["search"])
    g.add_edge("search", "approve")
    g.add_edge("approve", "close")
    g.add_edge("close", END)
    return g
