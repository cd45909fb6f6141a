"""``assert_replays`` with tools (issue 26): a replay never calls a recorded (``external``)
tool, whatever node calls it — the recorded call is played back, its ``tool_call`` event,
update and value as they were — while a ``pure`` tool runs again; a change that makes a
call the recording does not have diverges, naming it."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    CompiledGraph,
    Fatal,
    Graph,
    History,
    NodeContext,
    ReplayDiverged,
    Resume,
    Retry,
    ToolCall,
    ToolResult,
    VirtualClock,
    aassert_replays,
    assert_replays,
    interrupt,
    tool,
)
from pytest_graphflow.testing import RecordingRuntime


class Order(BaseModel):
    """An order and what happened to it."""

    amount: int = 0
    paid: int = 0
    note: str = ""


class Bank:
    """The payment API; ``forbidden`` makes any call a test failure (a replay's bank)."""

    def __init__(self, *, forbidden: bool = False, flaky: int = 0) -> None:
        self.forbidden = forbidden
        self.flaky = flaky
        self.calls = 0

    def charge(self, amount: int) -> str:
        if self.forbidden:
            raise AssertionError("a replay called the external tool")
        self.calls += 1
        if self.calls <= self.flaky:
            raise ConnectionError("reset")
        return f"ch-{amount}"


def build(bank: Bank, *, change: str | None = None, effect: str = "pure") -> CompiledGraph:
    @tool(updates=["paid"], retry=Retry(attempts=2, backoff=1.0))
    def charge(args: dict[str, Any], call: ToolCall) -> ToolResult:
        return ToolResult(value=bank.charge(args["amount"]), update={"paid": args["amount"]})

    @tool(effect="pure")
    def fmt(args: dict[str, Any]) -> str:
        return f"{args['receipt']} ({args['amount']} EUR)"

    @tool
    def refuse(args: Any) -> Fatal:
        return Fatal("never called in the recording")

    async def pay(state: Order, ctx: NodeContext) -> dict[str, Any]:
        receipt = await ctx.acall_tool(charge, {"amount": state.amount})
        if change == "extra-call":
            await ctx.acall_tool(refuse, None)
        shown = ctx.call_tool(fmt, {"receipt": receipt, "amount": state.amount})
        mail = interrupt(f"mail {shown}?", id="mail")
        return {"note": f"{shown} mailed={mail}"}

    g = Graph("tool-replay", Order)
    g.node("pay", pay, effect=effect)  # pure: its code runs again on resume and in a replay
    g.edge(START, "pay").edge("pay", END)
    return g.compile()


def _record(effect: str) -> History:
    bank = Bank(flaky=1)
    graph = build(bank, effect=effect)
    runtime = RecordingRuntime(clock=VirtualClock(), seed=5)
    paused = runtime.invoke(graph, {"amount": 30})
    done = runtime.resume(paused.run_id, Resume("yes"))
    assert done.state.note == "ch-30 (30 EUR) mailed=yes"
    assert bank.calls == 2  # one reset, one retry that charged
    checkpoints = anyio.run(runtime.store.list, paused.run_id)
    return History.from_legs(runtime.recordings, checkpoints, source="tests/replay")


@pytest.fixture(scope="module")
def recorded() -> History:
    return _record("pure")


def test_a_replay_plays_back_recorded_tool_calls_without_calling_them(recorded: History
                                                                      ) -> None:
    calls = [e for e in recorded.parsed_events() if e.type == "tool_call"]
    assert [(e.tool, e.replayed, e.attempts) for e in calls] == [
        ("charge", False, 2), ("fmt", False, 1), ("charge", True, 2), ("fmt", False, 1)]
    assert_replays(recorded, build(Bank(forbidden=True)))


def test_a_stubbed_external_node_plays_back_its_tool_calls_as_they_were() -> None:
    """An ``external`` node is played back whole (its code is not called): its recorded
    ``tool_call`` events come back among its events, in order, replays included."""
    assert_replays(_record("external"), build(Bank(forbidden=True), effect="external"))


@pytest.mark.anyio
async def test_the_async_replay_plays_them_back_too(recorded: History) -> None:
    await aassert_replays(recorded, build(Bank(forbidden=True)))


def test_a_call_the_recording_does_not_have_diverges_naming_it(recorded: History) -> None:
    with pytest.raises(ReplayDiverged) as caught:
        assert_replays(recorded, build(Bank(forbidden=True), change="extra-call"))
    text = str(caught.value)
    assert "(leg 1, step 0, node 'pay')" in text.splitlines()[0]
    assert "node 'pay' called tool 'refuse' as call task-" in text
    assert caught.value.replayed is not None
    assert "which the recording does not have" in caught.value.replayed["message"]
