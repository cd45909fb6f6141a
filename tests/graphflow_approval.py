"""The approval graph the runtime and plugin tests pause and resume: ``draft`` adds one,
``approve`` asks (``interrupt({"draft": n}, id="ok")``) and keeps the answer, ``publish`` adds
ten — the shape of the benchmark's round trip (``benchmarks/bench_vs_langgraph.py``)."""

from __future__ import annotations

from pydantic import BaseModel

from pytest_graphflow import END, START, CompiledGraph, Graph, interrupt


class Draft(BaseModel):
    """The approval graph's state: a counter and the answer given."""

    n: int = 0
    answer: str = ""


def approval_graph(name: str = "approval") -> CompiledGraph:
    """``draft`` → ``approve`` (pauses with ``{"draft": n}``, id ``"ok"``) → ``publish``,
    as graph ``name``."""
    g = Graph(name, Draft)
    g.node("draft", lambda s: {"n": s.n + 1})
    g.node("approve", lambda s: {"answer": interrupt({"draft": s.n}, id="ok")})
    g.node("publish", lambda s: {"n": s.n + 10})
    g.edge(START, "draft").edge("draft", "approve").edge("approve", "publish")
    return g.edge("publish", END).compile()
