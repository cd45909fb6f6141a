"""A guardrail ``Block`` on every store and both anyio backends. Seed 004: "The thread has no
checkpoint checkpointId in its history: it never had one, or retention (Checkpointer.prune),
a guardrail Block (which retracts its turn) or deleteThread removed it. Nothing was changed."
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Allow,
    Block,
    CheckpointNotFound,
    CompiledGraph,
    Graph,
    GraphRuntime,
    Guardrail,
    GuardrailBlocked,
    NodeContext,
    Rewrite,
    VirtualClock,
    assert_events,
)

pytestmark = pytest.mark.anyio

SEED_BLOCK = "a guardrail Block (which retracts its turn)"


class Refund(BaseModel):
    """A refund a model proposes, under a limit."""

    asked: int = 0
    refund: int = 0
    limit: int = 100
    note: str = ""


def _limit(state: Refund, ctx: NodeContext, patch: dict[str, Any] | None) -> Any:
    amount = (patch or {}).get("refund", 0)
    if amount > state.limit:
        return Block(f"refund {amount} is over the limit {state.limit}")
    return Allow()


def _graph(**node: Any) -> CompiledGraph:
    """``intake -> propose -> notify``; the guardrail checks ``propose``."""
    g = Graph("refunds", Refund, guardrails=[Guardrail("refund-limit", _limit,
                                                          nodes="propose")])
    g.node("intake", lambda s: {"note": "received"})
    g.node("propose", lambda s: {"refund": s.asked}, **node)
    g.node("notify", lambda s: {"note": f"refunded {s.refund}"})
    g.edge(START, "intake")
    g.edge("intake", "propose")
    g.edge("propose", "notify")
    g.edge("notify", END)
    return g.compile()


async def test_a_guardrail_block_retracts_the_turn_and_a_resume_continues_from_the_turn_before(
    make_any_store: Any,
) -> None:
    assert GuardrailBlocked.__doc__ is not None
    assert CheckpointNotFound.__doc__ is not None
    assert GuardrailBlocked.__doc__.startswith("A" + SEED_BLOCK[1:])
    assert SEED_BLOCK.replace("Block", "``Block``") in " ".join(
        CheckpointNotFound.__doc__.split())
    store = make_any_store()
    rt = GraphRuntime(store, clock=VirtualClock(), seed=4)
    graph = _graph()
    trace = await rt.atrace(graph, {"asked": 500}, thread_id="t")
    result = trace.result
    assert result.status == "failed"
    err = result.error
    assert isinstance(err, GuardrailBlocked)
    assert (err.guardrail, err.node, err.reason) == ("refund-limit", "propose",
                                                     "refund 500 is over the limit 100")
    # An event says what was blocked and by which guardrail.
    assert_events(trace.events, [
        "...", "node_start:propose",
        {"type": "custom", "channel": "guardrail", "value": {
            "guardrail": "refund-limit", "decision": "block",
            "reason": "refund 500 is over the limit 100", "patch": {"refund": 500},
            "checkpoint_id": err.checkpoint_id}},
        "error:propose", "checkpoint_saved", "run_end",
    ])
    # The blocked checkpoint is absent from the history, and looking it up fails.
    history = await rt.history(result.run_id)
    assert err.checkpoint_id not in [cp.id for cp in history]
    assert all(cp.state["refund"] == 0 for cp in history)  # the patch was never applied
    assert await store.get(err.checkpoint_id) is None
    with pytest.raises(CheckpointNotFound, match="retracted by a guardrail Block"):
        await rt.aresume(err.checkpoint_id)
    with pytest.raises(CheckpointNotFound):
        await rt.history(result.run_id, before=err.checkpoint_id)
    # A resume continues from the turn before: intake's state, propose runs again.
    before = history[-1]
    assert before.state == history[-2].state
    assert [t.node for t in before.tasks] == ["propose"]
    await rt.aupdate_state(result.run_id, {"limit": 1000})
    done = await rt.aresume(result.run_id)
    assert done.status == "completed"
    assert (done.state.refund, done.state.note) == (500, "refunded 500")


async def test_a_block_takes_the_nodes_failure_route_when_it_has_one(make_any_store: Any) -> None:
    g = Graph("refunds", Refund, guardrails=[Guardrail("refund-limit", _limit)])
    g.node("propose", lambda s: {"refund": s.asked}, on_error="escalate")
    g.node("escalate", lambda s, ctx: {"note": ctx.failure["error_type"] + ": "
                                                + ctx.failure["message"].split(" (")[0]})
    g.edge(START, "propose")
    g.edge("propose", END)
    g.edge("escalate", END)
    rt = GraphRuntime(make_any_store(), clock=VirtualClock(), seed=4)
    done = await rt.ainvoke(g.compile(), {"asked": 500}, thread_id="t")
    assert done.status == "completed"
    assert (done.state.refund, done.state.note) == (
        0, "GuardrailBlocked: guardrail 'refund-limit' blocked the result of node 'propose'")


async def test_a_rewrite_replaces_the_patch_and_says_so(make_any_store: Any) -> None:
    def cap(state: Refund, ctx: NodeContext, patch: dict[str, Any] | None) -> Any:
        return Rewrite({"refund": min((patch or {}).get("refund", 0), state.limit)})

    g = Graph("capped", Refund, guardrails=[Guardrail("cap", cap, nodes=["propose"])])
    g.node("propose", lambda s: {"refund": s.asked})
    g.edge(START, "propose")
    g.edge("propose", END)
    rt = GraphRuntime(make_any_store(), clock=VirtualClock(), seed=4)
    trace = await rt.atrace(g.compile(), {"asked": 500}, thread_id="t")
    assert trace.result.state.refund == 100
    assert_events(trace.events, [
        "...", {"type": "custom", "channel": "guardrail",
                "value": {"guardrail": "cap", "decision": "rewrite", "patch": {"refund": 100}}},
        {"type": "node_end", "patch": {"refund": 100}}, "...",
    ])
