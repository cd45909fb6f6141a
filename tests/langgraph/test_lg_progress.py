"""``progress=`` on the LangGraph properties (issue 28): "`explore(..., progress=cb)` calls
`cb` at least once per run", for ``pytest_graphflow.langgraph.explore`` and its crash sweep
as for ours."""

from __future__ import annotations

from graphs import approval, fan_out

from pytest_graphflow import Progress
from pytest_graphflow.langgraph import check_crash_recovery, explore


def test_explore_reports_every_run_and_each_phase_end() -> None:
    seen: list[Progress] = []
    report = explore(fan_out(), {"log": []}, seeds=range(3), schedules=3, progress=seen.append)
    assert [str(p) for p in seen if not p.finished] == [
        "explore: schedules 1/3 (seed 0)", "explore: schedules 2/3 (seed 1)",
        "explore: schedules 3/3 (seed 2)"]
    assert report.runs == 3
    assert [(p.phase, p.detail) for p in seen if p.finished] == [
        ("schedules", "every seed ended alike"), ("rerun", "seed 0 repeats")]


def test_the_crash_sweep_reports_each_point() -> None:
    seen: list[Progress] = []
    found = check_crash_recovery(approval(), {"log": []}, answers={"review": "ok"},
                                 phases=("before",), progress=seen.append)
    points = [p for p in seen if not p.finished]
    assert points
    assert [p.done for p in points] == list(range(1, len(points) + 1))
    assert points[0].detail.startswith("before ")
    assert seen[-1] == Progress("check_crash_recovery", "crash points", len(points),
                                len(points), finished=True,
                                detail=f"{len(found)} violation(s)")
