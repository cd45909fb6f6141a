"""Issue 14: "The crash-recovery exactly-once check sees only nodes declared external and
completions: an effect in a node left pure, or repeated by a Retry attempt, is invisible ...
Give users a way to count their own effects (an effect ledger or probe they call from node
code) that the checker verifies."
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, Retry, VirtualClock, record_effect
from pytest_graphflow.invariants import check_crash_recovery


class S(BaseModel):
    sent: bool = False


def graph(node: Any, **options: Any) -> Any:
    g = Graph("mail", S)
    g.node("send", node, **options)
    g.edge(START, "send")
    g.edge("send", END)
    return g.compile()


def sends_every_time(state: S) -> dict[str, Any]:
    record_effect("email", key="welcome")
    return {"sent": True}


def test_a_pure_node_repeating_its_effect_after_a_crash_is_reported() -> None:
    found = check_crash_recovery(graph(sends_every_time))

    assert any("effect 'email' (key welcome) happened 2 times" in v.message for v in found)
    assert {v.rule for v in found} == {"effects"}


def test_an_effect_repeated_by_a_retry_attempt_is_reported_in_the_fault_free_run() -> None:
    tries = [0]

    def flaky(state: S) -> dict[str, Any]:
        tries[0] += 1
        record_effect("email", key="welcome")  # sent, then the node fails anyway
        if tries[0] % 2 == 1:
            raise ConnectionError("timeout after sending")
        return {"sent": True}

    found = check_crash_recovery(graph(flaky, retry=Retry(attempts=2)))

    assert len(found) == 1
    assert found[0].message == ("in the fault-free run: effect 'email' (key welcome) happened "
                                "2 times; it must happen once (Retry attempts 1, 2 each did it)")


def test_an_idempotent_effect_passes() -> None:
    def app() -> Any:
        done: set[str] = set()  # the mail service's memory: fresh per crash point

        def once(state: S, ctx: Any) -> dict[str, Any]:
            key = f"{ctx.run_id}:welcome"
            if key not in done:
                done.add(key)
                record_effect("email", key="welcome")
            return {"sent": True}

        return graph(once)

    assert check_crash_recovery(app) == []


def test_record_effect_outside_a_checker_does_nothing() -> None:
    record_effect("email")  # no ledger: no error, no state
    result = GraphRuntime(clock=VirtualClock(), seed=0).invoke(graph(sends_every_time))
    assert result.data == {"sent": True}
