"""A chain of N nodes, each adding one to a counter, with a checkpoint every step: the graph
the store tests run to count what a step costs (round trips, loop turns, rows a step)."""

from __future__ import annotations

from pydantic import BaseModel

from pytest_graphflow import END, START, CompiledGraph, Graph


class Count(BaseModel):
    """The chain's state: how many nodes have run."""

    n: int = 0


def counting_chain(name: str, steps: int) -> CompiledGraph:
    """``steps`` nodes ``n0``, ``n1``, ... in a row, each adding one to ``n``, compiled with
    a checkpoint every step; the graph is ``{name}{steps}``."""
    g = Graph(f"{name}{steps}", Count)
    prev = START
    for i in range(steps):
        g.node(f"n{i}", lambda s: {"n": s.n + 1})
        g.edge(prev, f"n{i}")
        prev = f"n{i}"
    return g.edge(prev, END).compile(checkpoint_policy="every_step")
