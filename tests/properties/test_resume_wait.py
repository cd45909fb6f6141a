"""Issue 25: "Time between pause and resume: check_interrupt_resume_equivalence(..., wait=)
resumes after a virtual wait (hours, across midnight) and reports a different path."

Each planted route re-decides on the clock after the resume; its fixed twin decides before
the interrupt, in a node of its own, and keeps the decision in the state.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, InvalidArgument, interrupt
from pytest_graphflow.invariants import check_interrupt_resume_equivalence


class Shift(BaseModel):
    answer: str = ""
    decided: str = ""
    shift: str = ""


def by_hour(ctx: Any) -> str:
    """Mornings go to the day desk (``ctx.now()``: the run's virtual clock)."""
    return "day" if ctx.now().hour < 12 else "night"


def by_date(ctx: Any) -> str:
    """New Year's Day goes to the day desk (``datetime.now()``: virtual under the checkers)."""
    return "day" if datetime.now().date() == date(2025, 1, 1) else "night"


def shifts(clock: Callable[[Any], str], decided_first: bool, in_route: bool = False) -> Any:
    """ask (interrupts) → day | night, routed on ``decided``. The planted bug decides in
    ``ask``, after its interrupt (so again on resume), or (``in_route``) in the route after
    ``ask``; the fixed twin decides in ``plan``, before asking, and keeps the decision in the
    state."""

    def plan(state: Shift, ctx: Any) -> dict[str, str]:
        return {"decided": clock(ctx)}

    def ask(state: Shift, ctx: Any) -> dict[str, str]:
        answer = str(interrupt("take the ticket?", id="q"))
        return {"answer": answer} if decided_first else {"answer": answer,
                                                         "decided": clock(ctx)}

    def desk(name: str) -> Callable[[Shift], dict[str, str]]:
        return lambda state: {"shift": name}

    g = Graph("shifts", Shift)
    g.node("ask", ask).node("day", desk("day")).node("night", desk("night"))
    if in_route and not decided_first:
        g.branch("ask", lambda s: clock(None), ["day", "night"])
    else:
        g.branch("ask", lambda s: s.decided, ["day", "night"])
    g.edge("day", END).edge("night", END)
    if decided_first:
        g.node("plan", plan).edge(START, "plan").edge("plan", "ask")
    else:
        g.edge(START, "ask")
    return g.compile()


WAITS = [
    pytest.param(by_hour, timedelta(hours=12), False, id="ctx.now-hour-12h"),
    pytest.param(by_hour, 12 * 3600, False, id="ctx.now-hour-seconds"),
    pytest.param(by_date, timedelta(hours=30), False, id="datetime.now-date-across-midnight"),
    pytest.param(by_date, timedelta(hours=30), True, id="route-datetime.now-across-midnight"),
]


@pytest.mark.parametrize(("clock", "wait", "in_route"), WAITS)
def test_a_route_that_re_decides_on_the_clock_after_resume_is_found(
    clock: Callable[[Any], str], wait: Any, in_route: bool,
) -> None:
    graph = shifts(clock, decided_first=False, in_route=in_route)
    assert check_interrupt_resume_equivalence(graph, answers={"q": "yes"}) == []

    found = check_interrupt_resume_equivalence(graph, answers={"q": "yes"}, wait=wait)

    assert [v.rule for v in found] == ["equivalence", "equivalence"]
    seconds = wait.total_seconds() if isinstance(wait, timedelta) else wait
    for v in found:
        assert f"{seconds:g}s ({timedelta(seconds=seconds)}) each pause" in v.message
        assert "it took the path ask → night, not ask → day" in v.message
        assert 'shift: "day" → "night"' in v.message


@pytest.mark.parametrize(("clock", "wait", "in_route"), WAITS)
def test_the_twin_that_keeps_its_decision_in_the_state_passes(
    clock: Callable[[Any], str], wait: Any, in_route: bool,
) -> None:
    graph = shifts(clock, decided_first=True)

    assert check_interrupt_resume_equivalence(graph, answers={"q": "yes"}, wait=wait) == []


BAD_WAITS = [
    pytest.param({"wait": -1}, "wait=-1", id="negative-seconds"),
    pytest.param({"wait": timedelta(hours=-1)}, "wait=datetime.timedelta", id="negative-delta"),
    pytest.param({"wait": "12h"}, "wait='12h'", id="str"),
    pytest.param({"wait": True}, "wait=True", id="bool"),
    pytest.param({"wait": float("nan")}, "wait=nan", id="nan"),
    pytest.param({"wait": 60, "pause": 60}, "give one of them", id="wait-and-pause"),
]


@pytest.mark.parametrize(("kwargs", "names"), BAD_WAITS)
def test_a_bad_wait_is_refused_naming_it(kwargs: dict[str, Any], names: str) -> None:
    with pytest.raises(InvalidArgument, match="check_interrupt_resume_equivalence") as err:
        check_interrupt_resume_equivalence(shifts(by_hour, True), answers={"q": "yes"}, **kwargs)
    assert names in str(err.value)
