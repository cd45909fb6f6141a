"""Semantics untouched: final states under the harness equal plain LangGraph's.

Plain LangGraph (``ainvoke`` on its own event loop, a plain ``InMemorySaver``) and the harness
run the same graph; their final states (or the type of the error they end with) must agree.
Graphs come from a seeded generator: layers of sync and async nodes, fan-out and waiting
joins, conditional edges, ``Send`` map steps, reducers and a last-value key, interrupts
answered on resume, a flaky node retried by a ``RetryPolicy``, ids from ``uuid.uuid4()`` in
node code (compared as ``u-<id>``: plain LangGraph's are random), and subgraph nodes (a child
of one or two nodes, which may interrupt or draw a ``uuid4`` itself).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import operator
import random
import re
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, RetryPolicy, Send, interrupt
from langgraph_agent.agent import Services, build_agent, question

from pytest_graphflow.langgraph import LangGraphHarness, drive

GRAPHS = 120


class GenState(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    count: Annotated[int, operator.add]
    last: str


class ChildIn(TypedDict, total=False):
    count: int


class ChildOut(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


class ChildState(ChildIn, ChildOut):
    pass


def child(name: str, rng: random.Random) -> Any:
    """A subgraph node: reads the parent's ``count``, gives back its own ``log`` entries."""
    g = StateGraph(ChildState, input_schema=ChildIn, output_schema=ChildOut)
    steps = [f"{name}.c{j}" for j in range(rng.randint(1, 2))]
    for step in steps:
        kind = rng.choice(["sync", "interrupt", "uuid"])

        def body(state: ChildState, step: str = step, kind: str = kind) -> dict[str, Any]:
            if kind == "interrupt":
                return {"log": [f"{step}:{interrupt(step)}"]}
            if kind == "uuid":
                return {"log": [f"{step}:u-{uuid.uuid4().hex[:8]}"]}
            return {"log": [f"{step}:{state.get('count', 0)}"]}

        g.add_node(step, body)
    g.add_edge(START, steps[0])
    for a, b in itertools.pairwise(steps):
        g.add_edge(a, b)
    g.add_edge(steps[-1], END)
    return g.compile()


def generate(seed: int) -> StateGraph:
    """A small graph drawn from ``seed`` (same seed, same graph)."""
    rng = random.Random(seed)
    layers = [[f"n{i}_{j}" for j in range(rng.randint(1, 3))] for i in range(rng.randint(1, 4))]
    g = StateGraph(GenState)
    failed: set[str] = set()

    def make(name: str, kind: str, writes_last: bool) -> Any:
        weight = rng.randint(1, 5)

        def body(state: GenState, extra: str = "") -> dict[str, Any]:
            out: dict[str, Any] = {"log": [name + extra], "count": weight}
            if kind == "uuid":
                out["log"] = [f"{name}:u-{uuid.uuid4().hex[:8]}"]
            if kind == "interrupt":
                out["log"] = [f"{name}:{interrupt(name)}"]
            if kind == "flaky" and name not in failed:
                failed.add(name)
                raise ConnectionError(f"{name} is flaky")
            if writes_last:
                out["last"] = name
            return out

        if kind == "async":
            async def node(state: GenState) -> dict[str, Any]:
                await asyncio.sleep(0)
                return body(state)
            return node
        return body

    for i, layer in enumerate(layers):
        for name in layer:
            kind = rng.choice(["sync", "async", "sync", "async", "interrupt", "flaky", "uuid",
                               "subgraph"])
            if kind == "subgraph":
                g.add_node(name, child(name, rng))
            else:
                policy = (RetryPolicy(initial_interval=0.0, jitter=False, max_attempts=2)
                          if kind == "flaky" else None)
                g.add_node(name, make(name, kind, len(layer) == 1 or rng.random() < .2),
                           retry_policy=policy)
            if i == 0:
                g.add_edge(START, name)
    g.add_node("worker", lambda item: {"log": [f"w{item['n']}"], "count": item["n"]})
    g.add_edge("worker", END)
    for i, layer in enumerate(layers):
        nxt = layers[i + 1] if i + 1 < len(layers) else None
        if nxt is None:
            for name in layer:
                if rng.random() < 0.3:
                    n = rng.randint(1, 3)
                    g.add_conditional_edges(
                        name, lambda s, n=n: [Send("worker", {"n": k}) for k in range(n)],
                        ["worker"])
                else:
                    g.add_edge(name, END)
            continue
        style = rng.choice(["fan", "join", "branch"])
        if style == "join" and len(layer) > 1:
            for target in nxt:
                g.add_edge(list(layer), target)
        elif style == "branch":
            for name in layer:
                options = list(nxt)
                g.add_conditional_edges(
                    name, lambda s, o=options: o[s.get("count", 0) % len(o)], options)
        else:
            for name in layer:
                for target in rng.sample(nxt, rng.randint(1, len(nxt))):
                    g.add_edge(name, target)
    return g


