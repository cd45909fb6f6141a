"""Runs of every kind a leg starts and ends with, for the stores that fold claims into their
commits (``StoreFeatures.folded_claims``: PostgreSQL's and SQLite's tests compare what the
folded path stores and draws with the unfolded path's)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from graphflow_chains import counting_chain
from pytest_graphflow import (
    END,
    START,
    CheckpointStore,
    CompiledGraph,
    Graph,
    GraphRuntime,
    Resume,
    VirtualClock,
    interrupt,
)


class Folded(BaseModel):
    """The state of the two graphs here: a counter and the answer given."""

    n: int = 0
    answer: str = ""


def paused_approval() -> CompiledGraph:
    """``draft`` adds one, ``approve`` pauses (``interrupt({"draft": n}, id="ok")``), END."""
    g = Graph("approval", Folded)
    g.node("draft", lambda s: {"n": s.n + 1})
    g.node("approve", lambda s: {"answer": interrupt({"draft": s.n}, id="ok")})
    g.edge(START, "draft").edge("draft", "approve").edge("approve", END)
    return g.compile()


def failing() -> CompiledGraph:
    """``a`` adds one, ``b`` raises ``RuntimeError("boom")``."""

    def boom(s: Folded) -> dict[str, Any]:
        raise RuntimeError("boom")

    g = Graph("failing", Folded)
    g.node("a", lambda s: {"n": s.n + 1}).node("b", boom)
    return g.edge(START, "a").edge("a", "b").edge("b", END).compile()


def every_leg_kind(store: CheckpointStore) -> list[str]:
    """Runs of every kind a leg starts and ends with, in two runtimes of one seed (the
    second draws the first's run ids: taken in the store, it skips them); what each gave."""
    seen: list[str] = []
    for _ in range(2):
        runtime = GraphRuntime(store, clock=VirtualClock(), seed=7)
        seen.append(runtime.invoke(counting_chain("chain", 3)).run_id)
        try:  # a refused input on a new thread draws ids as before
            runtime.invoke(counting_chain("chain", 1), {"n": "not a number"})
        except Exception as exc:
            seen.append(type(exc).__name__)
        seen.append(runtime.invoke(counting_chain("chain", 2)).run_id)
        for _ in range(2):  # a named thread, claimed again by its next run
            seen.append(runtime.invoke(counting_chain("again", 2), thread_id="kept").run_id)
        paused = runtime.invoke(paused_approval())
        seen.append(paused.status)
        done = runtime.resume(paused.run_id, Resume("yes"))
        seen.append(f"{done.status} {done.data}")
        failed = runtime.invoke(failing())
        seen.append(f"{failed.status} {failed.run_id}")
        try:  # a thread mid-execution: refused once claimed (and released)
            runtime.invoke(counting_chain("chain", 1), thread_id=failed.thread_id)
        except Exception as exc:
            seen.append(type(exc).__name__)
    return seen
