"""Issue 24 — a cancel at a virtual instant: ``cancel_after=`` seconds on any run API.

The leg is cancelled as ``RunHandle.cancel()`` would cancel it (status ``cancelled``, error
``Cancelled``, finished tasks keep their results), exactly when the virtual clock reaches the
instant, and the thread stays resumable: a later resume (or a fresh runtime's ``recover``)
ends as the run that was never cancelled.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Cancelled,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    InvalidArgument,
    Reducer,
    RunTimedOut,
    VirtualClock,
)


class Trip(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []
    booked: bool = False


def _trip() -> Any:
    async def flights(s: Trip) -> dict[str, Any]:
        await anyio.sleep(60)
        return {"log": ["flights"]}

    async def hotels(s: Trip) -> dict[str, Any]:
        await anyio.sleep(20)
        return {"log": ["hotels"]}

    async def book(s: Trip) -> dict[str, Any]:
        await anyio.sleep(30)
        return {"booked": True, "log": ["book"]}

    g = Graph("trip", Trip)
    g.node("flights", flights).node("hotels", hotels).node("book", book)
    g.edge(START, ["flights", "hotels"]).edge(["flights", "hotels"], "book").edge("book", END)
    return g.compile()


def _path(events: Any) -> list[str]:
    return [e.node for e in events if e.type == "node_end"]


def test_a_run_is_cancelled_at_its_virtual_instant_and_resumes_where_it_stopped() -> None:
    graph = _trip()
    rt = GraphRuntime(clock=VirtualClock(), seed=3)
    cut = rt.trace(graph, cancel_after=45)

    assert cut.result.status == "cancelled"
    assert isinstance(cut.result.error, Cancelled)
    assert rt.clock.elapsed == 45.0  # not a step later: the instant asked for
    assert _path(cut.events) == ["hotels"]  # finished at 20 s; flights was cut at 45 s
    assert (cut.events[-1].type, cut.events[-1].status) == ("run_end", "cancelled")

    done = rt.resume_trace(cut.result.run_id)
    assert done.result.status == "completed"
    replayed = {e.node: e.replayed for e in done.events if e.type == "node_end"}
    assert replayed == {"hotels": True, "flights": False, "book": False}

    plain = GraphRuntime(clock=VirtualClock(), seed=3).invoke(graph)
    assert done.result.data == plain.data == {
        "log": ["flights", "hotels", "book"], "booked": True}


@pytest.mark.parametrize("instant", [0, 10, 20, 59, 60, 61, 89, 90, 1000])
def test_after_a_cancel_at_any_instant_the_thread_ends_as_an_uncancelled_run(
        instant: float) -> None:
    graph = _trip()
    plain = GraphRuntime(clock=VirtualClock(), seed=1).invoke(graph, thread_id="t")
    store = InMemoryCheckpointStore()
    first = GraphRuntime(store, clock=VirtualClock(), seed=1).invoke(
        graph, thread_id="t", cancel_after=instant)
    if instant >= 90:  # the run ends at 90 s: nothing to cancel
        assert first.status == "completed"
        assert first.data == plain.data
        return
    assert first.status == "cancelled"
    # a fresh runtime over the same store (a new process) continues the thread
    again = GraphRuntime(store, clock=VirtualClock(), seed=1).recover("t", graph=graph)
    assert again.status == "completed"
    assert again.data == plain.data


def test_the_earlier_of_cancel_after_and_timeout_decides_how_the_leg_ends() -> None:
    graph = _trip()
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    cancelled = rt.invoke(graph, cancel_after=30, timeout=50)
    timed_out = rt.invoke(graph, cancel_after=50, timeout=30)

    assert (cancelled.status, type(cancelled.error)) == ("cancelled", Cancelled)
    assert (timed_out.status, type(timed_out.error)) == ("failed", RunTimedOut)


def test_each_leg_takes_its_own_cancel_after() -> None:
    graph = _trip()
    rt = GraphRuntime(clock=VirtualClock(), seed=2)
    cut = rt.invoke(graph, cancel_after=10)
    cut_again = rt.resume(cut.run_id, cancel_after=70)  # 10 s + 70 s: book is running

    assert cut_again.status == "cancelled"
    assert rt.clock.elapsed == 80.0
    assert rt.resume(cut.run_id).data["booked"] is True


@pytest.mark.parametrize("bad", [-1, float("inf"), "5", True])
def test_cancel_after_must_be_seconds(bad: Any) -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    with pytest.raises(InvalidArgument, match="cancel_after="):
        rt.invoke(_trip(), cancel_after=bad)
