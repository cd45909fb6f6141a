"""Graphs and stores the cross-process checks are tested on (workers import this module).

* ``unordered``: a node that lists a ``set`` of strings (its order follows ``hash()``, which
  changes with ``PYTHONHASHSEED``) and a route that picks by that order; ``ordered`` is its
  fixed twin (``sorted``).
* ``declared_set``: a state key declared ``set[str]`` written from a set; the runtime stores
  it as a sorted list, so the stream is the same in every process.
* ``checkout``: plan -> charge (external) -> notify (write), checkpointed every step.
* ``write_behind(directory)``: a store over a SQLite file that acknowledges saves at once and
  writes them to the file only every fourth save (a write-behind cache); ``write_through`` is
  its fixed twin; ``sqlite`` is the plain SQLite store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pytest_graphflow import END, START, Checkpoint, Graph, SQLiteCheckpointStore

TAGS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


class Tags(BaseModel):
    tags: list[str] = []
    lane: str = ""


def _tags_graph(order: Any) -> Any:
    def collect(s: Tags) -> dict[str, Any]:
        return {"tags": order(set(TAGS))}

    def route(s: Tags) -> str:
        return "fast" if s.tags[0] < "delta" else "slow"

    g = Graph("tags", Tags)
    g.node("collect", collect)
    g.node("fast", lambda s: {"lane": "fast"})
    g.node("slow", lambda s: {"lane": "slow"})
    g.edge(START, "collect")
    g.branch("collect", route, ["fast", "slow"])
    g.edge("fast", END)
    g.edge("slow", END)
    return g.compile()


def unordered() -> Any:
    """The planted bug: the set's order decides the patch and the route."""
    return _tags_graph(list)


def ordered() -> Any:
    """The fixed twin."""
    return _tags_graph(sorted)


class TagSet(BaseModel):
    tags: set[str] = set()
    groups: dict[str, frozenset[str]] = {}


def declared_set() -> Any:
    """A key whose declared type is a set: pydantic would list it in hash order."""
    g = Graph("tagset", TagSet)
    g.node("collect", lambda s: {"tags": set(TAGS)})
    g.node("group", lambda s: {"groups": {"greek": frozenset(s.tags)}, "tags": s.tags | {"iota"}})
    g.edge(START, "collect").edge("collect", "group").edge("group", END)
    return g.compile(checkpoint_policy="every_step")


class Order(BaseModel):
    amount: int = 0
    receipt: str = ""
    log: list[str] = []


def checkout() -> Any:
    g = Graph("checkout", Order)
    g.node("plan", lambda s: {"log": [*s.log, "plan"]})
    g.node("charge", lambda s: {"receipt": f"rcpt-{s.amount}", "log": [*s.log, "charge"]},
           effect="external")
    g.node("ship", lambda s: {"log": [*s.log, "ship"]})
    g.node("notify", lambda s: {"log": [*s.log, "notify"]}, effect="write")
    g.edge(START, "plan")
    g.edge("plan", "charge")
    g.edge("charge", "ship")
    g.edge("ship", "notify")
    g.edge("notify", END)
    return g.compile()


class WriteBehindStore:
    """Acknowledges a save at once; writes buffered saves to the file every ``every`` saves."""

    def __init__(self, directory: str, every: int) -> None:
        self.inner = SQLiteCheckpointStore(Path(directory) / "store.db")
        self.every = every
        self.buffer: list[Checkpoint] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def save(self, checkpoint: Checkpoint) -> None:
        self.buffer.append(checkpoint)
        if len(self.buffer) >= self.every:
            for cp in self.buffer:
                await self.inner.save(cp)
            self.buffer.clear()

    async def get(self, checkpoint_id: str) -> Checkpoint | None:
        for cp in self.buffer:
            if cp.id == checkpoint_id:
                return cp
        return await self.inner.get(checkpoint_id)

    async def latest(self, run_id: str) -> Checkpoint | None:
        for cp in reversed(self.buffer):
            if cp.run_id == run_id:
                return cp
        return await self.inner.latest(run_id)

    async def list(self, run_id: str | None = None, *,
                   thread_id: str | None = None) -> list[Checkpoint]:
        found = await self.inner.list(run_id, thread_id=thread_id)
        return found + [cp for cp in self.buffer
                        if (run_id is None or cp.run_id == run_id)
                        and (thread_id is None or cp.thread_id == thread_id)]

    def close(self) -> None:
        self.inner.close()  # a clean shutdown would flush; a killed process never gets here


def write_behind(directory: str) -> WriteBehindStore:
    """The planted bug: acknowledged saves live in memory until the fourth one."""
    return WriteBehindStore(directory, every=4)


def write_through(directory: str) -> WriteBehindStore:
    """The fixed twin: every save reaches the file before it returns."""
    return WriteBehindStore(directory, every=1)


def sqlite(directory: str) -> SQLiteCheckpointStore:
    return SQLiteCheckpointStore(Path(directory) / "store.db")
