"""Seed 004's refusals of a run as a whole, on every store and both anyio backends: an
execution passed to another graph (``ExecutionMismatch``), and an unexpected throwable - a
clock that throws - at admission or mid-run (``UnexpectedError``): each changes nothing the
store holds beyond what was committed, and leaves the thread's claim released."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    CompiledGraph,
    ExecutionMismatch,
    Graph,
    GraphRuntime,
    Resume,
    SnapshotMismatch,
    UnexpectedError,
    VirtualClock,
    interrupt,
)

pytestmark = pytest.mark.anyio


class S(BaseModel):
    """The state of the test graphs."""

    n: int = 0
    answer: Any = None


def _inc(state: S) -> dict[str, Any]:
    return {"n": state.n + 1}


def _ask(state: S) -> dict[str, Any]:
    return {"answer": interrupt("ok?", id="ok")}


def _graph(graph_id: str) -> CompiledGraph:
    """``a -> ask -> b -> c``: pauses at ``ask``'s question."""
    g = Graph(graph_id, S)
    g.node("a", _inc)
    g.node("ask", _ask)
    g.node("b", _inc)
    g.node("c", _inc)
    g.edge(START, "a")
    g.edge("a", "ask")
    g.edge("ask", "b")
    g.edge("b", "c")
    g.edge("c", END)
    return g.compile()


async def _rows(store: Any, thread_id: str) -> tuple[Any, ...]:
    """Everything the store holds for the thread: checkpoints, their runs' events and run
    records, and its claim."""
    cps = await store.list(thread_id=thread_id)
    runs = sorted({cp.run_id for cp in cps})
    return ([cp.model_dump(mode="json") for cp in cps],
            [await store.events(r) for r in runs], [await store.run(r) for r in runs],
            await store.current_claim(thread_id))


# -- ExecutionMismatch ------------------------------------------------------------------------

SEED_MISMATCH = "An execution was passed to a graph other than the one that created or restored it."


def _resume(rt: GraphRuntime, run_id: str, other: CompiledGraph) -> Any:
    return rt.aresume(run_id, Resume("yes"), graph=other)


def _step(rt: GraphRuntime, run_id: str, other: CompiledGraph) -> Any:
    return rt.astep(other, run_id=run_id, resume=Resume("yes"))


def _update(rt: GraphRuntime, run_id: str, other: CompiledGraph) -> Any:
    return rt.aupdate_state(run_id, {"n": 7}, graph=other)


@pytest.mark.parametrize("call", [_resume, _step, _update], ids=["aresume", "astep",
                                                                  "aupdate_state"])
async def test_an_execution_passed_to_another_graph_is_refused_changing_nothing(
    any_store: Any, call: Any
) -> None:
    assert ExecutionMismatch.__doc__ is not None
    assert ExecutionMismatch.__doc__.startswith(SEED_MISMATCH)
    rt = GraphRuntime(any_store, clock=VirtualClock(), seed=3)
    paused = await rt.ainvoke(_graph("orders"), {}, thread_id="t-1")
    assert paused.status == "interrupted"
    before = await _rows(any_store, "t-1")
    other = _graph("refunds")  # the same shape, another graph
    with pytest.raises(ExecutionMismatch) as info:
        await call(rt, paused.run_id, other)
    err = info.value
    assert isinstance(err, SnapshotMismatch)  # what callers caught before it had a name
    assert (err.run_id, err.expected, err.given) == (paused.run_id, "orders", "refunds")
    assert "created by graph 'orders', not 'refunds'" in str(err)
    assert await _rows(any_store, "t-1") == before
    done = await rt.aresume(paused.run_id, Resume("yes"), graph=_graph("orders"))
    assert (done.status, done.state.n) == ("completed", 3)  # its own graph continues it
