"""Seed 000 ``resume``/``resumeStream``: restoring state, effect-class replay (C9), replayed
edges, failed nodes, run id vs checkpoint id (C8), and one event log across resumes (C10)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from pytest_graphflow import (
    END,
    START,
    Command,
    EdgeContext,
    Graph,
    GraphExecutionError,
    GraphRuntime,
    Resume,
    RunTimedOut,
    interrupt,
)

from .conftest import (
    SEEDS,
    Boom,
    S,
    Script,
    chain_graph,
    check_leg,
    fan_graph,
    of,
    resume,
    run,
    runtime,
)

pytestmark = pytest.mark.anyio


async def test_resume_continues_an_interrupted_run_from_its_latest_checkpoint() -> None:
    """Seed 000 resume: "Resume a previously interrupted run from its latest persisted
    checkpoint." "The runtime restores GraphState from the checkpoint and re-executes any nodes
    that had not yet completed when the run was suspended." """
    script = Script(interrupts={"two"})
    rt = runtime()
    _events, paused = await run(rt, chain_graph(script), {"n": 4})
    latest = await rt.store.latest(paused.run_id)
    assert latest is not None
    assert latest.id == paused.checkpoint_id
    leg, result = await resume(rt, paused.run_id, Resume("ok"))
    assert leg[0].type == "run_start"
    assert leg[0].resumed_from == latest.id
    assert script.called() == ["one", "two", "two", "three"]
    assert result.status == "completed"
    assert result.data == {"log": ["one", "two", "three"], "n": 4, "answer": None,
                           "answers": ["ok"]}


@pytest.mark.parametrize("seed", SEEDS[:4])
@pytest.mark.parametrize("halt", ["interrupt", "fail"])
async def test_resume_replays_write_external_human_and_reruns_pure_read(seed: int, halt: str
                                                                        ) -> None:
    """Seed 000 resume: "A node the checkpoint records as write, external, or human
    effect-class ... is replayed from its stored output to avoid duplicate side-effects; all
    other nodes are re-executed." C9: "on resume after an interrupt or a failure, completed
    nodes of the halted batch of effect class write/external/human are replayed from their
    stored output (node_end.replayed=True, the function is not called); its pure/read nodes
    re-run"."""
    workers = ("w", "x", "h", "p", "r", "q")
    effects = {"w": "write", "x": "external", "h": "human", "p": "pure", "r": "read",
               "q": "human"}
    script = Script(sleeps={"w": 1, "p": 2, "h": 3})
    if halt == "interrupt":
        script.interrupts.add("q")
    else:
        script.fails["q"] = Boom("q failed")
    rt = runtime(seed=seed)
    graph = fan_graph(script, workers, effects=effects)
    events, halted = await run(rt, graph)
    cp = await rt.store.latest(halted.run_id)
    assert cp is not None
    assert sorted(out.node for out in cp.completed.values()) == ["h", "w", "x"]

    script.fails.clear()
    leg, result = await resume(rt, halted.run_id, Resume("go") if halt == "interrupt" else None)
    check_leg(leg)
    for node in ("w", "x", "h"):
        assert script.count(node) == 1, node
        assert [e.replayed for e in of(leg, "node_end", node)] == [True], node
    for node in ("p", "r", "q"):
        assert script.count(node) == 2, node
        assert [e.replayed for e in of(leg, "node_end", node)] == [False], node
    # replayed outputs carry the recorded patch, and merge as before (declared order)
    first = {e.node: e.patch for e in of(events, "node_end")}
    assert {e.node: e.patch for e in of(leg, "node_end") if e.replayed} == {
        n: first[n] for n in ("w", "x", "h")}
    assert result.data["log"] == ["plan", "w", "x", "h", "p", "r", "q", "join"]


async def test_a_replayed_node_decides_its_edges_on_the_restored_state() -> None:
    """Seed 000 resume: "A replayed node's edges are evaluated on the restored state with the
    node's visit recorded (currentNodeId names the node and visitedNodes lists it), as a node's
    are after it runs, so the run follows the targets they pick and skips the others"."""
    calls: list[str] = []
    routes: list[tuple[int, str, tuple[str, ...]]] = []

    def pick(state: S) -> dict[str, Any]:
        calls.append("pick")
        return {"n": 7}

    def route(state: S, ctx: EdgeContext) -> str:
        routes.append((state.n, ctx.current_node, tuple(ctx.visited_nodes)))
        return "seven" if state.n == 7 else "other"

    def ask(state: S) -> dict[str, Any]:
        calls.append("ask")
        return {"answer": interrupt("go on?", id="go")}

    g = Graph("replay-edges", S)
    g.node("plan", lambda s: None)
    g.node("pick", pick, effect="write")
    g.node("ask", ask)
    g.node("left", lambda s: calls.append("left") and None)
    g.node("right", lambda s: calls.append("right") and None)
    g.edge(START, "plan").edge("plan", ["pick", "ask"]).edge("ask", END)
    g.branch("pick", route, {"seven": "left", "other": "right"})
    g.edge("left", END).edge("right", END)
    rt = runtime()
    _, paused = await run(rt, g.compile())
    assert paused.status == "interrupted"
    leg, result = await resume(rt, paused.run_id, Resume("yes"))
    assert calls == ["pick", "ask", "ask", "left"]
    assert of(leg, "node_end", "pick")[0].replayed is True
    assert routes[-1][0] == 7
    assert routes[-1][1] == "pick"
    assert "pick" in routes[-1][2]
    assert [(e.source, e.target) for e in of(leg, "edge_transition", "pick")] == [
        ("pick", "left")]
    assert result.status == "completed"
    assert result.data["answer"] == "yes"


