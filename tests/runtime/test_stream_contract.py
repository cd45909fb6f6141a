"""Seed 000 ``GraphRuntime.invoke``/``stream``: results, causal order, parallel batches,
checkpoint policy, suspension; SPEC §3 invariants C1–C4 and C10."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from pytest_graphflow import DEFAULT_START, END, START, Graph, NodeEnd

from .conftest import (
    SEEDS,
    S,
    Script,
    brief,
    chain_graph,
    check_leg,
    collect,
    fan_graph,
    of,
    run,
    runtime,
    types,
)

pytestmark = pytest.mark.anyio


async def test_invoke_runs_to_completion_and_returns_the_final_state() -> None:
    """Seed 000 invoke: "Execute the graph to completion and return the final artifacts
    payload." """
    script = Script()
    result = await runtime().ainvoke(fan_graph(script), {"n": 5})
    assert result.status == "completed"
    assert result.data["log"] == ["plan", "a", "b", "c", "join"]
    assert result.state.log == ["plan", "a", "b", "c", "join"]
    assert result.data["n"] == 5
    assert script.called()[0] == "plan"
    assert script.called()[-1] == "join"
    assert sorted(script.called()[1:4]) == ["a", "b", "c"]


async def test_invoke_is_stream_without_the_intermediate_events() -> None:
    """Seed 000 invoke: "This is a convenience wrapper around stream() that discards
    intermediate events and awaits the terminal run_end event." """
    invoked = await runtime(seed=4).ainvoke(fan_graph(Script()), {"n": 1})
    events, streamed = await run(runtime(seed=4), fan_graph(Script()), {"n": 1})
    end = events[-1]
    assert end.type == "run_end"
    assert invoked.status == end.status == streamed.status == "completed"
    assert invoked.data == end.state == streamed.data
    assert invoked.run_id == end.run_id == streamed.run_id
    assert invoked.checkpoint_id == streamed.checkpoint_id


async def test_stream_yields_an_event_at_each_significant_step() -> None:
    """Seed 000 stream: "Execute the graph while yielding GraphEvent values at each
    significant step." """
    events, result = await run(runtime(), fan_graph(Script()))
    for node in ("plan", "a", "b", "c", "join"):
        assert len(of(events, "node_start", node)) == 1
        assert len(of(events, "node_end", node)) == 1
    # every superstep (and the start) saved a checkpoint under the default policy
    assert len(of(events, "checkpoint_saved")) == 1 + 3
    assert [e.target for e in of(events, "edge_transition", "plan")] == ["a", "b", "c"]
    assert result.status == "completed"


@pytest.mark.parametrize("seed", SEEDS[:3])
async def test_events_are_in_strict_causal_order(seed: int) -> None:
    """Seed 000 stream: "Events are emitted in strict causal order: run_start → (node_start →
    node_end → edge_transition?)+ → run_end" (C1, C2, C3, C10)."""
    events, _ = await run(runtime(seed=seed), chain_graph(Script()))
    check_leg(events)
    assert [b for b in brief(events) if b != "checkpoint_saved"] == [
        "run_start",
        "node_start:one", "node_end:one", "edge:one>two",
        "node_start:two", "node_end:two", "edge:two>three",
        "node_start:three", "node_end:three", "edge:three>__end__",
        "run_end",
    ]
    fan_events, _ = await run(runtime(seed=seed), fan_graph(Script()))
    check_leg(fan_events)


@pytest.mark.parametrize("seed", SEEDS)
async def test_parallel_batch_is_yielded_after_every_node_ran_in_declared_order(seed: int) -> None:
    """Seed 000 stream: "The events of a parallel batch are yielded once every node of it has
    run, in the order the nodes are declared." (C4) — declared order is neither name order nor
    the order the seed's schedule finishes them in."""
    script = Script(sleeps={"zeta": 3, "alpha": 2, "mid": 1})
    graph = fan_graph(script, ("zeta", "alpha", "mid"))
    finished_when_batch_seen: list[list[str]] = []

    def on_event(e: object) -> None:
        if getattr(e, "step", None) == 1 and not finished_when_batch_seen:
            finished_when_batch_seen.append(list(script.finished))

    events = await collect(runtime(seed=seed).stream(graph), on_event)
    assert sorted(finished_when_batch_seen[0]) == ["alpha", "mid", "plan", "zeta"]
    assert script.finished.index("mid") < script.finished.index("zeta")  # schedule order differs
    step1 = [b for e, b in zip(events, brief(events), strict=True)
             if e.step == 1 and b != "checkpoint_saved"]
    assert step1 == [
        "node_start:zeta", "node_end:zeta", "edge:zeta>join",
        "node_start:alpha", "node_end:alpha", "edge:alpha>join",
        "node_start:mid", "node_end:mid", "edge:mid>join",
    ]
    check_leg(events)


@pytest.mark.parametrize("seed", SEEDS[:4])
@pytest.mark.parametrize("halt", ["interrupt", "fail"])
async def test_batch_with_a_halting_node_yields_completed_nodes_first(seed: int, halt: str) -> None:
    """Seed 000 stream: "When a node of the batch interrupts or fails, the nodes of the batch
    that completed come first and the halting node last." (C4) — the halting node is declared
    first and finishes first, yet its events come last."""
    script = Script(sleeps={"b": 2, "c": 1})
    if halt == "interrupt":
        script.interrupts.add("a")
    else:
        script.fails["a"] = RuntimeError("a broke")
    events, result = await run(runtime(seed=seed), fan_graph(script))
    check_leg(events)
    # (whether a halted batch reports its completed nodes' join edges is not asserted here)
    step1 = [b for e, b in zip(events, brief(events), strict=True)
             if e.step == 1 and e.type != "edge_transition"]
    halting = "interrupt:a" if halt == "interrupt" else "error:a"
    assert step1 == [
        "node_start:b", "node_end:b",
        "node_start:c", "node_end:c",
        "node_start:a", halting,
        "checkpoint_saved", "run_end",
    ]
    assert result.status == ("interrupted" if halt == "interrupt" else "failed")


