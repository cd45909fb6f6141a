"""Subgraphs under the harness, against plain LangGraph on the same input.

The app is a support agent whose refund subgraph interrupts for approval (``refund_desk``):
classify, then the refund subgraph (lookup, approve, pay) and notify in parallel, then reply.
Plain LangGraph runs it with ``astream(..., subgraphs=True)`` and ``get_state(cfg,
subgraphs=True)``; the harness's event log must show the same subgraph events in the same
namespaces, and ``h.state(subgraphs=True)`` the same snapshot, ids normalised (plain
LangGraph's ids are random).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from graphs import Item, map_into_a_subgraph, refund_desk
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from pytest_graphflow.langgraph import (
    LangGraphHarness,
    check_determinism,
    check_invariants,
    drive,
)

INPUT = {"amount": 40}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")
_REFUND = re.compile(r"R-[0-9a-f]{8}")


def _norm(text: str) -> str:
    return _REFUND.sub("R-<id>", _UUID.sub("<id>", text))


def _content(snapshot: Any) -> Any:
    """What a ``StateSnapshot`` says, without ids, times and configs (plain LangGraph's are
    random and real): values, next, tasks (name, path, error, interrupts, nested snapshot)."""
    if snapshot is None or isinstance(snapshot, dict):  # no child, or only its config
        return None if snapshot is None else "config"
    return {
        "values": _norm(repr(sorted(snapshot.values.items()))),
        "next": snapshot.next,
        "tasks": [(t.name, t.path, t.error, _norm(repr([i.value for i in t.interrupts])),
                   _content(t.state)) for t in sorted(snapshot.tasks, key=lambda t: t.name)],
        "interrupts": _norm(repr([i.value for i in snapshot.interrupts])),
        "step": snapshot.metadata and snapshot.metadata.get("step"),
    }


def _plain(answer: str | None = None) -> tuple[list[tuple[Any, ...]], Any, Any]:
    """Plain LangGraph: its own stream's task events (namespace as subgraph node names,
    kind, node) and ``get_state`` with and without subgraphs, paused or (``answer``) done."""
    app = refund_desk(0.0, 0.0).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "plain"}}
    seen: list[tuple[Any, ...]] = []

    async def run(input: Any) -> None:
        async for ns, _, chunk in app.astream(input, config, stream_mode=["debug"],
                                              subgraphs=True):
            if chunk["type"] in ("task", "task_result"):
                seen.append(_task_event(ns, chunk["type"], chunk["payload"]))

    async def main() -> tuple[Any, Any]:
        await run(INPUT)
        if answer is not None:
            seen.clear()
            await run(Command(resume=answer))
        return (await app.aget_state(config, subgraphs=True), await app.aget_state(config))

    nested, flat = asyncio.run(main())
    return sorted(seen, key=repr), nested, flat


def _task_event(ns: tuple[str, ...], kind: str, payload: dict[str, Any]) -> tuple[Any, ...]:
    names = tuple(part.split(":", 1)[0] for part in ns)
    interrupts = tuple(_norm(repr(i["value"])) for i in payload.get("interrupts") or ())
    return (names, kind, payload["name"], interrupts)


def _harness_task_events(events: Any) -> list[tuple[Any, ...]]:
    """The harness log as the same tuples: our events at the top, ``subgraph`` custom events
    (``{"path", "namespace", "event"}``) in their namespace."""
    out = []
    for e in events:
        if e.type == "custom" and e.channel == "subgraph":
            ns, wire = tuple(e.value["namespace"]), e.value["event"]
        elif e.type in ("node_start", "node_end", "interrupt", "error"):
            ns, wire = (), e.model_dump(mode="json")
        else:
            continue
        if wire["type"] == "node_start":
            out.append(_task_event(ns, "task", {"name": wire["node"]}))
        elif wire["type"] in ("node_end", "interrupt", "error"):
            asked = [{"value": i["payload"]} for i in wire.get("interrupts", ())]
            out.append(_task_event(ns, "task_result", {"name": wire["node"],
                                                        "interrupts": asked}))
    return sorted(out, key=repr)


def test_a_subgraph_interrupt_is_logged_in_the_child_namespace_and_at_the_parent() -> None:
    h = LangGraphHarness(refund_desk(), seed=3)
    paused = h.trace(INPUT)
    assert paused.result.status == "interrupted"
    expected, nested, _ = _plain()

    assert _harness_task_events(paused.events) == expected
    refund = next(t for t in nested.tasks if t.name == "refund")
    ours = next(t for t in h.state(subgraphs=True).tasks if t.name == "refund")
    child = [e for e in paused.events if e.type == "custom" and e.channel == "subgraph"]
    asked = [e for e in child if e.value["event"]["type"] == "interrupt"]
    (top,) = [e for e in paused.events if e.type == "interrupt"]
    (inside,) = asked
    assert inside.value["path"] == ["refund", "approve"]
    assert inside.value["namespace"] == [f"refund:{ours.id}"]
    assert (inside.node, inside.task_id, inside.step) == ("refund", ours.id, top.step)
    assert top.node == "refund"
    assert inside.value["event"]["interrupts"][0]["id"] == top.interrupts[0].id
    assert [i.payload for i in top.interrupts] == [{"refund_id": f"R-{_refund_id(h)}",
                                                    "amount": 40}]
    assert _norm(repr(refund.interrupts[0].value)) == _norm(repr(top.interrupts[0].payload))
    # the child's own checkpoints are in its namespace, never the parent's
    saved = [e.checkpoint_id for e in paused.events if e.type == "checkpoint_saved"]
    in_child = [e.value["event"]["checkpoint_id"] for e in child
                if e.value["event"]["type"] == "checkpoint_saved"]
    assert len(in_child) == 3  # input, START, lookup: the child paused at approve
    roots = [c.config["configurable"]["checkpoint_id"] for c in
             h.saver.inner.list({"configurable": {"thread_id": h.thread_id,
                                                  "checkpoint_ns": ""}})]
    assert sorted(saved) == sorted(roots)
    assert paused.result.checkpoint_id == h.state(subgraphs=False).config[
        "configurable"]["checkpoint_id"]
    assert check_invariants(paused.events) == []


def _refund_id(h: LangGraphHarness) -> str:
    ours = h.state(subgraphs=True)
    (refund,) = [t for t in ours.tasks if t.name == "refund"]
    return str(refund.state.values["refund_id"])[2:]


def test_state_with_subgraphs_equals_plain_langgraphs_get_state_paused_inside() -> None:
    h = LangGraphHarness(refund_desk(), seed=3)
    h.trace(INPUT)
    _, nested, flat = _plain()

    ours = h.state(subgraphs=True)
    assert _content(ours) == _content(nested)
    assert _content(h.state(subgraphs=False)) == _content(flat)
    (refund,) = [t for t in ours.tasks if t.name == "refund"]
    assert refund.state.next == ("approve",)
    assert refund.state.tasks[0].interrupts[0].value["amount"] == 40
    assert h.state() == dict(ours.values)  # without arguments: the values, as before


def test_resuming_from_the_parent_finishes_the_subgraph_as_plain_langgraph_does() -> None:
    h = LangGraphHarness(refund_desk(), seed=3)
    h.trace(INPUT)
    (pending,) = h.pending_interrupts()
    assert pending.node == "refund"
    done = h.resume("approved")
    expected, nested, _ = _plain("approved")

    assert done.result.status == "completed"
    assert _content(h.state(subgraphs=True)) == _content(nested)
    assert _norm(repr(sorted(done.result.data.items()))) == _norm(repr(sorted(
        nested.values.items())))
    # the resumed leg shows the child going on: approve and pay, in its namespace
    assert [t for t in _harness_task_events(done.events) if t[0] == ("refund",)] == [
        t for t in expected if t[0] == ("refund",)]


def test_a_fresh_harness_answers_a_subgraph_interrupt_from_the_saver() -> None:
    saver = InMemorySaver()
    first = LangGraphHarness(refund_desk(), seed=3, saver=saver)
    first.trace(INPUT)
    refund_id = _refund_id(first)
    fresh = LangGraphHarness(refund_desk(), seed=3, saver=saver)
    assert _content(fresh.state(subgraphs=True)) == _content(first.state(subgraphs=True))
    (pending,) = fresh.pending_interrupts()
    assert (pending.node, pending.payload) == ("refund", {"refund_id": f"R-{refund_id}",
                                                          "amount": 40})
    done = fresh.resume("approved")
    assert done.result.status == "completed"
    assert done.result.data["log"][-1] == f"reply:R-{refund_id}:approved"
    assert [e.value["path"] for e in done.events if e.type == "custom"
            and e.value["event"]["type"] == "node_end"] == [["refund", "approve"],
                                                             ["refund", "pay"]]


_SCRIPT = """
import sys
sys.path.insert(0, {here!r})
from graphs import map_into_a_subgraph, refund_desk
from pytest_graphflow.langgraph import LangGraphHarness
from langgraph.checkpoint.memory import InMemorySaver
saver = InMemorySaver()
h = LangGraphHarness(refund_desk(), seed=5, saver=saver)
h.trace({{"amount": 40}})
h.resume("approved")
sys.stdout.write("\\n".join(e.model_dump_json() for e in h.events))
sys.stdout.write("\\n--- rows\\n")
for table in (saver.storage, saver.writes, saver.blobs):
    sys.stdout.write(repr(sorted((k, sorted(v.items()) if isinstance(v, dict) else v)
                                 for k, v in table.items())) + "\\n")