async def test_a_replayed_node_that_picked_its_target_goes_where_its_result_says() -> None:
    """Seed 000 resume: "a replayed node that picked its target itself, as the exit of a voice
    node does, goes to the target its recorded result names." """
    calls: list[str] = []

    def pick(state: S) -> Command:
        calls.append("pick")
        # were it called again it would pick the other target
        return Command(update={"n": 1}, goto="right" if calls.count("pick") == 1 else "left")

    def ask(state: S) -> dict[str, Any]:
        calls.append("ask")
        return {"answer": interrupt("?", id="go")}

    g = Graph("replay-goto", S)
    g.node("plan", lambda s: None)
    g.node("pick", pick, effect="external", destinations=["left", "right"])
    g.node("ask", ask)
    g.node("left", lambda s: calls.append("left") and None)
    g.node("right", lambda s: calls.append("right") and None)
    g.edge(START, "plan").edge("plan", ["pick", "ask"]).edge("ask", END)
    g.edge("left", END).edge("right", END)
    rt = runtime()
    _, paused = await run(rt, g.compile())
    leg, result = await resume(rt, paused.run_id, Resume(1))
    assert calls == ["pick", "ask", "ask", "right"]
    assert of(leg, "node_end", "pick")[0].replayed is True
    assert result.status == "completed"
    assert result.data["n"] == 1


@pytest.mark.parametrize("seed", SEEDS[:3])
async def test_a_failed_node_reruns_from_the_state_it_ran_on(seed: int) -> None:
    """Seed 000 resume: "A node that failed recorded no result and wrote nothing, so it runs
    again, from the state it ran on." (C9)"""
    script = Script(fails={"f": Boom("flaky")}, sleeps={"w": 1})
    rt = runtime(seed=seed)
    graph = fan_graph(script, ("w", "f"), effects={"w": "write", "f": "write"})
    _events, failed = await run(rt, graph, {"n": 2})
    assert failed.status == "failed"
    cp = await rt.store.latest(failed.run_id)
    assert cp is not None
    assert cp.status == "failed"
    assert [out.node for out in cp.completed.values()] == ["w"]  # f recorded nothing
    assert cp.state["log"] == ["plan"]  # and wrote nothing
    script.fails.clear()
    _, result = await resume(rt, failed.run_id)
    states = script.states("f")
    assert len(states) == 2
    assert states[0] == states[1]
    assert states[1]["log"] == ["plan"]  # not w's replayed patch either
    assert result.status == "completed"
    assert result.data["log"] == ["plan", "w", "f", "join"]


@pytest.mark.parametrize("how", ["run_id", "checkpoint_id"])
async def test_resume_stream_accepts_a_run_id_or_an_exact_checkpoint_id(how: str) -> None:
    """Seed 000 resumeStream: "Accepts either the original run id or an exact checkpoint id.
    The resolved checkpoint is used to reconstruct GraphState, then execution continues
    through the same event stream contract" (C8: "resume by run id continues from the last
    checkpoint the store saved; resume by checkpoint id from exactly that one")."""
    script = Script(interrupts={"three"})
    rt = runtime()
    events, paused = await run(rt, chain_graph(script))
    saved = [e.checkpoint_id for e in of(events, "checkpoint_saved")]
    if how == "run_id":
        leg, result = await resume(rt, paused.run_id, Resume("a"))
        assert leg[0].resumed_from == saved[-1]
        assert script.called() == ["one", "two", "three", "three"]
        assert result.status == "completed"
    else:
        after_one = saved[1]  # taken after step 0 ("one")
        cp = await rt.store.get(after_one)
        assert cp is not None
        assert cp.state["log"] == ["one"]
        leg, result = await resume(rt, after_one)
        assert leg[0].resumed_from == after_one
        assert script.called() == ["one", "two", "three", "two", "three"]
        assert script.states("two")[1] == script.states("two")[0]
        assert result.status == "interrupted"
    check_leg(leg)


