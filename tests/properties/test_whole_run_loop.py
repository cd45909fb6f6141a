"""Issue 14: every whole-run tool runs the graph on the loop the runtime owns.

"explore() and every whole-run checker run the graph inside a plain anyio.run ... A batch that
can never wake gives VirtualDeadlock at once under GraphRuntime(clock=VirtualClock()) ... but
these tools hang for minutes. Timers differ too: a node with move_on_after(10) around
sleep(3600) ends cancelled at 00:00:10 on the runtime and not cancelled at 01:00:00 under
explore()."
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, VirtualClock, explore
from pytest_graphflow.invariants import (
    check_crash_recovery,
    check_determinism,
    check_interrupt_resume_equivalence,
    record_run_sync,
)


class S(BaseModel):
    x: int = 0
    cancelled: bool = False
    at: float = 0.0


async def waits_for_nothing(state: S) -> dict[str, int]:
    await anyio.Event().wait()
    return {"x": 1}


async def sleeps_a_second(state: S) -> None:
    await anyio.sleep(1)


def stuck_graph() -> Any:
    g = Graph("stuck", S)
    g.node("stuck", waits_for_nothing)
    g.node("sibling", sleeps_a_second)
    g.edge(START, ["stuck", "sibling"])
    g.edge("stuck", END)
    g.edge("sibling", END)
    return g.compile()


async def times_out(state: S) -> dict[str, Any]:
    with anyio.move_on_after(10) as scope:
        await anyio.sleep(3600)
    return {"cancelled": scope.cancelled_caught, "at": anyio.current_time()}


def timer_graph() -> Any:
    g = Graph("timer", S)
    g.node("wait", times_out)
    g.edge(START, "wait")
    g.edge("wait", END)
    return g.compile()


TOOLS: list[tuple[str, Callable[[Any], Any]]] = [
    ("explore", lambda g: explore(g, schedules=2).baseline.status),
    ("check_determinism", lambda g: check_determinism(g, runs=2)),
    ("check_interrupt_resume_equivalence", lambda g: check_interrupt_resume_equivalence(g)),
    ("check_crash_recovery", lambda g: check_crash_recovery(g, points=[0])),
    ("record_run_sync", lambda g: record_run_sync(g).result),
]


@pytest.mark.parametrize(("name", "tool"), TOOLS, ids=[n for n, _ in TOOLS])
def test_no_tool_hangs_on_a_graph_the_runtime_ends_with_virtual_deadlock(
    name: str, tool: Callable[[Any], Any]
) -> None:
    graph = stuck_graph()
    on_runtime = GraphRuntime(clock=VirtualClock(), seed=0).invoke(graph)
    assert on_runtime.status == "failed"
    assert type(on_runtime.error).__name__ == "VirtualDeadlock"

    started = time.perf_counter()
    tool(graph)  # returns (what it finds does not matter here): it must not hang
    assert time.perf_counter() - started < 30


def test_explore_reports_the_deadlock_and_stops_at_the_first_seed() -> None:
    # Issue 25: the deadlock is a finding (naming the waiting node), not an outcome like any
    # other; every further seed would wait the same way.
    report = explore(stuck_graph(), schedules=3)

    assert [o.status for o in report.outcomes] == ["failed"]
    assert not report.ok
    assert [v.rule for v in report.violations] == ["deadlock"]
    assert "wait forever" in report.violations[0].message
    assert "'stuck'" in report.violations[0].message


def test_timers_in_explore_are_the_runtimes_timers() -> None:
    graph = timer_graph()
    want = GraphRuntime(clock=VirtualClock(), seed=0).invoke(graph)
    assert want.data["cancelled"] is True

    report = explore(graph, schedules=1)

    assert json.loads(report.baseline.state) == want.data


def test_timers_in_the_recorded_run_are_the_runtimes_timers() -> None:
    graph = timer_graph()
    want = GraphRuntime(clock=VirtualClock(), seed=0).invoke(graph)

    rec = record_run_sync(graph)

    assert rec.result is not None
    assert rec.result.data == want.data


@pytest.mark.parametrize("check", [check_determinism, check_interrupt_resume_equivalence,
                                   check_crash_recovery],
                         ids=["determinism", "equivalence", "crash-recovery"])
def test_the_checkers_agree_with_the_runtime_on_timers(check: Callable[..., Any]) -> None:
    # The node's outcome hangs on the virtual timer: with the runtime's timers every way of
    # running it ends cancelled, so the checkers find nothing. ("at" is the loop time: a
    # recovered run resumes after the dead process's claim expired, later by design.)
    assert check(timer_graph(), ignore=["at"]) == []
