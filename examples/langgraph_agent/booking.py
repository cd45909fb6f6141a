"""A hotel-booking flow written with LangGraph, as a team would write it: nothing in here
knows about the tests.

Flow: ``quote`` prices the stay; ``book`` is a subgraph that holds a room under a fresh
booking id (``uuid.uuid4()`` in node code, stamped with ``datetime.now()``) and then asks the
guest to confirm the payment (``interrupt``); ``notify`` waits two hours for the hotel's
webhook and records when the guest was told.
"""

from __future__ import annotations

import asyncio
import operator
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class Booking(TypedDict, total=False):
    """The booking subgraph's state (keys it shares with the trip flow back to the parent)."""

    guest: str
    price: int
    booking_id: str
    held_at: str
    paid: bool


class Trip(TypedDict, total=False):
    """The parent flow's state."""

    guest: str
    price: int
    booking_id: str
    held_at: str
    paid: bool
    notified_at: str
    log: Annotated[list[str], operator.add]


def build_booking_subgraph() -> StateGraph:
    """``hold`` a room under a new booking id, then ``pay``: the guest confirms (interrupt)."""

    def hold(state: Booking) -> dict[str, Any]:
        return {"booking_id": f"BK-{uuid.uuid4().hex[:10]}",
                "held_at": datetime.now(UTC).isoformat()}

    def pay(state: Booking) -> dict[str, Any]:
        answer = interrupt({"booking_id": state["booking_id"], "price": state["price"]})
        return {"paid": answer == "pay"}

    g = StateGraph(Booking)
    g.add_node("hold", hold)
    g.add_node("pay", pay)
    g.add_edge(START, "hold")
    g.add_edge("hold", "pay")
    g.add_edge("pay", END)
    return g


def build_booking() -> StateGraph:
    """The trip flow's graph builder (compile it with your checkpointer)."""

    def quote(state: Trip) -> dict[str, Any]:
        return {"price": 120 * 3, "log": [f"quoted {state['guest']}"]}

    async def notify(state: Trip) -> dict[str, Any]:
        await asyncio.sleep(2 * 3600)  # the hotel's webhook takes two hours
        verdict = "confirmed" if state.get("paid") else "released"
        return {"notified_at": datetime.now(UTC).isoformat(),
                "log": [f"{state['booking_id']} {verdict}"]}

    g = StateGraph(Trip)
    g.add_node("quote", quote)
    g.add_node("book", build_booking_subgraph().compile())
    g.add_node("notify", notify)
    g.add_edge(START, "quote")
    g.add_edge("quote", "book")
    g.add_edge("book", "notify")
    g.add_edge("notify", END)
    return g


def trip(guest: str = "Ana") -> dict[str, Any]:
    """The flow's input for one guest."""
    return {"guest": guest, "log": []}


__all__ = ["Booking", "Trip", "build_booking", "build_booking_subgraph", "trip"]
