"""The chain both store benchmarks run, built the same way on each side: ``n`` sequential
nodes, each adding 1 to a counter, a checkpoint after every step."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from typing_extensions import TypedDict

from pytest_graphflow import END, START, Graph


class GFState(BaseModel):
    n: int = 0


class LGState(TypedDict):
    n: int


def gf_chain(n: int, name: str = "chain") -> Any:
    """The pytest-graphflow chain (``checkpoint_policy="every_step"``)."""
    g = Graph(name, GFState)
    prev = START
    for i in range(n):
        g.node(f"n{i}", lambda s: {"n": s.n + 1})
        g.edge(prev, f"n{i}")
        prev = f"n{i}"
    return g.edge(prev, END).compile(checkpoint_policy="every_step")


def lg_chain(n: int, saver: Any) -> Any:
    """The LangGraph chain (it checkpoints every step) over ``saver``."""
    from langgraph.graph import StateGraph

    g = StateGraph(LGState)
    prev = "__start__"
    for i in range(n):
        g.add_node(f"n{i}", lambda s: {"n": s["n"] + 1})
        g.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    g.add_edge(prev, "__end__")
    return g.compile(checkpointer=saver)