def _answer(value: Any) -> str:
    return f"{value}!"


def plain(builder: StateGraph, input: Any) -> str:
    """Run with LangGraph alone: ainvoke, answering interrupts, as a user would."""
    app = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "plain"}}

    async def main() -> str:
        try:
            result = await app.ainvoke(input, config)
            for _ in range(20):
                pending = result.get("__interrupt__") if isinstance(result, dict) else None
                if not pending:
                    break
                result = await app.ainvoke(
                    Command(resume={i.id: _answer(i.value) for i in pending}), config)
        except Exception as exc:
            return f"error {type(exc).__name__}"
        return _key(dict((await app.aget_state(config)).values))

    return asyncio.run(main())


def harnessed(builder: StateGraph, input: Any, seed: int) -> str:
    h = LangGraphHarness(builder, seed=seed)
    drive(h, input, lambda i: _answer(i.payload))
    result = h.last
    assert result is not None
    if result.status == "failed":
        return f"error {type(result.error).__name__}"
    return _key(h.state())


def _key(values: dict[str, Any]) -> str:
    def clean(v: Any) -> Any:
        if isinstance(v, BaseMessage):  # ids are random in plain LangGraph
            return {"type": v.type, "content": v.content}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v
    text = json.dumps({k: clean(v) for k, v in values.items()}, sort_keys=True, default=str)
    return _UUID_HEX.sub("u-<id>", text)


_UUID_HEX = re.compile(r"u-[0-9a-f]{8}")


@pytest.mark.parametrize("block", range(4))
def test_generated_graphs_end_as_under_plain_langgraph(block: int) -> None:
    size = GRAPHS // 4
    for seed in range(block * size, (block + 1) * size):
        expected = plain(generate(seed), {"log": [], "count": 0})
        got = harnessed(generate(seed), {"log": [], "count": 0}, seed)
        assert got == expected, f"graph {seed}"


def test_the_generator_covers_what_it_claims() -> None:
    kinds = {"send": 0, "interrupt": 0, "error": 0, "join": 0, "subgraph": 0,
             "subgraph-interrupt": 0, "uuid": 0}
    for seed in range(GRAPHS // 3):
        g = generate(seed)
        kinds["join"] += bool(g.waiting_edges)
        kinds["subgraph"] += any(n.subgraphs for n in g.compile().nodes.values())
        outcome = plain(generate(seed), {"log": [], "count": 0})
        kinds["error"] += outcome.startswith("error")
        kinds["send"] += '"w0"' in outcome
        kinds["interrupt"] += ":n" in outcome and "!" in outcome
        kinds["subgraph-interrupt"] += ".c" in outcome and "!" in outcome
        kinds["uuid"] += "u-<id>" in outcome
    assert all(kinds.values()), kinds


def test_the_example_agent_ends_as_under_plain_langgraph() -> None:
    fast = {"search": 0.0, "weather": 0.0, "exchange_rate": 0.0}
    # plain LangGraph runs in real time (the outage window is long past); the harness in
    # virtual time from 2025-01-01, so its exchange-rate call is retried through the outage
    plain_app = build_agent(Services(latency=dict(fast))).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "plain"}}

    async def main() -> dict[str, Any]:
        await plain_app.ainvoke(question(), config)
        await plain_app.ainvoke(Command(resume="add a hotel"), config)
        await plain_app.ainvoke(Command(resume="approve"), config)
        return dict((await plain_app.aget_state(config)).values)

    expected = asyncio.run(main())
    services = Services(latency=dict(fast))
    h = LangGraphHarness(build_agent(services))
    h.trace(question())
    h.resume("add a hotel")
    h.resume("approve")
    got = h.state()
    assert services.rate_calls == 3  # two failures in the outage, then success

    for values in (expected, got):
        values.pop("sent_at")
    assert _key(got) == _key(expected)
    assert datetime.now(UTC).year > 2025  # the plain run was in real time
