"""Tests of an existing LangGraph agent (``langgraph_agent/agent.py``), unchanged, under
pytest-graphflow: virtual time, seeded order, fault injection, snapshots and properties.

``graph_runtime.langgraph(...)`` gives a harness with the test's seed and virtual clock whose
checkpoint saver obeys ``store_faults``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from langgraph_agent.agent import Services, build_agent, question

from pytest_graphflow import DEFAULT_START, StoreFault, assert_events
from pytest_graphflow.langgraph import (
    check_crash_recovery,
    check_determinism,
    check_interrupt_resume_equivalence,
    check_invariants,
    check_reducer_laws,
    explore,
)

APPROVE = {"review": "approve"}


def test_the_agent_waits_for_a_human_then_sends(graph_runtime):
    services = Services()
    agent = graph_runtime.langgraph(build_agent(services))

    paused = agent.trace(question())
    assert paused.result.status == "interrupted"
    (review,) = paused.result.interrupts.values()
    assert review.node == "review"
    assert review.payload["proposal"].startswith("Proposal: 1 EUR = 1.08 USD")
    assert_events(paused.events, [
        "run_start",
        "...",
        "node_end:plan",
        "...",
        # three tool calls run in parallel (Send); the flaky one retries through the outage
        {"node_start:call_tool"},
        "...",
        "node_start:draft",
        "...",
        "interrupt:review",
        "run_end:interrupted",
    ])
    assert services.outbox == []

    done = agent.resume("approve")
    assert done.result.status == "completed"
    assert done.result.data["approved"] is True
    assert services.outbox == [review.payload["proposal"]]
    assert check_invariants(agent.events) == []


def test_the_retried_tool_waits_out_the_outage_in_virtual_time(graph_runtime):
    services = Services()
    agent = graph_runtime.langgraph(build_agent(services))
    agent.trace(question())

    # down until 00:20: tried at 1 s, retried after 10 min and 20 min more (jitter < 1 s)
    assert services.rate_calls == 3
    assert timedelta(minutes=30) < graph_runtime.clock.now() - DEFAULT_START \
        < timedelta(minutes=31)


def test_a_human_can_ask_for_changes(graph_runtime):
    agent = graph_runtime.langgraph(build_agent())
    agent.trace(question())
    again = agent.resume("add a hotel")
    (review,) = again.result.interrupts.values()
    assert review.payload["proposal"].endswith("(note: add a hotel)")
    assert agent.resume("approve").result.status == "completed"


# LangGraph reports a step's results in completion order, which the seed decides, and its ids
# derive from the seed: a snapshot pins the seed.
@pytest.mark.graphflow(seed=1)
def test_the_event_stream_snapshot(graph_runtime, graph_snapshot):
    agent = graph_runtime.langgraph(build_agent())
    agent.trace(question())
    agent.resume("approve")
    assert agent.events == graph_snapshot


def test_a_rejected_checkpoint_save_surfaces_and_the_run_resumes(graph_runtime, store_faults):
    store_faults.reject_save(nth=4)
    agent = graph_runtime.langgraph(build_agent(), durability="sync")
    with pytest.raises(StoreFault, match="put #4"):
        agent.trace(question())
    assert agent.pending_interrupts() == []

    paused = agent.resume()
    assert paused.result.status == "interrupted"
    assert agent.resume("approve").result.status == "completed"


def test_same_seed_same_bytes():
    assert check_determinism(build_agent(), question(), answers=APPROVE) == []


def test_every_order_of_the_parallel_tools_ends_the_same():
    report = explore(build_agent(), question(), answers=APPROVE)
    report.assert_ok()
    ((_, (seen, total)),) = report.coverage.items()
    assert seen == total == 6


def test_a_crash_at_any_checkpointer_operation_recovers():
    # sent_at records when the answer went out: later after a crash, as in production
    found = check_crash_recovery(build_agent(), question(), answers=APPROVE,
                                 ignore=["sent_at"])
    assert found == []


def test_resuming_in_a_new_process_equals_resuming_in_this_one():
    assert check_interrupt_resume_equivalence(build_agent(), question(), APPROVE) == []


def test_the_message_reducer_keeps_its_laws():
    assert check_reducer_laws(build_agent(), max_examples=25) == []
