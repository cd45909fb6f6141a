"""Issue 24 — a LangGraph leg cancelled at an event (``cancel_at=``) stays resumable.

``cancel_at=`` takes one item of ``assert_events``'s pattern language. The harness logs
LangGraph's events as they happen, so the cancel lands inside the step: the leg is cut at that
virtual instant at its next wait, no waiting task starts or wakes first, the tasks still
running get a ``CancelledError`` event (as with ``cancel_after=``), the finished ones keep
their saved writes. Cancelled at any event of a realistic thread, a fresh harness over the
same saver (a new process) ends it as the run that was never cancelled.
"""

from __future__ import annotations

import asyncio
import operator
import time
import uuid
from typing import Annotated, Any, TypedDict

import pytest
from graphs import refund_flow
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from pytest_graphflow import Cancelled, InvalidArgument, VirtualClock, assert_events
from pytest_graphflow.langgraph import LangGraphHarness, check_invariants

SOURCES = {"kb": 5.0, "web": 30.0, "tickets": 12.0}


class Desk(TypedDict, total=False):
    question: str
    found: Annotated[list[str], operator.add]
    amount: int
    refund_id: str
    decision: str
    reply: str


async def _search(state: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(SOURCES[state["source"]])
    return {"found": [f"{state['source']}:{uuid.uuid4().hex[:6]}"]}


def _audit(state: Desk) -> dict[str, Any]:
    time.sleep(20)  # a sync node: blocks on its own worker, in virtual time
    return {"found": ["audit"]}


def _desk() -> StateGraph:
    """Parallel ``Send`` searches with different latencies beside a blocking sync audit, then
    a refund subgraph (uuid4 refund id, interrupts for approval), then a reply."""
    g = StateGraph(Desk)
    g.add_node("classify", lambda s: {"amount": 40})
    g.add_node("search", _search)
    g.add_node("audit", _audit)
    g.add_node("refund", refund_flow(lookup_s=3.0).compile())
    g.add_node("reply", lambda s: {"reply": f"{s['refund_id']}:{s['decision']}:"
                                            f"{len(s['found'])}"})
    g.add_edge(START, "classify")
    g.add_conditional_edges("classify", lambda s: [Send("search", {"source": k})
                                                   for k in SOURCES] + ["audit"],
                            ["search", "audit"])
    g.add_edge(["search", "audit"], "refund")
    g.add_edge("refund", "reply")
    g.add_edge("reply", END)
    return g


def _values(state: dict[str, Any]) -> dict[str, Any]:
    """A thread's final state with its ``uuid4`` ids left out. A node that runs after a
    resume draws its ids from the checkpoint it extends (LangGraph's task id hashes it), and a
    cancelled thread's later checkpoints are the resume's, not the uncancelled run's: such a
    node draws other (well-formed) ids. Every other value is the same."""
    refund_id = state["refund_id"]
    assert (refund_id[:2], len(refund_id)) == ("R-", 10)
    found = [f.partition(":")[0] if ":" in f else f for f in state["found"]]
    assert all(len(f.partition(":")[2]) == 6 for f in state["found"] if ":" in f)
    return {**state, "refund_id": "R-?", "reply": state["reply"].replace(refund_id, "R-?"),
            "found": found}


def _finish(h: LangGraphHarness) -> list[Any]:
    """Continue the thread to its end (approving the refund); the legs' events. With
    ``durability="exit"`` a first leg cut before its closing save leaves the thread with no
    checkpoint: it starts over from its input, as it would in production."""
    events: list[Any] = []
    for _ in range(4):
        if h.last is not None and h.last.status == "completed":
            return events
        if h.state(subgraphs=False).created_at is None:
            trace = h.trace({"question": "refund?"})
        else:
            trace = h.resume("approve") if h.pending_interrupts() else h.resume()
        events += trace.events
    raise AssertionError(f"the thread did not complete: {h.last}")


def _uncancelled(durability: str) -> tuple[LangGraphHarness, list[Any]]:
    h = LangGraphHarness(_desk(), seed=3, durability=durability)
    first = h.trace({"question": "refund?"})
    assert first.result.status == "interrupted"
    return h, [*first.events, *_finish(h)]


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_cancelling_at_every_event_a_fresh_harness_ends_as_the_uncancelled_run(
        durability: str) -> None:
    plain, events = _uncancelled(durability)
    final = plain.state()
    assert final["reply"].endswith(":approve:4")
    first_leg = next(i for i, e in enumerate(events) if e.type == "run_end") + 1
    statuses = set()
    for i, target in enumerate(events):
        h = LangGraphHarness(_desk(), seed=3, durability=durability)
        if i < first_leg:
            before: list[Any] = []
            cut = h.trace({"question": "refund?"}, cancel_at={"seq": target.seq})
        else:
            before = list(h.trace({"question": "refund?"}).events)
            cut = h.resume("approve", cancel_at=f"* seq={target.seq}")
        got = [*before, *cut.events]
        # up to the event asked for, the leg is the uncancelled one, byte for byte
        assert [e.model_dump_json() for e in got[:i + 1]] == [
            e.model_dump_json() for e in events[:i + 1]], i
        statuses.add(cut.result.status)
        if cut.result.status == "cancelled":
            assert isinstance(cut.result.error, Cancelled), i
            assert cut.events[-1].status == "cancelled", i
        assert check_invariants(got) == [], i
        # a new process: a fresh harness over the same saver and thread
        fresh = LangGraphHarness(_desk(), seed=3, durability=durability,
                                 saver=h.saver.inner, thread_id=h.thread_id,
                                 clock=VirtualClock(start=h.clock.now()))
        _finish(fresh)
        assert _values(fresh.state()) == _values(final), i
        # every saved checkpoint reads back, and extends one the saver holds
        history = fresh.state_history()
        ids = {s.config["configurable"]["checkpoint_id"] for s in history}
        assert all(s.parent_config is None
                   or s.parent_config["configurable"]["checkpoint_id"] in ids
                   for s in history), i
        assert history[0].next == (), i
    assert statuses == {"cancelled", "interrupted", "completed"}


def test_a_cancel_at_a_finished_search_cuts_the_others_while_they_run() -> None:
    h = LangGraphHarness(_desk(), seed=3)
    cut = h.trace({"question": "q"}, cancel_at="node_end:search")

    assert cut.result.status == "cancelled"
    assert h.clock.elapsed == 5.0  # the kb search's instant: no time passes after it
    assert [e.node for e in cut.events if e.type == "node_end"] == ["classify", "search"]
    assert sorted(e.node for e in cut.events if e.type == "error"
                  and e.error_type == "CancelledError") == ["audit", "search", "search"]
    assert check_invariants(cut.events) == []
    # the finished search keeps its saved write: the resume runs the three others only
    again = h.resume()
    assert len([e for e in again.events if e.type == "node_start" and e.node in (
        "search", "audit")]) == 3


@pytest.mark.parametrize("matcher", [
    "node_start:refund",
    {"type": "custom", "channel": "subgraph", "value": {"path": ["refund", "lookup"]}},
    lambda e: e.type == "checkpoint_saved" and e.step == 2,
])
def test_the_matcher_is_an_assert_events_item(matcher: Any) -> None:
    h = LangGraphHarness(_desk(), seed=3)
    cut = h.trace({"question": "q"}, cancel_at=matcher)

    assert cut.result.status == "cancelled"
    assert_events(cut, ["...", "error:refund error_type='CancelledError'", "run_end:cancelled"])
    assert _finish(h)[-1].status == "completed"


def test_a_matcher_that_never_matches_changes_nothing() -> None:
    _, events = _uncancelled("sync")
    h = LangGraphHarness(_desk(), seed=3, durability="sync")
    first = h.trace({"question": "refund?"}, cancel_at="node_end:nowhere")
    got = [*first.events, *_finish(h)]
    assert [e.model_dump_json() for e in got] == [e.model_dump_json() for e in events]


@pytest.mark.anyio
async def test_atrace_and_aresume_take_cancel_at() -> None:
    h = LangGraphHarness(_desk(), seed=3)
    cut = await h.atrace({"question": "q"}, cancel_at="node_end:audit")
    assert cut.result.status == "cancelled"
    again = await h.aresume(cancel_at="node_start:refund")
    assert again.result.status == "cancelled"
    assert (await h.aresume()).result.status == "interrupted"


@pytest.mark.parametrize(("bad", "problem"), [
    ("node_end:a foo=1", "node_end has no field 'foo'"),
    ("...", "a gap matches no one event"),
    (3.5, "items of type float are not understood"),
])
def test_a_bad_cancel_at_names_the_option_and_the_fix(bad: Any, problem: str) -> None:
    with pytest.raises(InvalidArgument, match=r"^cancel_at=") as caught:
        LangGraphHarness(_desk()).trace({"question": "q"}, cancel_at=bad)
    assert problem in str(caught.value)
    assert "pass one event as an assert_events pattern item" in str(caught.value)
