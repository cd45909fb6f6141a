"""``assert_replays``: a recorded run re-run against changed code, event by event.

A history is recorded once (paused at the review, resumed with "yes", the payment API
flaky once so the external ``charge`` retries), then replayed against the graph after each
kind of change a user makes: the ones that keep every decision replay, the others stop at the
first event that differs, with a diff naming the node and the event.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from graphflow_replay_graph import Payments, build, record

from pytest_graphflow import (
    History,
    ReplayDiverged,
    VirtualClock,
    assert_replays,
    load_history,
)
from pytest_graphflow.testing import RecordingRuntime


@pytest.fixture(scope="module")
def recorded() -> History:
    api = Payments(flaky=1)
    history = record(build(api))
    assert history.status == "completed"
    assert api.calls == 2  # one failure, one retry that succeeded
    return history


class Forbidden(Payments):
    """A payment API a replay must never call."""

    async def charge(self, amount: int) -> str:
        raise AssertionError("a replay called the external node's code")


@pytest.mark.parametrize("change", [None, "refactor"], ids=["unchanged", "refactored"])
def test_changes_that_keep_every_decision_replay(recorded: History, change: str | None) -> None:
    assert_replays(recorded, build(Forbidden(), change))


@pytest.mark.parametrize(
    ("change", "lines"),
    [
        ("route", [
            "diverged at event 16 of 38 (leg 1, step 2, node 'decide')",
            "  recorded: #16 edge_transition decide->review",
            "  now:      #16 edge_transition decide->reject",
            "  target: 'review' != 'reject'",
        ]),
        ("patch", [
            "diverged at event 3 of 38 (leg 1, step 0, node 'plan')",
            "  recorded: #3 node_end plan patch={'log': ['plan']}",
            "  now:      #3 node_end plan patch={'log': ['plan:v2']}",
            "  patch: {'log': ['plan']} != {'log': ['plan:v2']}",
        ]),
    ],
    ids=["a-branch-decides-otherwise", "a-node-writes-otherwise"],
)
def test_changes_that_decide_otherwise_diverge_with_a_diff(
    recorded: History, change: str, lines: list[str]
) -> None:
    with pytest.raises(ReplayDiverged) as caught:
        assert_replays(recorded, build(Forbidden(), change))
    text = str(caught.value)
    for line in lines:
        assert line in text.splitlines() or line in text.splitlines()[0]
    assert isinstance(caught.value, AssertionError)  # a plain failing assertion in pytest
    assert caught.value.recorded is not None
    assert caught.value.replayed is not None


def test_a_renamed_paused_node_diverges_where_the_run_reaches_it(recorded: History) -> None:
    with pytest.raises(ReplayDiverged, match=r"recorded: #16 edge_transition decide->review\n"
                       r"  now:      #16 edge_transition decide->approve"):
        assert_replays(recorded, build(Forbidden(), "renamed"))


def test_external_results_come_from_the_recording(recorded: History) -> None:
    # The recorded charge failed once and was retried 2 virtual seconds later; the replay
    # reproduces the attempts, their times and the receipt without calling the API.
    api = Forbidden()
    assert_replays(recorded, build(api))
    assert api.calls == 0
    charge_ends = [e for e in recorded.parsed_events()
                   if e.type == "node_end" and e.node == "charge"]  # type: ignore[attr-defined]
    assert charge_ends[0].patch == {"receipt": "rcpt-120-2", "log": ["charge"]}  # type: ignore[attr-defined]


def test_a_history_round_trips_through_its_file(recorded: History, tmp_path: Path) -> None:
    path = recorded.save(tmp_path / "checkout.history.json")
    data = json.loads(path.read_text())
    assert (data["format"], data["format_version"]) == ("graphflow-history", 1)
    assert data["graph"]["nodes"]["charge"] == "external"
    assert load_history(path) == recorded
    assert path.read_text() == load_history(path).dumps()  # stable bytes
    assert_replays(path, build(Forbidden()))


def test_answers_a_hook_gave_are_given_again() -> None:
    runtime = RecordingRuntime(clock=VirtualClock(), seed=5, on_interrupt=lambda i: "no")
    result = runtime.invoke(build(Payments()), {"amount": 10})
    assert result.status == "completed"
    assert result.data["approved"] is False
    history = History.from_legs(runtime.recordings,
                                anyio.run(runtime.store.list, result.run_id))
    assert_replays(history, build(Forbidden()))


def test_a_run_still_paused_replays_up_to_its_pause() -> None:
    history = record(build(Payments()), answer=None)
    assert history.status == "interrupted"
    assert_replays(history, build(Forbidden()))
    with pytest.raises(ReplayDiverged, match="decide->reject"):
        assert_replays(history, build(Forbidden(), "route"))


def test_a_leg_a_store_fault_ended_is_compared_up_to_the_fault() -> None:
    from pytest_graphflow import FaultyStore, InMemoryCheckpointStore, Resume, StoreFault

    store = FaultyStore(InMemoryCheckpointStore())
    store.reject_save(nth=3)
    runtime = RecordingRuntime(store, clock=VirtualClock(), seed=3)
    with pytest.raises(StoreFault):
        runtime.invoke(build(Payments()), {"amount": 120})
    run_id = runtime.recordings[0].run_id
    assert runtime.resume(run_id).status == "interrupted"  # recovered after the fault
    assert runtime.resume(run_id, Resume("yes")).status == "completed"
    assert [leg.status for leg in runtime.recordings] == ["raised", "interrupted", "completed"]
    history = History.from_legs(runtime.recordings, anyio.run(store.inner.list, run_id))
    assert_replays(history, build(Forbidden()))
    with pytest.raises(ReplayDiverged, match="leg 2"):
        assert_replays(history, build(Forbidden(), "route"))
