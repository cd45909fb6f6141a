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


# ------------------------------------------------------------------ strict_effects
# Issue 14: "strict_effects=True also fails correct graphs." It allowed no re-run at all, but
# a crash after an external node returned and before its batch's checkpoint was saved always
# re-runs it (at least once, SPEC C9): every graph with such a batch failed. Now it means
# "exactly once, shown": each write/external task records its effect, and the ledger judges
# the re-runs.


class Paid(BaseModel):
    paid: bool = False
    ok: bool = False


class Bank:
    """A fake payment service; ``idempotent`` ones remember the keys they have paid."""

    def __init__(self, idempotent: bool, records: bool = True) -> None:
        self.idempotent, self.records, self.seen = idempotent, records, set[str]()

    def pay(self, key: str) -> None:
        if self.idempotent and key in self.seen:
            return
        self.seen.add(key)
        if self.records:
            record_effect("payment", key="order-1")


def pay_and_ask(bank: Bank) -> Any:
    """``pay`` (external) runs in the batch of ``ask``, which pauses: a crash before that
    batch's checkpoint re-runs ``pay`` (the window every external node in a batch has)."""
    from pytest_graphflow import interrupt

    def pay(state: Paid, ctx: Any) -> dict[str, Any]:
        bank.pay(f"{ctx.run_id}:{ctx.task_id}")
        return {"paid": True}

    def ask(state: Paid) -> dict[str, Any]:
        return {"ok": bool(interrupt("ship?", id="q"))}

    g = Graph("pay", Paid)
    g.node("pay", pay, effect="external")
    g.node("ask", ask, effect="human")
    g.edge(START, ["pay", "ask"])
    g.edge(["pay", "ask"], END)
    return g.compile()


ANSWERS = {"ask:q": True}


def test_strict_effects_passes_an_idempotent_external_node_that_records_its_effect() -> None:
    """The correct graph: before the fix, strict_effects reported its unavoidable re-run."""
    assert check_crash_recovery(lambda: pay_and_ask(Bank(idempotent=True)), {}, ANSWERS,
                                strict_effects=True) == []


def test_strict_effects_fails_a_payment_made_twice() -> None:
    found = check_crash_recovery(lambda: pay_and_ask(Bank(idempotent=False)), {}, ANSWERS,
                                 strict_effects=True)
    assert found
    assert {v.rule for v in found} == {"effects"}
    assert any(v.message == "after crash_at('save', nth=2, phase='before') (store call #3) "
               "and recovery: effect 'payment' (key order-1) happened 2 times; it must happen "
               "once" for v in found), [v.message for v in found]


def test_strict_effects_asks_an_external_node_to_record_its_effect() -> None:
    """Without a record, a re-run cannot be told from a second payment: strict says so once
    per task (and the default check lets the at-least-once re-run pass)."""
    def unrecorded() -> Any:
        return pay_and_ask(Bank(idempotent=True, records=False))

    assert check_crash_recovery(unrecorded, {}, ANSWERS) == []
    found = check_crash_recovery(unrecorded, {}, ANSWERS, strict_effects=True)
    assert len(found) == 1, found
    assert found[0].rule == "effects"
    assert found[0].message.startswith("strict_effects: external node 'pay' (task task-")
    assert found[0].message.endswith(
        ") completed in the fault-free run without recording its effect; call "
        "record_effect(name, key) where the effect happens (after its idempotency check) so "
        "the check can count it, or leave strict_effects off")
