"""Testing the refund agent (``payments/app.py``): tools with declared contracts, a
guardrail, a human approval on a tool call, and a payment that happens exactly once even when
the process dies at any store operation."""

from __future__ import annotations

from collections import Counter

from payments.app import (
    ANSWERS,
    QUESTION,
    REFUND,
    TOO_LARGE,
    Services,
    build,
)

from pytest_graphflow import Resume, ToolCallEvent, assert_events, explore
from pytest_graphflow.invariants import (
    check_crash_recovery,
    check_determinism,
    check_tool_replays,
)


def test_a_refund_waits_for_approval_on_the_tool_call_then_pays_once(graph_runtime):
    services = Services()
    graph = build(services)

    paused = graph_runtime.trace(graph, REFUND)
    assert paused.status == "interrupted"
    (pending,) = paused.result.interrupts.values()
    assert (pending.node, pending.id, pending.payload) == (
        "pay", "approve", {"order": "o-7", "amount": 80})
    assert services.payments.calls == 0

    done = graph_runtime.resume_trace(paused.result.run_id, Resume("yes"))
    assert done.state.reply == "Hi Ada, your refund rf-1 is on its way."
    assert done.state.payment == {"status": "refunded", "id": "rf-1", "amount": 80}
    assert done.state.log == ["model: refund", "refund: rf-1", "reply"]
    (key,) = services.payments.refunds
    assert services.payments.refunds[key] == ("o-7", 80)
    assert services.model.calls == 1
    assert_events(done, ["...", "node_start:pay", "custom:middleware", "tool_call:refund",
                         "custom:timing", "node_end:pay", "..."])
    paid = [e for e in done.events if isinstance(e, ToolCallEvent) and e.tool == "refund"]
    assert [(e.key, e.value) for e in paid] == [(key, "rf-1")]  # call.key was the key


def test_a_declined_approval_pays_nothing(graph_runtime):
    services = Services()
    paused = graph_runtime.trace(build(services), REFUND)
    done = graph_runtime.resume_trace(paused.result.run_id, Resume("no"))
    assert done.state.reply == "Hi Ada, we could not approve this refund."
    assert (services.payments.calls, services.payments.refunds) == (0, {})


def test_the_guardrail_blocks_a_refund_over_the_limit_before_anything_is_paid(graph_runtime):
    services = Services()
    trace = graph_runtime.trace(build(services), TOO_LARGE)
    assert trace.status == "completed"
    assert trace.state.reply == "Hi Bob, a supervisor will look at your refund."
    assert trace.state.log == ["escalated: GuardrailBlocked"]
    assert trace.state.decision == {}  # the blocked turn was retracted
    assert services.payments.calls == 0
    blocked = next(e for e in trace.events if e.type == "custom" and e.channel == "guardrail")
    assert blocked.value["reason"] == "refund 900 is over the limit 200"


def test_a_question_is_answered_without_a_payment(graph_runtime):
    services = Services()
    trace = graph_runtime.trace(build(services), QUESTION)
    assert trace.state.reply == "Hi Cy. Order o-3 ships tomorrow."
    assert [e.tool for e in trace.events if isinstance(e, ToolCallEvent)] == ["think"]


# --------------------------------------------------------------------------- crash recovery


def test_the_refund_happens_exactly_once_across_a_crash_at_every_store_operation():
    """A crash at every store operation (each one before and after it reaches the store),
    then recovery by a fresh runtime: the run ends as without the crash, and the money moves
    exactly once. The payment service is called a second time only where the process died
    after the call and before a checkpoint recorded it (the save of the step that paid): the
    re-run hands it the same ``call.key``, so it moves no money."""
    built: list[Services] = []

    def make_app():
        services = Services()
        built.append(services)
        return build(services)

    assert check_crash_recovery(make_app, REFUND, ANSWERS) == []
    oracle, *points = built
    assert oracle.payments.calls == 1
    calls = Counter(s.payments.calls for s in points)
    assert calls == {1: len(points) - 1, 2: 1}, calls
    assert all(len(s.payments.refunds) == 1 for s in points)  # charged once, by call.key
    assert len({key for s in points for key in s.payments.refunds}) == 1


def test_a_tool_that_ignores_its_call_key_pays_twice_in_that_window():
    """The same sweep finds the window when the refund does not pass ``call.key`` on."""
    built: list[Services] = []

    def careless_app():
        services = Services()
        built.append(services)
        real = services.payments.refund

        async def fresh_key_each_time(order, amount, *, idempotency_key):
            return await real(order, amount,
                              idempotency_key=f"{order}-{services.payments.calls}")

        services.payments.refund = fresh_key_each_time
        return build(services)

    (found,) = check_crash_recovery(careless_app, REFUND, ANSWERS)
    assert "crash_at('save'" in found.message
    assert "phase='before'" in found.message
    assert "rf-2" in found.message  # the recovered run paid again
    assert sorted(len(s.payments.refunds) for s in built[1:])[-2:] == [1, 2]


# --------------------------------------------------------------------------- determinism


def test_same_seed_same_bytes_with_tools_middleware_and_a_guardrail():
    for conversation in (REFUND, TOO_LARGE):
        assert check_determinism(lambda: build(Services()), conversation,
                                 answers=ANSWERS) == []


def test_explore_passes_and_tool_calls_are_replayed_not_repeated(graph_runtime):
    report = explore(lambda: build(Services()), REFUND, answers=ANSWERS, seeds=range(4))
    assert report.ok, str(report)
    paused = graph_runtime.trace(build(Services()), REFUND)
    done = graph_runtime.resume_trace(paused.result.run_id, Resume("yes"))
    events = [*paused.events, *done.events]
    replayed = [(e.tool, e.replayed) for e in events if isinstance(e, ToolCallEvent)]
    assert replayed == [("think", False), ("refund", False)]
    assert check_tool_replays(events) == []
