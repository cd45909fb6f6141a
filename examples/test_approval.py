"""What a user's tests of the approval flow look like: no sleeps, no flakes.

Run them with ``pytest examples``. Every test gets a deterministic ``graph_runtime``: a
virtual clock, the test's seed and a fault-injecting store.
"""

from __future__ import annotations

import pytest
from approval.graph import Order, PaymentAPI, build, merge_scores
from hypothesis import given
from hypothesis import strategies as st

from pytest_graphflow import Resume, StoreFault, assert_events
from pytest_graphflow.invariants import assert_invariants, assert_reducer_laws


def test_small_order_waits_for_a_human(graph_runtime):
    trace = graph_runtime.trace(build(PaymentAPI()), {"amount": 120})

    assert trace.result.status == "interrupted"
    (pending,) = trace.result.interrupts.values()
    assert pending.payload == {"amount": 120, "scores": {"fraud": 10, "credit": 80}}
    assert_events(trace.events, [
        "run_start",
        "...",
        # the parallel checks are yielded together, in declared order (C4)
        "node_end:fraud_check",
        "edge_transition:fraud_check->decide",
        "node_start:credit_check",
        "node_end:credit_check",
        "...",
        "edge_transition:decide->review",
        "...",
        "node_start:review",
        "interrupt:review",
        "checkpoint_saved",
        "run_end:interrupted",
    ])
    # 1.5 s of fraud check ran in parallel with 0.5 s of credit check: 1.5 virtual seconds.
    assert trace.events[-1].time.second == 1


def test_approve_then_charge_once(graph_runtime):
    api = PaymentAPI()
    graph = build(api)
    paused = graph_runtime.trace(graph, {"amount": 120})

    done = graph_runtime.resume_trace(paused.result.run_id, Resume("yes"))

    assert done.result.status == "completed"
    assert done.result.state.receipt == "rcpt-120-1"
    assert api.calls == 1
    assert done.result.state.audit[-3:] == ["review:yes", "charge", "notify"]
    assert_invariants(paused.events + done.events)


def test_flaky_payment_api_retries_on_the_virtual_clock(graph_runtime):
    api = PaymentAPI(flaky=2)
    paused = graph_runtime.trace(build(api), {"amount": 300})

    done = graph_runtime.resume_trace(paused.result.run_id, Resume("yes"))

    assert done.result.state.charged == 300
    assert api.calls == 3
    assert_events(done.events, [
        "...",
        {"type": "error", "node": "charge", "will_retry": True, "attempt": 1},
        {"type": "node_start", "node": "charge", "attempt": 2},
        {"type": "error", "node": "charge", "will_retry": True, "attempt": 2},
        {"type": "node_start", "node": "charge", "attempt": 3},
        {"type": "node_end", "node": "charge", "attempt": 3},
        "...",
        "run_end:completed",
    ])


def test_payment_api_down_routes_to_refund(graph_runtime):
    paused = graph_runtime.trace(build(PaymentAPI(down=True)), {"amount": 300})

    done = graph_runtime.resume_trace(paused.result.run_id, Resume("yes"))

    assert done.result.status == "completed"
    assert done.result.state.audit[-1] == "refund:ConnectionError"
    assert_events(done.events, [
        "...",
        {"type": "error", "node": "charge", "routed_to": "refund", "attempt": 3},
        "edge_transition:charge->refund",
        "...",
    ])


def test_big_order_is_rejected_without_asking(graph_runtime):
    trace = graph_runtime.trace(build(PaymentAPI()), {"amount": 5000})

    assert trace.result.status == "completed"
    assert trace.result.state.approved is False
    assert "review" not in [e.node for e in trace.events]


def test_a_rejected_checkpoint_save_loses_nothing(graph_runtime, store_faults):
    graph = build(PaymentAPI())
    # The store refuses the checkpoint the review's interrupt needs.
    store_faults.reject_save(when=lambda cp: cp.status == "interrupted",
                             error=StoreFault("disk full"))

    with pytest.raises(StoreFault, match="disk full"):
        graph_runtime.trace(graph, {"amount": 120})

    # Nothing half-written: the last checkpoint is the one before the review, and a resume
    # by the run id continues from it once the store is healthy again.
    store_faults.clear_rules()
    run_id = graph_runtime.runs[-1].run_id
    again = graph_runtime.resume_trace(run_id)
    assert again.result.status == "interrupted"


def test_event_stream_snapshot(graph_runtime, graph_snapshot):
    trace = graph_runtime.trace(build(PaymentAPI()), {"amount": 120})

    assert trace.events == graph_snapshot


def test_custom_reducer_obeys_the_laws_parallel_merges_need():
    scores = st.dictionaries(st.sampled_from(["fraud", "credit", "kyc"]),
                             st.integers(0, 100), max_size=3)
    assert_reducer_laws(merge_scores, scores, identity={}, max_examples=60)


@given(amount=st.integers(1, 3000), answer=st.sampled_from(["yes", "no"]))
def test_every_order_ends_cleanly(graph_runtime_factory, amount, answer):
    runtime = graph_runtime_factory()  # a fresh clock, store and seed per example
    graph = build(PaymentAPI())
    first = runtime.trace(graph, {"amount": amount})
    events = list(first.events)
    if first.result.status == "interrupted":
        events += runtime.resume_trace(first.result.run_id, Resume(answer)).events
    assert events[-1].status == "completed"
    assert_invariants(events)
    assert isinstance(Order.model_validate(events[-1].state), Order)
