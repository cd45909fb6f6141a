"""Issue 24: "Two new checks, for native graphs and the bridge: a clock-start check (the same
run with the clock starting at two instants, e.g. 10:00 and 22:00, or across a weekend; report
a different path or outcome as control-flow dependence on the wall clock, with both node
sequences)". Acceptance: "The same seed gives the same schedule with the clock starting at
09:00 and at 19:00; a planted route on datetime.now() is reported by the clock-start check,
its fixed twin is not." Issue 25: "the clock-start check of the LangGraph issue, shared by
both runtimes".
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, TypedDict

from graphs import fan_out
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

from pytest_graphflow import VirtualClock
from pytest_graphflow.langgraph import LangGraphHarness, check_clock_start

NINE = datetime(2025, 3, 4, 9, 0, tzinfo=UTC)
NINETEEN = datetime(2025, 3, 4, 19, 0, tzinfo=UTC)


class Claim(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    office_hours: bool
    received: str
    reviewer: str
    decision: str


def claims(*, planted: bool) -> StateGraph:
    """receive (stamps ``datetime.now()``, asks a reviewer) → auto_approve | queue. The
    planted route decides on ``datetime.now()`` (business hours auto-approve); the fixed twin
    routes on a field of the state."""

    def receive(state: Claim) -> dict[str, Any]:
        reviewer = str(interrupt("who reviews?"))
        return {"received": datetime.now(UTC).isoformat(), "reviewer": reviewer,
                "messages": [AIMessage("received")]}

    def by_clock(state: Claim) -> str:
        return "auto_approve" if 9 <= datetime.now(UTC).hour < 17 else "queue"

    def by_state(state: Claim) -> str:
        return "auto_approve" if state.get("office_hours", True) else "queue"

    g = StateGraph(Claim)
    g.add_node("receive", receive)
    g.add_node("auto_approve", lambda s: {"decision": "approved"})
    g.add_node("queue", lambda s: {"decision": "queued"})
    g.add_edge(START, "receive")
    g.add_conditional_edges("receive", by_clock if planted else by_state,
                            ["auto_approve", "queue"])
    g.add_edge("auto_approve", END)
    g.add_edge("queue", END)
    return g


INPUT: dict[str, Any] = {"messages": [HumanMessage("refund 40 EUR")]}


def test_a_route_on_datetime_now_is_reported_with_both_paths() -> None:
    found = check_clock_start(claims(planted=True).compile(), INPUT, answers={"receive": "ann"})
    # default starts: Monday 10:00, Monday 22:00, Saturday 10:00 — 22:00 takes the queue
    assert [v.rule for v in found] == ["clock_start"]
    text = found[0].message
    assert "Mon 2025-01-06 10:00 UTC" in text
    assert "Mon 2025-01-06 22:00 UTC" in text
    assert "receive → auto_approve" in text
    assert "receive → queue" in text
    assert "diverge at node #2: auto_approve vs queue" in text


def test_its_fixed_twin_passes_with_stamps_and_message_ids_in_its_state() -> None:
    graph = claims(planted=False)
    assert check_clock_start(graph, INPUT, answers={"receive": "ann"}) == []
    assert check_clock_start(graph, {**INPUT, "office_hours": False}, answers={"receive": "ann"},
                             starts=(NINE, NINETEEN)) == []


def test_an_answer_that_differs_is_an_outcome_the_check_would_see() -> None:
    # the same path, another final state: reported as an outcome, with the differing key
    def ask(state: Claim) -> dict[str, Any]:
        return {"reviewer": "night desk" if datetime.now(UTC).hour >= 18 else "day desk"}

    g = StateGraph(Claim)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    found = check_clock_start(g, {}, starts=(NINE, NINETEEN))
    assert len(found) == 1
    assert "same path ask but ended otherwise" in found[0].message
    assert "reviewer" in found[0].message


def _order(seed: int, start: datetime) -> list[str]:
    h = LangGraphHarness(fan_out({"a": 1.0, "b": 1.0, "c": 1.0}), seed=seed,
                         clock=VirtualClock(start=start))
    h.trace({"log": []})
    return [s.node for _, s in h.start_steps if s.node in ("a", "b", "c")]


def test_same_seed_gives_the_same_schedule_at_09_00_and_19_00() -> None:
    orders = set()
    for seed in range(10):
        at_nine = _order(seed, NINE)
        assert at_nine == _order(seed, NINETEEN), seed
        orders.add(tuple(at_nine))
    assert len(orders) >= 2  # the seed really chooses in this batch