sends = LangGraphHarness(map_into_a_subgraph(), seed=5)  # Send into a subgraph, uuid4 ids
sends.trace({{"n": 0}})
sys.stdout.write("--- sends\\n" + "\\n".join(e.model_dump_json() for e in sends.events))
"""


def test_same_seed_same_bytes_with_a_subgraph_also_in_fresh_processes() -> None:
    def run() -> str:
        h = LangGraphHarness(refund_desk(), seed=5)
        h.trace(INPUT)
        h.resume("approved")
        return "\n".join(e.model_dump_json() for e in h.events)

    here = run()
    assert run() == here
    assert '"channel":"subgraph"' in here

    def fresh(hash_seed: str) -> str:
        # LangGraph keeps a graph's edges in sets of strings, whose order follows
        # PYTHONHASHSEED (issue 24.15): the events and the saved rows must not
        return subprocess.run(
            [sys.executable, "-c", _SCRIPT.format(here=str(Path(__file__).resolve().parent))],
            check=True, capture_output=True, env={"PYTHONHASHSEED": hash_seed, "PATH": ""},
            timeout=120).stdout.decode()

    outputs = {seed: fresh(seed) for seed in ("0", "1", "2", "3")}
    assert len(set(outputs.values())) == 1, "the bytes follow PYTHONHASHSEED"
    events, rest = outputs["0"].split("\n--- rows\n")
    rows, sends = rest.split("--- sends\n")
    assert events == here
    assert '"channel":"subgraph"' in sends
    # classify's two edges in the order of their targets' names (24.15), and the join's
    # set of seen nodes is among the rows that agree
    assert [json.loads(line)["target"] for line in events.splitlines()
            if '"source":"classify"' in line] == ["notify", "refund"]
    assert "join:refund+notify:reply" in rows
    assert check_determinism(refund_desk(), INPUT, seed=5, answers={"refund": "ok"}) == []


@pytest.mark.anyio
async def test_subgraphs_under_asyncio_match_the_sync_harness() -> None:
    def reference() -> tuple[list[str], Any, Any]:  # off the test's loop, as sync code
        sync = LangGraphHarness(refund_desk(), seed=3)
        sync.trace(INPUT)
        return [e.model_dump_json() for e in sync.events], _plain()[1], _plain("approved")[1]

    events, paused_state, done_state = await anyio.to_thread.run_sync(reference)
    h = LangGraphHarness(refund_desk(), seed=3)
    paused = await h.atrace(INPUT)
    assert [e.model_dump_json() for e in paused.events] == events
    assert _content(await h.astate(subgraphs=True)) == _content(paused_state)
    done = await h.aresume("approved")
    assert done.result.status == "completed"
    assert _content(await h.astate(subgraphs=True)) == _content(done_state)


def _nested() -> StateGraph:
    """outer -> middle (a subgraph) -> inner (a subgraph of it), which interrupts."""
    inner = StateGraph(Item)
    inner.add_node("ask", lambda s: {"out": [f"ask:{interrupt(s['n'])}"]})
    inner.add_edge(START, "ask")
    inner.add_edge("ask", END)
    middle = StateGraph(Item)
    middle.add_node("prep", lambda s: {"out": ["prep"]})
    middle.add_node("inner", inner.compile())
    middle.add_edge(START, "prep")
    middle.add_edge("prep", "inner")
    middle.add_edge("inner", END)
    outer = StateGraph(Item)
    outer.add_node("middle", middle.compile())
    outer.add_edge(START, "middle")
    outer.add_edge("middle", END)
    return outer


def _invoked_in_a_node() -> StateGraph:
    """A node calls a compiled subgraph itself (``await child.ainvoke(...)``)."""
    child = StateGraph(Item)
    child.add_node("double", lambda s: {"out": [str(2 * s["n"])]})
    child.add_edge(START, "double")
    child.add_edge("double", END)
    compiled = child.compile()

    async def call(state: Item) -> dict[str, Any]:
        result = await compiled.ainvoke({"n": state["n"], "out": []})
        return {"out": result["out"]}

    g = StateGraph(Item)
    g.add_node("call", call)
    g.add_edge(START, "call")
    g.add_edge("call", END)
    return g


SHAPES = {"nested": _nested, "map-into-a-subgraph": map_into_a_subgraph,
          "invoked-in-a-node": _invoked_in_a_node}


def _plain_run(build: Any) -> tuple[list[tuple[Any, ...]], Any]:
    app = build().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "plain"}}
    seen: list[tuple[Any, ...]] = []

    async def main() -> Any:
        input: Any = {"n": 4, "out": []}
        for _ in range(3):
            async for ns, _, chunk in app.astream(input, config, stream_mode=["debug"],
                                                  subgraphs=True):
                if chunk["type"] in ("task", "task_result"):
                    seen.append(_task_event(ns, chunk["type"], chunk["payload"]))
            state = await app.aget_state(config, subgraphs=True)
            if not state.next:
                break
            input = Command(resume="yes")
        return state

    state = asyncio.run(main())
    return sorted(seen, key=repr), state


@pytest.mark.parametrize("shape", SHAPES)
def test_subgraph_shapes_log_what_plain_langgraph_streams(shape: str) -> None:
    build = SHAPES[shape]
    expected, state = _plain_run(build)
    h = LangGraphHarness(build(), seed=2)
    drive(h, {"n": 4, "out": []}, lambda i: "yes")

    assert _harness_task_events(h.events) == expected
    assert _content(h.state(subgraphs=True)) == _content(state)
    names = {tuple(p.split(":")[0] for p in e.value["namespace"])
             for e in h.events if e.type == "custom" and e.channel == "subgraph"}
    assert names == {t[0] for t in expected if t[0]}
