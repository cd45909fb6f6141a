"""Graphs whose nodes use ``uuid``/``random`` directly, not ``ctx.uuid()``/``ctx.random()``
(workers of the cross-process checks import this module).

* ``tickets``: ``open`` makes a ticket id with ``uuid.uuid4()`` and a score with
  ``random.random()`` in a sync node; ``a``/``b`` (async, a parallel batch) draw with
  ``random.randint``, ``random.choice``, ``random.Random()`` and ``uuid.uuid1()``.
* ``one_ticket``: ``open`` alone.
* ``approval``: ``open`` makes a ticket id, then asks for approval (``interrupt``) and
  returns both; the resumed task runs again from the top.
"""

from __future__ import annotations

import random
import uuid
from typing import Annotated, Any

import anyio
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, Reducer, interrupt


def _extend(old: list[str], new: list[str]) -> list[str]:
    return old + new


class Tickets(BaseModel):
    ticket: str = ""
    score: float = 0.0
    draws: Annotated[list[str], Reducer(_extend)] = []
    approved: str = ""


def open_ticket(state: Tickets) -> dict[str, Any]:
    return {"ticket": f"T-{uuid.uuid4().hex[:12]}", "score": random.random()}


def _drawer(name: str) -> Any:
    async def draw(state: Tickets) -> dict[str, Any]:
        first = random.randint(1, 10**9)
        await anyio.sleep(1.0)  # the other branch runs meanwhile
        mine = random.Random()
        return {"draws": [f"{name}:{first}:{random.choice('abcdefgh')}:{mine.random()}:"
                          f"{uuid.uuid1()}"]}
    return draw


def tickets() -> Graph:
    g = Graph("entropy-tickets", Tickets)
    g.node("open", open_ticket)
    g.node("a", _drawer("a"))
    g.node("b", _drawer("b"))
    g.edge(START, "open").edge("open", ["a", "b"]).edge(["a", "b"], END)
    return g


def one_ticket() -> Graph:
    g = Graph("entropy-one", Tickets)
    g.node("open", open_ticket)
    g.edge(START, "open").edge("open", END)
    return g


def approve(state: Tickets) -> dict[str, Any]:
    ticket = f"T-{uuid.uuid4().hex[:12]}"
    answer = interrupt({"ticket": ticket}, id="approve")
    return {"ticket": ticket, "approved": str(answer), "score": random.random()}


def approval() -> Graph:
    g = Graph("entropy-approval", Tickets)
    g.node("approve", approve)
    g.edge(START, "approve").edge("approve", END)
    return g