async def test_seq_continues_across_resumes_as_one_log() -> None:
    """SPEC §3: "``seq`` numbers a run's events from 0 and continues across resumes: a run's
    events form one log." C10: "``seq`` strictly increases; ``time`` never decreases"."""
    script = Script(interrupts={"one", "three"}, fails={"two": Boom("once")},
                    sleeps={"one": 1, "two": 2, "three": 3})
    rt = runtime()
    legs = []
    events, result = await run(rt, chain_graph(script))
    legs.append(events)
    answers = iter(["first", None, "third"])
    while result.status != "completed":
        if result.status == "failed":
            script.fails.clear()
            events, result = await resume(rt, result.run_id)
        else:
            events, result = await resume(rt, result.run_id, Resume(next(answers)))
        legs.append(events)
    assert len(legs) == 4
    log = [e for leg in legs for e in leg]
    assert [e.seq for e in log] == list(range(len(log)))
    assert [e.time for e in log] == sorted(e.time for e in log)
    assert {e.run_id for e in log} == {result.run_id}


async def test_after_a_timeout_finished_tasks_keep_their_results() -> None:
    """C9: "After a timeout or a cancellation (seed 004), every task that finished first keeps
    its result whatever its effect class, and none of them re-runs." """
    script = Script(sleeps={"a": 1, "b": 100, "c": 2})
    rt = runtime(seed=1)
    _, timed_out = await run(rt, fan_graph(script), timeout=10)
    assert timed_out.status == "failed"
    assert isinstance(timed_out.error, RunTimedOut)
    _, result = await resume(rt, timed_out.run_id, timeout=1000)
    assert result.status == "completed"
    assert (script.count("a"), script.count("b"), script.count("c")) == (1, 2, 1)
    assert result.data["log"] == ["plan", "a", "b", "c", "join"]


async def test_after_a_cancellation_finished_tasks_keep_their_results() -> None:
    """C9 (cancellation): every task that finished first keeps its result and none re-runs;
    SPEC §2: cancellation gives status ``cancelled``, resumable without re-running finished
    tasks; "A failed or cancelled run is resumed the same way, without a Resume"."""
    calls: list[str] = []
    holder: dict[str, Any] = {}

    async def quick(state: S) -> dict[str, Any]:
        calls.append("quick")
        return {"log": ["quick"]}

    async def slow(state: S) -> dict[str, Any]:
        calls.append("slow")
        if calls.count("slow") == 1:
            await anyio.sleep(5)
            holder["handle"].cancel()
            await anyio.sleep(100)
        return {"log": ["slow"]}

    g = Graph("cancel", S)
    g.node("plan", lambda s: None)
    g.node("quick", quick)
    g.node("slow", slow)
    g.edge(START, "plan").edge("plan", ["quick", "slow"]).edge(["quick", "slow"], END)
    rt = runtime()
    handle = await rt.start(g.compile())
    holder["handle"] = handle
    cancelled = await handle.result()
    assert cancelled.status == "cancelled"
    result = await rt.aresume(handle.run_id)
    assert result.status == "completed"
    assert calls == ["quick", "slow", "slow"] or calls == ["slow", "quick", "slow"]
    assert result.data["log"] == ["quick", "slow"]


async def test_a_fresh_runtime_resumes_when_given_the_graph() -> None:
    """SPEC §2: "A runtime remembers the graphs it has run by graph_id; a fresh runtime (a new
    process) is given the graph." """
    script = Script(interrupts={"two"})
    graph = chain_graph(script)
    rt = runtime()
    _, paused = await run(rt, graph)
    fresh = GraphRuntime(store=rt.store, clock=rt.clock, seed=9)
    with pytest.raises(GraphExecutionError):
        await fresh.aresume(paused.run_id, Resume("x"))
    result = await fresh.aresume(paused.run_id, Resume("x"), graph=graph)
    assert result.status == "completed"
    assert result.data["answers"] == ["x"]


def test_sync_resume_on_either_backend(anyio_backend: str) -> None:
    """Seed 000 resume through the synchronous API (``GraphRuntime(backend=...)``)."""
    script = Script(interrupts={"b"}, sleeps={"a": 2})
    rt = GraphRuntime(clock=runtime().clock, seed=3, backend=anyio_backend)
    paused = rt.invoke(fan_graph(script, effects={"a": "write"}))
    assert paused.status == "interrupted"
    result = rt.resume(paused.run_id, Resume({"ok": True}))
    assert result.status == "completed"
    assert script.count("a") == 1
    assert script.got["b"] == {"ok": True}
