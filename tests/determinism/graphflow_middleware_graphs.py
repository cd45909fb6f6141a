"""A graph with middleware and guardrails for the same-seed-same-bytes checks (workers of the
cross-process check import this module).

``refunds``: ``plan`` fans out to three async ``quote`` nodes, each behind an async ``wrap``
that sleeps a seeded, virtual while, reads the clock and draws a uuid in the task, and a
guardrail that rewrites a quote over the limit down to it, or blocks one that is far over
(the blocked task takes its failure route, ``review``).
"""

from __future__ import annotations

import datetime
import operator
import random
import uuid
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
    NodeContext,
    Rewrite,
    emit,
)

LIMIT = 60


class Quotes(BaseModel):
    """Quotes gathered in parallel, and those sent to review."""

    quotes: Annotated[list[int], operator.add] = []
    review: Annotated[list[str], operator.add] = []


async def _timed(state: Quotes, ctx: NodeContext, call_next: Any) -> Any:
    await anyio.sleep(random.random())  # the task's seeded entropy, virtual time
    emit({"at": datetime.datetime.now().isoformat(), "trace": str(uuid.uuid4())},
         channel="trace")
    return await call_next(state)


def _limit(state: Quotes, ctx: NodeContext, patch: dict[str, Any] | None) -> Any:
    quote = (patch or {}).get("quotes", [0])[0]
    if quote > 2 * LIMIT:
        return Block(f"quote {quote} is far over {LIMIT}")
    if quote > LIMIT:
        return Rewrite({"quotes": [LIMIT]})
    return Allow()


def _quote(name: str) -> Any:
    async def quote(state: Quotes, ctx: NodeContext) -> dict[str, Any]:
        await anyio.sleep(ctx.random().random())
        return {"quotes": [ctx.random().randrange(150)]}
    quote.__name__ = name
    return quote


def refunds() -> Any:
    """The graph (a fresh compile)."""
    g = Graph("quotes", Quotes, middleware=[Middleware("timed", wrap=_timed)],
              guardrails=[Guardrail("limit", _limit, nodes=["q1", "q2", "q3"])])
    g.node("plan", lambda s: None)
    for name in ("q1", "q2", "q3"):
        g.node(name, _quote(name), on_error="review")
    g.node("review", lambda s, ctx: {"review": [ctx.failure["node"]]})
    g.edge(START, "plan")
    g.edge("plan", ["q1", "q2", "q3"])
    for name in ("q1", "q2", "q3"):
        g.edge(name, END)
    g.edge("review", END)
    return g.compile()
