"""Issue 14: "The crash-recovery exactly-once check sees only nodes declared external and
completions: an effect in a node left pure, or repeated by a Retry attempt, is invisible ...
Give users a way to count their own effects (an effect ledger or probe they call from node
code) that the checker verifies."
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, Retry, VirtualClock, record_effect
from pytest_graphflow.invariants import check_crash_recovery, check_interrupt_resume_equivalence


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
    # Issue 25: found already in the fault-free run, by the pure node recording an effect.
    found = check_crash_recovery(graph(sends_every_time))

    assert [v.message for v in found] == [
        "in the fault-free run: pure node 'send' recorded effect 'email' (key welcome); a pure "
        "node is re-run freely (on resume, on recovery), so its effect is unprotected: declare "
        "it effect='external' (or 'write'), or make it in a call of an external tool "
        "(ctx.call_tool)"]
    assert {v.rule for v in found} == {"effects"}


def test_an_effect_repeated_by_a_retry_attempt_is_reported_in_the_fault_free_run() -> None:
    tries = [0]

    def flaky(state: S) -> dict[str, Any]:
        tries[0] += 1
        record_effect("email", key="welcome")  # sent, then the node fails anyway
        if tries[0] % 2 == 1:
            raise ConnectionError("timeout after sending")
        return {"sent": True}

    found = check_crash_recovery(graph(flaky, retry=Retry(attempts=2), effect="external"))

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

        return graph(once, effect="external")

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


def test_a_payment_repeated_in_the_at_least_once_window_is_reported_as_such() -> None:
    """Issue 25: the default check asks for exactly once and says why it was not: the re-run
    of a task no acknowledged checkpoint recorded (the at-least-once window)."""
    found = check_crash_recovery(lambda: pay_and_ask(Bank(idempotent=False)), {}, ANSWERS)
    assert found
    assert {v.rule for v in found} == {"effects"}
    assert any(v.message == "after crash_at('save', nth=2, phase='before') (store call #3) "
               "and recovery: effect 'payment' (key order-1) happened 2 times; it must happen "
               "once; repeated by the re-run of a task no acknowledged checkpoint recorded "
               "when the process died (the at-least-once window): make the effect idempotent "
               "(an idempotency key the re-run keeps)" for v in found), [v.message for v in found]


def test_strict_effects_accepts_the_documented_at_least_once_window() -> None:
    """Issue 25: "strict_effects=True fails the correct twins too (the documented
    at-least-once window), so it does not tell them apart." Strict holds the run to the
    runtime's promise: at least once until the batch's checkpoint is acknowledged."""
    assert check_crash_recovery(lambda: pay_and_ask(Bank(idempotent=False)), {}, ANSWERS,
                                strict_effects=True) == []


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


# ------------------------------------------------------------------ issue 25
# "Effects invisible to the checkers: a card charge in a node left at effect="pure", or a
# side effect repeated by a retry attempt, passes every checker; strict_effects=True fails the
# correct twins too (the documented at-least-once window), so it does not tell them apart."


class Card:
    """A fake card processor: ``idempotent`` ones remember the keys they have charged."""

    def __init__(self, idempotent: bool) -> None:
        self.idempotent, self.charged = idempotent, set[str]()

    def charge(self, key: str) -> None:
        if self.idempotent and key in self.charged:
            return
        self.charged.add(key)
        record_effect("charge", key=key)


def checkout(card: Card, effect: str) -> Any:
    def charge(state: Paid, ctx: Any) -> dict[str, Any]:
        card.charge(f"{ctx.run_id}:order-1")
        return {"paid": True}

    g = Graph("checkout", Paid)
    g.node("charge", charge, effect=effect)  # type: ignore[arg-type]
    g.edge(START, "charge")
    g.edge("charge", END)
    return g.compile()


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
def test_a_card_charge_in_a_node_left_pure_is_found(strict: bool) -> None:
    found = check_crash_recovery(lambda: checkout(Card(idempotent=True), "pure"),
                                 strict_effects=strict)

    assert len(found) == 1, found
    assert found[0].rule == "effects"
    assert found[0].message.startswith("in the fault-free run: pure node 'charge' recorded "
                                       "effect 'charge' (key run-")
    assert "declare it effect='external'" in found[0].message


@pytest.mark.parametrize("effect", ["read", "pure"])
def test_a_read_node_recording_an_effect_is_found_like_a_pure_one(effect: str) -> None:
    (found,) = check_crash_recovery(lambda: checkout(Card(idempotent=True), effect))
    assert f"{effect} node 'charge' recorded effect 'charge'" in found.message


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
def test_the_same_charge_declared_external_passes(strict: bool) -> None:
    assert check_crash_recovery(lambda: checkout(Card(idempotent=True), "external"),
                                strict_effects=strict) == []


def retried_charge(card: Card) -> Any:
    """The processor charges, then the connection drops; ``Retry`` calls it again."""
    tries = [0]

    def charge(state: Paid, ctx: Any) -> dict[str, Any]:
        tries[0] += 1
        card.charge(f"{ctx.run_id}:{ctx.task_id}")  # the same key in every attempt
        if tries[0] % 2 == 1:
            raise ConnectionError("connection reset after the charge went through")
        return {"paid": True}

    g = Graph("retried", Paid)
    g.node("charge", charge, effect="external", retry=Retry(attempts=2))
    g.edge(START, "charge")
    g.edge("charge", END)
    return g.compile()


def test_a_retried_non_idempotent_charge_is_found() -> None:
    found = check_crash_recovery(lambda: retried_charge(Card(idempotent=False)))

    assert len(found) == 1, found
    assert found[0].message.startswith("in the fault-free run: effect 'charge' (key run-")
    assert found[0].message.endswith("happened 2 times; it must happen once (Retry attempts "
                                     "1, 2 each did it)")


def test_a_retried_charge_with_an_idempotency_key_the_fake_checks_passes() -> None:
    assert check_crash_recovery(lambda: retried_charge(Card(idempotent=True)),
                                strict_effects=True) == []


class Late(BaseModel):
    paid: bool = False
    at: str = ""
    settled: bool = False


def late_fee(card: Card, reminder_idempotent: bool) -> Any:
    """``charge`` (checkpointed), then ``settle``: a charge still unsettled after 10 s is
    charged again — with the same key. A recovery takes longer than 10 s (it waits out the dead
    process's claim), so the key the acknowledged checkpoint covers is charged again by
    another task: a real duplicate, which no at-least-once window explains."""
    from datetime import datetime

    reminder = Card(idempotent=reminder_idempotent)
    reminder.charged = card.charged  # one processor, two clients

    def charge(state: Late, ctx: Any) -> dict[str, Any]:
        card.charge("order-1")
        return {"paid": True, "at": ctx.now().isoformat()}

    def settle(state: Late, ctx: Any) -> dict[str, Any]:
        if (ctx.now() - datetime.fromisoformat(state.at)).total_seconds() > 10:
            reminder.charge("order-1")
        record_effect("settlement", key="order-1")  # its own effect (strict asks for it)
        return {"settled": True}

    g = Graph("late", Late)
    g.node("charge", charge, effect="external")
    g.node("settle", settle, effect="external")
    g.edge(START, "charge")
    g.edge("charge", "settle")
    g.edge("settle", END)
    return g.compile()


def test_strict_effects_finds_a_key_charged_again_after_its_checkpoint_was_acknowledged() -> None:
    found = check_crash_recovery(lambda: late_fee(Card(idempotent=True), False),
                                 strict_effects=True, ignore=["at"])

    assert found
    assert {v.rule for v in found} == {"effects"}
    assert all("effect 'charge' (key order-1) happened 2 times; it must happen once; a real "
               "duplicate: recorded again although the checkpoint recovery resumed from covers "
               "it (or by another task)" in v.message for v in found), found


def test_strict_effects_passes_the_twin_whose_second_client_checks_the_key() -> None:
    assert check_crash_recovery(lambda: late_fee(Card(idempotent=True), True),
                                strict_effects=True, ignore=["at"]) == []


# ------------------------------------------------------------------ across a pause


def charge_then_ask(card: Card, effect: str = "external", charge_first: bool = True) -> Any:
    """One node that charges and asks: on resume it runs again from the top, so a charge
    before its ``interrupt()`` is made again. The fixed twin charges after the answer."""
    from pytest_graphflow import interrupt

    def charge(state: Paid, ctx: Any) -> dict[str, Any]:
        if charge_first:
            card.charge(f"{ctx.run_id}:order-1")
        ok = bool(interrupt("ship?", id="q"))
        if not charge_first:
            card.charge(f"{ctx.run_id}:order-1")
        return {"paid": True, "ok": ok}

    g = Graph("ask", Paid)
    g.node("charge", charge, effect=effect)  # type: ignore[arg-type]
    g.edge(START, "charge")
    g.edge("charge", END)
    return g.compile()


def test_interrupt_resume_equivalence_finds_a_charge_made_again_on_resume() -> None:
    found = check_interrupt_resume_equivalence(lambda: charge_then_ask(Card(False)),
                                               answers={"q": True})

    assert [v.rule for v in found] == ["effects"]
    assert found[0].message.startswith("pausing and resuming (same-runtime resumes): effect "
                                       "'charge' (key run-")
    assert found[0].message.endswith("happened 2 times; it must happen once")


def test_interrupt_resume_equivalence_finds_a_charge_in_a_pure_node() -> None:
    found = check_interrupt_resume_equivalence(
        lambda: charge_then_ask(Card(True), effect="pure", charge_first=False),
        answers={"q": True})

    assert [v.rule for v in found] == ["effects"]
    assert "pure node 'charge' recorded effect 'charge'" in found[0].message


def test_interrupt_resume_equivalence_passes_the_charge_made_after_the_answer() -> None:
    assert check_interrupt_resume_equivalence(
        lambda: charge_then_ask(Card(False), charge_first=False), answers={"q": True}) == []
