"""Seed 004's tool failure, on every store and both anyio backends: "A tool call failed the
run: the tool returned Fatal, or broke its contract (an update to a key it does not declare,
a question it does not declare). cause says which." And what the store keeps of tool calls:
an ``external`` tool's recorded result is replayed by a runtime that resumes the run from the
store, never called twice after the checkpoint that recorded it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    CompiledGraph,
    Fatal,
    Graph,
    GraphRuntime,
    NodeContext,
    Resume,
    ToolCall,
    ToolCallEvent,
    ToolFailed,
    ToolResult,
    VirtualClock,
    assert_events,
    interrupt,
    tool,
)
from pytest_graphflow.invariants import check_invariants, check_tool_replays

pytestmark = pytest.mark.anyio

SEED_TOOL = ("A tool call failed the run: the tool returned Fatal, or broke its contract (an "
             "update to a key it does not declare, a question it does not declare). cause "
             "says which.")


class Refund(BaseModel):
    """A refund: its amount, what was refunded, and the approver's answer."""

    amount: int = 0
    refunded: int = 0
    approved: Any = None
    receipt: str = ""


class Bank:
    """A fake payment service: keeps its refunds by idempotency key between calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.refunds: dict[str, int] = {}

    def refund(self, key: str, amount: int) -> str:
        self.calls += 1
        self.refunds.setdefault(key, amount)
        return f"refund-{len(self.refunds)}"


def _graph(bank: Bank, behave: dict[str, str]) -> CompiledGraph:
    @tool(updates=["refunded"], asks=["approve"])
    def refund(args: dict[str, Any], call: ToolCall) -> Any:
        mode = behave["mode"]
        if mode == "fatal":
            return Fatal("the card was cancelled")
        if mode == "undeclared_question":
            interrupt("which account?", id="account")
        approved = interrupt({"refund": args["amount"]}, id="approve")
        if not approved:
            return ToolResult(value="declined")
        receipt = bank.refund(call.key, args["amount"])
        update: dict[str, Any] = {"refunded": args["amount"]}
        if mode == "undeclared_update":
            update["approved"] = True
        return ToolResult(value=receipt, update=update)

    def pay(state: Refund, ctx: NodeContext) -> dict[str, Any]:
        return {"receipt": ctx.call_tool(refund, {"amount": state.amount})}

    g = Graph("refunds", Refund)
    g.node("pay", pay, effect="external")
    g.edge(START, "pay").edge("pay", END)
    return g.compile()


@pytest.mark.parametrize("cause", ["fatal", "undeclared_update", "undeclared_question"])
async def test_each_broken_contract_fails_the_run_with_tool_failed_and_its_cause(
    make_any_store: Any, cause: str
) -> None:
    assert ToolFailed.__doc__ is not None
    assert " ".join(ToolFailed.__doc__.split()).startswith(SEED_TOOL)
    bank = Bank()
    behave = {"mode": cause}
    graph = _graph(bank, behave)
    store = make_any_store()
    rt = GraphRuntime(store, clock=VirtualClock(), seed=4)
    trace = await rt.atrace(graph, {"amount": 30}, thread_id="t")
    if cause == "undeclared_update":  # the tool asks its approval first
        assert trace.result.status == "interrupted"
        trace = await rt.aresume_trace(trace.result.run_id, Resume(True))
    first = trace.result
    assert first.status == "failed"
    err = first.error
    assert isinstance(err, ToolFailed)
    assert (err.cause, err.tool, err.node) == (cause, "refund", "pay")
    assert err.key.endswith(":tool-0")
    assert first.state.refunded == 0
    # The store holds the failure, resumable: a fresh runtime (another process) reads it.
    (latest,) = (await rt.history(first.run_id))[-1:]
    assert latest.status == "failed"
    assert latest.error is not None
    assert latest.error["error_type"] == "ToolFailed"
    failed = [e for e in trace.events if isinstance(e, ToolCallEvent)]
    assert [e.outcome for e in failed] == [cause]
    assert_events(trace, ["...", "tool_call:refund", "error:pay", "checkpoint_saved",
                          "run_end"])
    fresh = GraphRuntime(store, clock=VirtualClock(), seed=4)
    # Fixed, the run resumes from the store and completes; the failed call was not recorded,
    # so the tool runs again: it asks for its approval, unless the run already has the answer.
    behave["mode"] = "ok"
    done = await fresh.aresume(first.run_id, graph=graph)
    if cause != "undeclared_update":
        assert [i.id for i in done.interrupts.values()] == ["approve"]
        done = await fresh.aresume(first.run_id, Resume(True), graph=graph)
    assert done.status == "completed"
    assert (done.state.refunded, done.state.receipt) == (30, "refund-1")
    assert list(bank.refunds.values()) == [30]


async def test_an_approved_external_tool_is_never_called_again_after_its_checkpoint(
    make_any_store: Any,
) -> None:
    """The node asks a second question after the refund: resuming it from the store runs it
    again from the top, and the refund is replayed from the checkpoint that recorded it."""
    bank = Bank()
    calls: Counter[str] = Counter()

    @tool(updates=["refunded"], asks=["approve"])
    def refund(args: dict[str, Any], call: ToolCall) -> ToolResult:
        calls["refund"] += 1
        if not interrupt({"refund": args["amount"]}, id="approve"):
            return ToolResult(value="declined")
        return ToolResult(value=bank.refund(call.key, args["amount"]),
                          update={"refunded": args["amount"]})

    def pay(state: Refund, ctx: NodeContext) -> dict[str, Any]:
        receipt = ctx.call_tool(refund, {"amount": state.amount})
        mail = interrupt(f"mail {receipt}?", id="mail")
        return {"receipt": f"{receipt} mailed={mail}"}

    g = Graph("refunds", Refund)
    g.node("pay", pay, effect="pure")  # re-runs on resume: the tool's record is what saves it
    g.edge(START, "pay").edge("pay", END)
    graph = g.compile()
    store = make_any_store()
    rt = GraphRuntime(store, clock=VirtualClock(), seed=5)
    legs = [await rt.atrace(graph, {"amount": 12}, thread_id="t")]
    assert [i.id for i in legs[-1].result.interrupts.values()] == ["approve"]
    legs.append(await GraphRuntime(store, clock=VirtualClock(), seed=5).aresume_trace(
        legs[-1].result.run_id, Resume(True), graph=graph))
    assert [i.id for i in legs[-1].result.interrupts.values()] == ["mail"]
    assert (bank.calls, calls["refund"]) == (1, 2)  # asked, then approved and refunded
    fresh = GraphRuntime(store, clock=VirtualClock(), seed=5)
    legs.append(await fresh.aresume_trace(legs[-1].result.run_id, Resume("yes"), graph=graph))
    done = legs[-1].result
    assert done.status == "completed"
    assert (bank.calls, calls["refund"]) == (1, 2)  # replayed: neither asked nor refunded
    assert done.state.receipt == "refund-1 mailed=yes"
    assert done.state.refunded == 12
    events = [e for leg in legs for e in leg.events]
    replays = [(e.tool, e.replayed) for e in events if isinstance(e, ToolCallEvent)]
    assert replays == [("refund", False), ("refund", True)]
    assert check_tool_replays(events) == []
    assert check_invariants(events) == []
