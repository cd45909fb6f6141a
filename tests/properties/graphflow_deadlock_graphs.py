"""Graphs for the deadlock findings (issue 25), importable by name from a worker process.

``rendezvous``: two nodes of one batch, each waiting for an event the other sets only after
its own wait, so under the runtime's sequential virtual time neither can go on. ``handoff``
is its fixed twin: the same two nodes in sequence, passing data through the state.
``sqlite`` opens a store for the process-killing crash check.
"""

from __future__ import annotations

from typing import Any

import anyio
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, SQLiteCheckpointStore


class S(BaseModel):
    a: int = 0
    b: int = 0


def rendezvous() -> Any:
    """Each node of one batch waits for the other first: a deadlock."""
    a_done, b_done = anyio.Event(), anyio.Event()  # fresh per run: the graph is a factory

    async def a(state: S) -> dict[str, int]:
        await b_done.wait()
        a_done.set()
        return {"a": 1}

    async def b(state: S) -> dict[str, int]:
        await a_done.wait()
        b_done.set()
        return {"b": 1}

    g = Graph("rendezvous", S)
    g.node("a", a)
    g.node("b", b)
    g.edge(START, ["a", "b"])
    g.edge("a", END)
    g.edge("b", END)
    return g.compile()


def handoff() -> Any:
    """The fixed twin: ``b`` runs after ``a`` and reads what it wrote from the state."""

    async def a(state: S) -> dict[str, int]:
        await anyio.sleep(1)
        return {"a": 1}

    async def b(state: S) -> dict[str, int]:
        return {"b": state.a + 1}

    g = Graph("handoff", S)
    g.node("a", a)
    g.node("b", b)
    g.edge(START, "a")
    g.edge("a", "b")
    g.edge("b", END)
    return g.compile()


def sqlite(directory: str) -> SQLiteCheckpointStore:
    """A SQLite store in ``directory``."""
    return SQLiteCheckpointStore(f"{directory}/runs.db")
