"""State updates from outside a run: ``update_state(run_or_thread, values, as_node=...)`` and
``Resume(..., update=...)``. An update merges like a node's patch (reducers applied)."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    InvalidArgument,
    Reducer,
    Resume,
    UndeclaredWrite,
    UnknownKey,
    UpdateRejected,
    VirtualClock,
    interrupt,
)

pytestmark = pytest.mark.anyio


class State(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []
    answer: str = ""
    n: int = 0


def approval(calls: list[str]) -> Any:
    """plan -> ask (human, interrupts) -> ship -> END."""

    def plan(state: State) -> dict[str, Any]:
        calls.append("plan")
        return {"log": ["plan"]}

    def ask(state: State) -> dict[str, Any]:
        calls.append("ask")
        return {"answer": interrupt("ship?", id="ship"), "log": ["ask"]}

    def ship(state: State) -> dict[str, Any]:
        calls.append("ship")
        return {"log": [f"ship:{state.answer}"]}

    g = Graph("approval", State)
    g.node("plan", plan).node("ask", ask, effect="human", writes={"answer", "log"})
    g.node("ship", ship)
    g.edge(START, "plan").edge("plan", "ask").edge("ask", "ship").edge("ship", END)
    return g.compile()


def runtime() -> GraphRuntime:
    return GraphRuntime(store=InMemoryCheckpointStore(), clock=VirtualClock(), seed=5)


async def test_update_state_merges_through_the_reducer_into_a_new_checkpoint() -> None:
    rt = runtime()
    done = await rt.ainvoke(approval([]), thread_id="t-1",
                            on_interrupt=lambda i: "yes")
    assert done.data["log"] == ["plan", "ask", "ship:yes"]
    before = await rt.store.latest(done.run_id)
    assert before is not None
    cid = await rt.aupdate_state("t-1", {"log": ["note"], "n": 7})  # by thread id
    cp = await rt.store.get(cid)
    assert cp is not None
    assert cp.parent_id == before.id
    assert cp.status == "completed"
    assert cp.state["log"] == ["plan", "ask", "ship:yes", "note"]  # appended, not replaced
    assert cp.state["n"] == 7
    assert (await rt.store.latest(done.run_id)) == cp
    # the next run on the thread starts from the updated state
    again = await rt.ainvoke(approval([]), {"n": 8}, thread_id="t-1",
                             on_interrupt=lambda i: "again")
    assert again.data["log"][:4] == ["plan", "ask", "ship:yes", "note"]


async def test_an_update_of_a_paused_run_keeps_it_paused_at_the_same_interrupt() -> None:
    calls: list[str] = []
    rt = runtime()
    paused = await rt.ainvoke(approval(calls))
    (key,) = paused.interrupts
    await rt.aupdate_state(paused.run_id, {"log": ["edited"]})
    cp = await rt.store.latest(paused.run_id)
    assert cp is not None
    assert (cp.status, [i.key for i in cp.interrupts]) == ("interrupted", [key])
    done = await rt.aresume(paused.run_id, Resume(answers={key: "ok"}))
    assert done.data["log"] == ["plan", "edited", "ask", "ship:ok"]


async def test_update_state_as_node_continues_the_run_as_if_that_node_had_written_it() -> None:
    """The human's answer written from outside, as the node ``ask``: the run goes on to
    ``ship`` and ``ask`` is not asked (nor run) again."""
    calls: list[str] = []
    rt = runtime()
    paused = await rt.ainvoke(approval(calls))
    assert calls == ["plan", "ask"]
    cid = await rt.aupdate_state(paused.run_id, {"answer": "manual", "log": ["ask"]},
                                 as_node="ask")
    cp = await rt.store.get(cid)
    assert cp is not None
    assert (cp.status, [t.node for t in cp.tasks], cp.interrupts) == ("running", ["ship"], [])
    assert cp.visited[-1] == "ask"
    done = await rt.aresume(paused.run_id)
    assert done.status == "completed"
    assert calls == ["plan", "ask", "ship"]
    assert done.data["log"] == ["plan", "ask", "ship:manual"]


@pytest.mark.parametrize(
    ("values", "as_node", "error", "match"),
    [
        ({"nope": 1}, None, UnknownKey, "'<update>' wrote key 'nope'"),
        ({"n": 1}, "ask", UndeclaredWrite, "node 'ask' wrote key 'n'"),
        ({"n": "not a number"}, None, UpdateRejected, "key 'n' by node '<update>'"),
        ({"n": 1}, "ghost", InvalidArgument, "as_node='ghost'"),
        (["n"], None, InvalidArgument, "pass a dict"),
    ],
    ids=["unknown-key", "undeclared-write", "invalid-value", "unknown-node", "not-a-dict"],
)
async def test_a_bad_update_is_refused_and_writes_nothing(
    values: Any, as_node: str | None, error: type[Exception], match: str
) -> None:
    rt = runtime()
    paused = await rt.ainvoke(approval([]))
    before = await rt.store.list()
    with pytest.raises(error, match=match):
        await rt.aupdate_state(paused.run_id, values, as_node=as_node)
    assert await rt.store.list() == before


async def test_resume_with_an_update_merges_it_before_the_run_goes_on() -> None:
    rt = runtime()
    paused = await rt.ainvoke(approval([]))
    done = await rt.aresume(paused.run_id, Resume("ok", update={"log": ["extra"], "n": 3}))
    assert done.data["log"] == ["plan", "extra", "ask", "ship:ok"]
    assert done.data["n"] == 3


async def test_resume_with_only_an_update_continues_a_breakpoint() -> None:
    calls: list[str] = []
    rt = runtime()
    paused = await rt.ainvoke(approval(calls), interrupt_before=["ask"])
    assert paused.breakpoint is not None
    done = await rt.aresume(paused.run_id, Resume(update={"log": ["by-hand"]}),
                            on_interrupt=lambda i: "hook")
    assert done.data["log"] == ["plan", "by-hand", "ask", "ship:hook"]


def test_update_state_sync_twin() -> None:
    rt = runtime()
    paused = rt.invoke(approval([]))
    cid = rt.update_state(paused.run_id, {"n": 1})
    assert cid.startswith("cp-")


async def test_update_state_as_node_then_resume_in_another_process_over_sqlite(
    tmp_path: Any,
) -> None:
    from pytest_graphflow import SQLiteCheckpointStore

    calls: list[str] = []
    path = tmp_path / "runs.db"
    graph = approval(calls)
    first = GraphRuntime(store=SQLiteCheckpointStore(path), clock=VirtualClock(), seed=5)
    paused = await first.ainvoke(graph)
    await first.aupdate_state(paused.run_id, {"answer": "ops", "log": ["ask"]}, as_node="ask")
    fresh = GraphRuntime(store=SQLiteCheckpointStore(path), clock=VirtualClock(), seed=5)
    done = await fresh.aresume(paused.run_id, graph=graph)
    assert done.data["log"] == ["plan", "ask", "ship:ops"]
    assert calls == ["plan", "ask", "ship"]
