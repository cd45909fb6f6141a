"""The ``graph_runtime`` fixture's runtime is built without the constructor's checks once the
first test's checks have answered (issue 29: ~30 calls a test): built so, it is the runtime
the checked constructor builds from the same parts, and it runs the same."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from graphflow_approval import approval_graph
from pytest_graphflow import (
    FaultyStore,
    GraphRuntime,
    InMemoryCheckpointStore,
    Resume,
    VirtualClock,
)
from pytest_graphflow._plugin import _runtime as plugin_runtime
from pytest_graphflow._plugin._marker import TestSettings
from pytest_graphflow.testing import RecordingRuntime


def _settings(policy: Any, start: datetime | None) -> TestSettings:
    return TestSettings(seed=11, seed_from_marker=False, seed_from_snapshot=False, start=start,
                        store="memory", checkpoint_policy=policy)


def _checked(settings: TestSettings, observer: Any) -> RecordingRuntime:
    """What ``memory_runtime`` built before: every part through the checked constructor."""
    clock = VirtualClock(settings.start)
    return RecordingRuntime(FaultyStore(InMemoryCheckpointStore(), clock=clock), clock=clock,
                            seed=settings.seed, checkpoint_policy=settings.checkpoint_policy,
                            observer=observer)


def _plain(runtime: GraphRuntime) -> dict[str, Any]:
    """The runtime's settings and the kinds of its parts (not the parts themselves: each
    runtime has its own store, clock, books and recorder)."""
    return {name: (value if isinstance(value, (int, float, str, tuple, type(None)))
                   else type(value).__name__) for name, value in vars(runtime).items()}


def _round_trip(runtime: RecordingRuntime) -> tuple[Any, ...]:
    paused = runtime.invoke(approval_graph("parts_approval"), {"n": 2})
    done = runtime.resume(paused.run_id, Resume("yes"))
    faults = runtime.store_faults
    assert faults is not None
    return (paused.run_id, done.data, [str(call) for call in faults.calls],
            [e.model_dump_json() for leg in runtime.recordings for e in leg.events])


@pytest.mark.parametrize("policy", [None, "every_step", "never"])
@pytest.mark.parametrize("start", [None, datetime(2030, 1, 2, tzinfo=UTC)])
def test_the_fixture_runtime_built_from_its_parts_is_the_checked_one(
        policy: Any, start: datetime | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugin_runtime, "_MEMORY_FEATURES", {})
    settings = _settings(policy, start)
    seen: list[Any] = []
    first = plugin_runtime.memory_runtime(settings, seen.append)  # checked, answer kept
    assert {policy: first.store_features} == plugin_runtime._MEMORY_FEATURES
    quick = plugin_runtime.memory_runtime(settings, seen.append)  # built from the parts
    checked = _checked(settings, seen.append)
    for runtime in (first, quick):
        assert _plain(runtime) == _plain(checked)
        assert runtime.store_features is checked.store_features
        assert runtime.clock.now() == checked.clock.now()  # type: ignore[attr-defined]
        assert runtime.store_faults is not None
        assert runtime.store_faults.clock is runtime.clock
        assert runtime.claim_ttl == checked.claim_ttl
    assert _round_trip(quick) == _round_trip(checked) == _round_trip(first)
    # the observer sees each leg of each runtime, as the checked constructor's does
    assert len(seen) == 6
    assert [leg.run_id for leg in quick.recordings] == [leg.run_id
                                                        for leg in checked.recordings]


def test_a_policy_is_checked_by_the_constructor_before_its_answer_is_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each checkpoint policy goes through the checked constructor once: a bad one raises
    there and leaves nothing kept (the marker refuses it before any test runs anyway)."""
    monkeypatch.setattr(plugin_runtime, "_MEMORY_FEATURES", {})
    with pytest.raises(Exception, match="checkpoint_policy"):
        plugin_runtime.memory_runtime(_settings("sometimes", None), lambda leg: None)
    assert plugin_runtime._MEMORY_FEATURES == {}


@pytest.mark.parametrize("resumed", [False, True])
def test_a_leg_made_for_the_observer_is_the_leg_the_dataclass_makes(resumed: bool) -> None:
    """``RunLeg._started`` sets the leg's fields itself (no property setters): it must set
    every field the dataclass's constructor sets, to the same values — a field added to
    ``RunLeg`` and not to ``_started`` fails here, not in a user's observer."""
    from pytest_graphflow._engine._results import RunLeg

    graph, store = approval_graph("parts_approval"), InMemoryCheckpointStore()
    initial = None if resumed else {"n": 1, "answer": ""}
    answers = {"ok": "yes"} if resumed else {}
    fast = RunLeg._started(graph, "run-1", resumed, 7, initial, answers, store, True)
    made = RunLeg(graph=graph, run_id="run-1", resumed=resumed, seed=7,
                  initial_state=initial, answers=answers, store=store)
    made.lazy = True
    assert vars(fast) == vars(made)
    assert fast == made
    assert fast.events == []
    assert fast.visited == []