async def test_checkpoints_follow_the_graph_policy_and_per_node_settings() -> None:
    """Seed 000 stream: "Checkpoints are saved according to both the graph-wide
    checkpointPolicy and per-node checkpoint settings." (SPEC §1: ``on_halt``/``never`` save
    only what a resume needs and what ``checkpoint=True`` asks for.)"""
    every, _ = await run(runtime(), chain_graph(Script()))
    assert [e.step for e in of(every, "checkpoint_saved")] == [0, 0, 1, 2]

    for policy in ("on_halt", "never"):
        store_events, result = await run(runtime(), chain_graph(Script(), policy=policy))
        assert of(store_events, "checkpoint_saved") == []
        assert result.status == "completed"

        halted = Script(interrupts={"two"})
        events, result = await run(runtime(), chain_graph(halted, policy=policy))
        assert result.status == "interrupted"
        assert len(of(events, "checkpoint_saved")) == 1

        script = Script()
        g = Graph(f"pernode-{policy}", S)
        g.node("one", script.worker("one"))
        g.node("two", script.worker("two"), checkpoint=True)
        g.node("three", script.worker("three"))
        g.edge(START, "one").edge("one", "two").edge("two", "three").edge("three", END)
        rt = runtime()
        events, result = await run(rt, g.compile(checkpoint_policy=policy))  # type: ignore[arg-type]
        saved = of(events, "checkpoint_saved")
        stored = await rt.store.list(result.run_id)
        assert [cp.id for cp in stored] == [e.checkpoint_id for e in saved]
        # the one "two" asked for; at most a final "completed" one besides (so the stored run
        # does not look mid-execution), never one for "one"'s step
        assert stored[0].step == 1
        assert stored[0].node_id == "two"
        assert all(cp.status == "completed" for cp in stored[1:])
        assert len(stored) <= 2


async def test_interrupt_suspends_at_once_followed_by_a_terminal_run_end() -> None:
    """Seed 000 stream: "An interrupt event causes immediate suspension followed by a terminal
    run_end." """
    script = Script(interrupts={"two"})
    events, result = await run(runtime(), chain_graph(script))
    at = types(events).index("interrupt")
    assert types(events)[at:] == ["interrupt", "checkpoint_saved", "run_end"]
    assert events[-1].status == "interrupted"
    assert "three" not in script.called()
    assert result.status == "interrupted"

    script = Script(interrupts={"b"})
    events, result = await run(runtime(), fan_graph(script))
    assert "join" not in script.called()
    assert types(events)[-3:] == ["interrupt", "checkpoint_saved", "run_end"]


async def test_seq_from_zero_time_never_decreases_and_node_end_carries_its_timing() -> None:
    """C10: "``seq`` strictly increases; ``time`` never decreases." SPEC §3: "``seq`` numbers
    a run's events from 0"; "``node_end`` also carries the task's own ``started_at`` and
    ``finished_at``"."""
    script = Script(sleeps={"a": 5, "b": 2, "c": 7, "join": 1})
    events, _ = await run(runtime(seed=3), fan_graph(script))
    assert [e.seq for e in events] == list(range(len(events)))
    assert [e.time for e in events] == sorted(e.time for e in events)
    ends = {e.node: e for e in events if isinstance(e, NodeEnd)}
    for node, secs in {"a": 5, "b": 2, "c": 7, "join": 1, "plan": 0}.items():
        assert ends[node].finished_at - ends[node].started_at == timedelta(seconds=secs)
    assert events[-1].time - events[0].time == timedelta(seconds=8)


@pytest.mark.parametrize("seed", [0, 5])
async def test_same_seed_gives_the_same_stream(seed: int) -> None:
    """SPEC §7: "Same graph + input + seed ⇒ identical event stream, ids and times included"."""
    first, _ = await run(runtime(seed=seed), fan_graph(Script(sleeps={"a": 1, "c": 1})))
    second, _ = await run(runtime(seed=seed), fan_graph(Script(sleeps={"a": 1, "c": 1})))
    assert [e.model_dump(mode="json") for e in first] == [e.model_dump(mode="json")
                                                          for e in second]


async def test_code_outside_nodes_keeps_real_time_while_a_run_is_open() -> None:
    """SPEC §7: "datetime.now() and time.time() in node code read virtual time (freezegun),
    and code outside nodes keeps real time." — the consumer of a stream reads the clock
    between events."""
    in_node: list[datetime] = []

    def node(state: S) -> None:
        in_node.append(datetime.now(UTC))

    g = Graph("clock", S)
    g.node("a", node).node("b", node)
    g.edge(START, "a").edge("a", "b").edge("b", END)
    outside: list[tuple[datetime, float]] = []
    async with runtime().stream(g.compile()) as events:
        async for _ in events:
            outside.append((datetime.now(UTC), time.time()))
    assert in_node == [DEFAULT_START, DEFAULT_START]
    for now, t in outside:
        assert abs(now.timestamp() - t) < 60  # both real: the same instant, not 2025-01-01
