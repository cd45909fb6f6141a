"""Before shipping a change to the approval graph: will the runs paused in production survive,
and does the new code still take the decisions the old one took?

``histories/`` holds two recorded runs (made with ``History.from_legs`` — in a real project,
``graphflow export`` from the production store or ``pytest --graphflow-record=DIR``): one
paused at the human review, one approved and charged after a retry of the payment API.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from approval.graph import PaymentAPI, build

from pytest_graphflow import (
    END,
    START,
    Graph,
    ReplayDiverged,
    assert_replays,
    check_upgrade,
    interrupt,
    load_history,
)

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.history.json"))


class NoCharges(PaymentAPI):
    """A payment API that fails the test if anything charges it."""

    async def charge(self, amount: int) -> str:
        raise AssertionError("a replay charged the card")


@pytest.mark.parametrize("path", HISTORIES, ids=[p.name for p in HISTORIES])
def test_recorded_runs_replay_without_charging_anyone(path: Path) -> None:
    api = NoCharges()
    assert_replays(path, build(api))
    assert api.calls == 0


def test_the_paused_run_can_resume_under_this_release() -> None:
    report = check_upgrade(HISTORIES[1], build(PaymentAPI()))
    assert load_history(HISTORIES[1]).status == "interrupted"
    assert report.compatible, str(report)


def test_renaming_the_review_node_would_strand_the_paused_run() -> None:
    # the change someone might make: "review" becomes "human_review"
    from approval.graph import Order

    def review(s: Order) -> dict[str, object]:
        return {"approved": interrupt(s.amount, id="approve") == "yes"}

    g = Graph("approval", Order)
    g.node("plan", lambda s: None)
    g.node("human_review", review, effect="human")
    g.edge(START, "plan")
    g.edge("plan", "human_review")
    g.edge("human_review", END)
    report = check_upgrade(HISTORIES[1], g.compile())
    assert "node_removed" in report.kinds
    assert any("pending interrupt in node 'review'" in p.message for p in report.problems)


def test_recording_a_run_in_a_test_and_replaying_it(graph_runtime, tmp_path: Path) -> None:
    # What --graphflow-record does for every run of a test, by hand for one run.
    import anyio

    from pytest_graphflow import History

    trace = graph_runtime.trace(build(PaymentAPI()), {"amount": 2000})  # fraud 70: rejected
    assert trace.result.data["audit"][-1] == "reject"
    checkpoints = anyio.run(graph_runtime.store.list, trace.result.run_id)
    history = History.from_legs(graph_runtime.recordings, checkpoints)
    path = history.save(tmp_path / "rejected.history.json")
    assert_replays(path, build(NoCharges()))


def test_a_replay_that_decides_otherwise_fails_with_a_diff() -> None:
    history = load_history(HISTORIES[0])  # approved, then charged
    with pytest.raises(ReplayDiverged, match="node 'review'"):
        # Answer "no" where the recorded human said "yes": the code now decides otherwise.
        assert_replays(history.model_copy(update={"resumes": [
            dict.fromkeys(history.resumes[0], "no")]}), build(NoCharges()))
