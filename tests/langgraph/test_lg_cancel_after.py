"""Issue 24 — a LangGraph leg cancelled at a virtual instant (``cancel_after=``) stays
resumable: the thread then ends as a run that was never cancelled, here or in a fresh
harness over the same saver (a new process)."""

from __future__ import annotations

import asyncio
import operator
import time
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from pytest_graphflow import Cancelled, InvalidArgument, VirtualClock
from pytest_graphflow.langgraph import LangGraphHarness, check_invariants


class Trip(TypedDict, total=False):
    notes: Annotated[list[str], operator.add]
    verdict: str


async def _flights(state: Trip) -> dict[str, Any]:
    await asyncio.sleep(7200)
    return {"notes": ["3 flights"]}


async def _hotels(state: Trip) -> dict[str, Any]:
    await asyncio.sleep(30)
    return {"notes": ["2 hotels"]}


def _cars(state: Trip) -> dict[str, Any]:
    time.sleep(100)  # a sync node: virtual, on its own worker
    return {"notes": ["1 car"]}


def _review(state: Trip) -> dict[str, Any]:
    return {"verdict": interrupt({"notes": state["notes"]})}


def _trip() -> StateGraph:
    g = StateGraph(Trip)
    for name, fn in (("flights", _flights), ("hotels", _hotels), ("cars", _cars),
                     ("review", _review)):
        g.add_node(name, fn)
    for name in ("flights", "hotels", "cars"):
        g.add_edge(START, name)
    g.add_edge(["flights", "hotels", "cars"], "review")
    g.add_edge("review", END)
    return g


def _finish(h: LangGraphHarness) -> list[str]:
    """Resume until the thread completes (answering the review); the statuses seen."""
    statuses = []
    assert h.last is not None
    while h.last.status != "completed":
        trace = h.resume("ok") if h.pending_interrupts() else h.resume()
        statuses.append(trace.result.status)
    return statuses


def _uncancelled(seed: int = 1) -> dict[str, Any]:
    h = LangGraphHarness(_trip(), seed=seed)
    h.trace({"notes": []})
    return h.resume("ok").result.data


def test_a_leg_is_cancelled_at_its_virtual_instant() -> None:
    h = LangGraphHarness(_trip(), seed=1)
    cut = h.trace({"notes": []}, cancel_after=60)

    assert cut.result.status == "cancelled"
    assert isinstance(cut.result.error, Cancelled)
    assert h.clock.elapsed == 60.0
    ends = [e.node for e in cut.events if e.type == "node_end"]
    cancelled = sorted(e.node for e in cut.events if e.type == "error")
    assert ends == ["hotels"]  # done at 30 s
    assert cancelled == ["cars", "flights"]  # still sleeping at 60 s
    assert cut.events[-1].status == "cancelled"
    assert check_invariants(cut.events) == []
    # the finished task's write is saved: the resume does not run hotels again
    resumed = h.resume()
    assert "hotels" not in [e.node for e in resumed.events if e.type == "node_start"]
    assert resumed.result.status == "interrupted"
    assert h.resume("ok").result.data == _uncancelled()


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
@pytest.mark.parametrize("instant", [0, 29, 30, 31, 100, 7199])
def test_after_a_cancel_at_any_instant_a_fresh_harness_ends_as_the_uncancelled_run(
        instant: float, durability: str) -> None:
    h = LangGraphHarness(_trip(), seed=1, durability=durability)
    assert h.trace({"notes": []}, cancel_after=instant).result.status == "cancelled"

    # a new process: a fresh harness over the same saver and thread, its clock going on
    fresh = LangGraphHarness(_trip(), seed=1, durability=durability,
                             saver=h.saver.inner, thread_id=h.thread_id,
                             clock=VirtualClock(start=h.clock.now()))
    fresh.trace(None)
    assert _finish(fresh) in (["interrupted", "completed"], ["completed"])
    assert fresh.last is not None
    assert fresh.last.data == _uncancelled()


def test_a_wake_up_at_the_instant_itself_runs_first() -> None:
    # hotels wakes at 30 s: cancelled at 30 s it still finishes, as in our runtime
    h = LangGraphHarness(_trip(), seed=1)
    cut = h.trace({"notes": []}, cancel_after=30)
    assert [e.node for e in cut.events if e.type == "node_end"] == ["hotels"]
    # an instant the leg never reaches cancels nothing
    again = LangGraphHarness(_trip(), seed=1)
    assert again.trace({"notes": []}, cancel_after=7201).result.status == "interrupted"


def test_a_resume_can_be_cancelled_too_and_the_same_seed_gives_the_same_bytes() -> None:
    def run() -> str:
        h = LangGraphHarness(_trip(), seed=4)
        h.trace({"notes": []}, cancel_after=10)
        second = h.resume(cancel_after=50)  # 10 s + 50 s: hotels done, the rest cut
        assert second.result.status == "cancelled"
        assert h.clock.elapsed == 60.0
        _finish(h)
        return "\n".join(e.model_dump_json() for e in h.events)

    assert run() == run()


@pytest.mark.anyio
async def test_atrace_takes_cancel_after() -> None:
    h = LangGraphHarness(_trip(), seed=2)
    cut = await h.atrace({"notes": []}, cancel_after=45)
    assert cut.result.status == "cancelled"
    assert (await h.aresume()).result.status == "interrupted"


@pytest.mark.parametrize("bad", [-1, float("nan"), "5"])
def test_cancel_after_must_be_seconds(bad: Any) -> None:
    with pytest.raises(InvalidArgument, match="cancel_after="):
        LangGraphHarness(_trip()).trace({"notes": []}, cancel_after=bad)
