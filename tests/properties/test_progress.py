"""``progress=`` (issue 28): "long work — `explore()`, crash sweeps, conformance,
cross-process checks — reports progress: a `progress=` callback"; acceptance: "`explore(...,
progress=cb)` calls `cb` at least once per run"."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, InMemoryCheckpointStore, Progress, explore
from pytest_graphflow.conformance import run_store_conformance
from pytest_graphflow.errors import InvalidArgument
from pytest_graphflow.invariants import check_crash_recovery


class Three(BaseModel):
    a: int = 0
    b: int = 0
    c: int = 0


def _fan() -> Any:
    g = Graph("fan", Three)
    for name in "abc":
        g.node(name, lambda s, ctx: {ctx.node: 1})
    g.edge(START, ["a", "b", "c"])
    g.edge(["a", "b", "c"], END)
    return g.compile()


def test_explore_reports_every_run_then_the_end_of_each_phase() -> None:
    seen: list[Progress] = []
    report = explore(_fan(), {}, seeds=range(4), progress=seen.append)
    runs = [p for p in seen if p.phase == "schedules" and not p.finished]
    assert len(runs) == report.runs  # once per run
    assert [p.done for p in runs] == list(range(1, report.runs + 1))
    assert [p.detail for p in runs] == [f"seed {s}" for s in report.seeds]
    assert {p.total for p in runs} == {None}  # "exhaustive": stops once orders are covered
    ends = [p for p in seen if p.finished]
    assert [(p.phase, p.done) for p in ends] == [("schedules", report.runs), ("rerun", 1)]
    assert str(ends[0]) == (f"explore: schedules done ({report.runs}/{report.runs}): every "
                            "seed ended alike")


def test_explore_with_a_number_of_schedules_knows_the_total() -> None:
    seen: list[Progress] = []
    explore(_fan(), {}, schedules=3, merge_orders=True, progress=seen.append)
    assert [str(p) for p in seen if not p.finished] == [
        "explore: schedules 1/3 (seed 0)", "explore: schedules 2/3 (seed 1)",
        "explore: schedules 3/3 (seed 2)"]
    assert [p.phase for p in seen if p.finished] == ["schedules", "rerun", "merge orders"]


def test_a_crash_sweep_reports_each_crash_point() -> None:
    seen: list[Progress] = []
    violations = check_crash_recovery(_fan(), {}, phases=("before",), progress=seen.append)
    points = [p for p in seen if not p.finished]
    assert points
    assert [p.done for p in points] == list(range(1, len(points) + 1))
    assert {p.total for p in points} == {len(points)}
    assert points[0].detail == "crash_at('latest', nth=1, phase='before') (store call #0)"
    assert [str(p) for p in seen if p.finished] == [
        f"check_crash_recovery: crash points done ({len(points)}/{len(points)}): "
        f"{len(violations)} violation(s)"]


def test_store_conformance_reports_each_example() -> None:
    seen: list[Progress] = []
    run_store_conformance(InMemoryCheckpointStore, progress=seen.append,
                          settings=settings(max_examples=3, stateful_step_count=5,
                                            deadline=None, database=None))
    examples = [p for p in seen if not p.finished]
    assert len(examples) >= 3
    assert seen[-1].finished
    assert seen[-1].done == len(examples)


@pytest.mark.parametrize("call", [
    lambda: explore(_fan(), {}, schedules=1, progress="yes"),
    lambda: check_crash_recovery(_fan(), {}, progress=3),
], ids=["explore", "check_crash_recovery"])
def test_a_progress_that_is_not_callable_is_refused(call: Any) -> None:
    with pytest.raises(InvalidArgument, match=r"progress=.*pass a function progress\(p: "):
        call()
