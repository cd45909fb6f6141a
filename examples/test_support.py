"""Testing a realistic support-ticket agent with the whole-run tools, as the docs show.

The app (``support/app.py``) has parallel tools, a flaky tool with retries, a human approval
before a refund, an audit log through a reducer with ``ctx.now()`` timestamps, and fakes
built into the graph by a factory. The checks pass on the correct app with documented
options, and each still finds a planted bug: a non-idempotent refund, a shared fake.
"""

from __future__ import annotations

import pytest
from support.app import (
    ANSWERS,
    EXPLORE_NODE_SEED,
    IGNORE,
    REFUND_TICKET,
    Payments,
    Services,
    build,
    make_app,
)

from pytest_graphflow import Resume, explore
from pytest_graphflow.invariants import (
    check_crash_recovery,
    check_determinism,
    check_interrupt_resume_equivalence,
    check_node_code,
)


def test_a_refund_waits_for_approval_then_is_issued_once(graph_runtime):
    services = Services()
    graph = build(services)

    paused = graph_runtime.trace(graph, REFUND_TICKET)
    assert paused.status == "interrupted"
    (pending,) = paused.result.interrupts.values()
    assert pending.payload == {"order": "o-7", "amount": 120}

    done = graph_runtime.resume_trace(paused.result.run_id, Resume(answers=ANSWERS))
    assert done.state.reply == "Hi Ada, your refund rf-1 is on its way."
    assert services.payments.issued == [("o-7", 120)]
    assert services.shipping.calls == 2  # the flaky carrier API was retried once
    assert [a["what"] for a in done.state.audit] == [
        "triage", "customer", "orders", "shipping", "decide", "approval: yes", "refund", "reply"]
    assert done.state.audit[3]["attempt"] == 2


def test_the_node_code_has_no_unseeded_randomness():
    assert check_node_code(make_app()) == []


# --------------------------------------------------------------------------- crash recovery


def test_crash_recovery_passes_on_the_correct_app():
    # make_app: a fresh graph (fresh fakes) per crash point; IGNORE: the audit timestamps
    # move because recovery waits out the dead process's claim.
    assert check_crash_recovery(make_app, REFUND_TICKET, ANSWERS, ignore=IGNORE) == []


def test_without_ignore_the_moved_timestamps_are_the_only_difference():
    found = check_crash_recovery(make_app, REFUND_TICKET, ANSWERS, points=[8])
    assert found
    for v in found:
        assert v.rule == "crash-recovery"
        assert all(".at:" in line or ".attempt:" in line
                   for line in v.message.splitlines()[1:])


def test_crash_recovery_finds_a_non_idempotent_refund():
    def buggy_app():
        return build(Services(payments=Payments(idempotent=False)))

    found = check_crash_recovery(buggy_app, REFUND_TICKET, ANSWERS, ignore=IGNORE)

    refunds_twice = [v for v in found if "effect 'refund' (key o-7) happened 2 times" in
                     v.message]
    assert refunds_twice, "\n".join(map(str, found))
    # only where the process died after the refund, before a checkpoint recorded it
    assert all(v.rule == "effects" for v in refunds_twice)


# --------------------------------------------------------------------------- explore & co


def test_explore_passes_on_the_correct_app():
    report = explore(make_app, REFUND_TICKET, answers=ANSWERS, seeds=range(8),
                     node_seed=EXPLORE_NODE_SEED)
    assert report.ok, str(report)
    assert report.coverage  # the parallel tools started in several orders


def test_without_a_node_seed_explore_sees_each_runs_own_ticket_id():
    report = explore(make_app, REFUND_TICKET, answers=ANSWERS, seeds=range(2))
    assert not report.ok
    assert "ticket_id" in str(report)


def test_explore_finds_a_fake_shared_between_runs():
    shared = build(Services())  # one graph, one set of fakes, for every run

    report = explore(shared, REFUND_TICKET, answers=ANSWERS, seeds=range(4),
                     node_seed=EXPLORE_NODE_SEED)

    assert not report.ok
    assert report.not_reproducible == [0]  # the baseline, run again, ended otherwise
    assert "refund_id" in str(report)  # the shared payment fake's second refund: rf-2


@pytest.mark.parametrize("check", [check_determinism, check_interrupt_resume_equivalence],
                         ids=["determinism", "equivalence"])
def test_the_other_whole_run_checks_pass_with_a_factory(check):
    kwargs = {"answers": ANSWERS} if check is check_determinism else {}
    args = (REFUND_TICKET,) if check is check_determinism else (REFUND_TICKET, ANSWERS)
    assert check(make_app, *args, **kwargs) == []


def test_a_long_pause_before_approval_changes_nothing():
    assert check_interrupt_resume_equivalence(make_app, REFUND_TICKET, ANSWERS, pause=86400,
                                              ignore=IGNORE) == []
