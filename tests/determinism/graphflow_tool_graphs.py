"""A graph whose nodes call tools, for the same-seed-same-bytes checks (workers of the
cross-process check import this module).

``shop``: ``plan`` fans out to three async ``buy`` nodes. Each calls a ``quote`` tool (async,
``external``, a seeded virtual latency, a carrier that times out on a seeded draw and is
retried on the virtual clock) and a ``reserve`` tool whose update appends to a reducer key
and whose id comes from ``uuid.uuid4()`` inside the tool (the task's seeded entropy). The
``b2`` node's ``reserve`` asks for an approval it declares, so the run pauses and resumes.
Every fake lives in the graph a ``shop()`` call builds.
"""

from __future__ import annotations

import operator
import random
import uuid
from typing import Annotated, Any

import anyio
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Graph,
    NodeContext,
    Retry,
    ToolCall,
    ToolResult,
    interrupt,
    record_effect,
    tool,
)

ANSWERS = {"approve": "yes"}


class Basket(BaseModel):
    """Items reserved in parallel."""

    items: Annotated[list[str], operator.add] = []


def shop() -> Any:
    """The graph (a fresh compile, fresh fakes)."""
    reserved: dict[str, str] = {}

    @tool(retry=Retry(attempts=3, backoff=1.5, retry_on=(TimeoutError,)))
    async def quote(args: dict[str, Any], call: ToolCall) -> int:
        await anyio.sleep(random.random())  # the task's seeded entropy, virtual time
        if call.attempt == 1 and random.random() < 0.5:
            raise TimeoutError("carrier timed out")
        return random.randrange(100)

    @tool(updates=["items"], asks=["approve"])
    def reserve(args: dict[str, Any], call: ToolCall) -> ToolResult:
        if args["node"] == "b2" and interrupt(args, id="approve") != "yes":
            return ToolResult(value=None)
        if call.key not in reserved:
            reserved[call.key] = str(uuid.uuid4())
            record_effect("reserve", key=call.key)
        return ToolResult(value=reserved[call.key],
                          update={"items": [f"{args['node']}:{args['price']}"]})

    def buyer(name: str) -> Any:
        async def buy(state: Basket, ctx: NodeContext) -> dict[str, Any]:
            price = await ctx.acall_tool(quote, {"node": name})
            rid = await ctx.acall_tool(reserve, {"node": name, "price": price})
            return {"items": [f"{name}:{rid}"]}
        buy.__name__ = name
        return buy

    g = Graph("shop", Basket)
    g.node("plan", lambda s: None)
    for name in ("b1", "b2", "b3"):
        g.node(name, buyer(name), effect="external")
    g.edge(START, "plan")
    g.edge("plan", ["b1", "b2", "b3"])
    g.edge(["b1", "b2", "b3"], END)
    return g.compile()
