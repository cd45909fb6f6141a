"""A chain of N nodes, each adding one to a counter, with a checkpoint every step: the graph
the store tests run to count what a step costs (round trips, loop turns, rows a step); and a
ring of nodes run round until a limit, for paths of any length."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

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


class Lap(BaseModel):
    """The ring's state: how many nodes have run, and when to stop."""

    n: int = 0
    limit: int = 0


def ring(name: str, nodes: Sequence[str]) -> CompiledGraph:
    """``nodes`` in a ring, one a step, each adding one to ``n``, round until ``n`` reaches
    ``limit``, compiled with a checkpoint every step; the graph is ``name``."""
    g = Graph(name, Lap)
    for node in nodes:
        g.node(node, lambda s: {"n": s.n + 1})
    g.edge(START, nodes[0])
    for a, b in itertools.pairwise(nodes):
        g.edge(a, b)
    g.branch(nodes[-1], lambda s: "again" if s.n < s.limit else "done",
             {"again": nodes[0], "done": END})
    return g.compile(checkpoint_policy="every_step")
