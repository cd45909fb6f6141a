"""Parallel sync nodes block at the same time in virtual time (issue 24.14).

LangGraph's async runner hands sync node functions to a thread pool, so two branches that
each block for 3 s take 3 s together. Under the harness they used to take turns on one
thread (6 virtual seconds), and an SLA check a LangGraph user wrote flipped.
"""

from __future__ import annotations

import json
import operator
import os
import threading
import time
from datetime import timedelta
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from pytest_graphflow.langgraph import LangGraphHarness, check_invariants

SLA = 4.0  # seconds a user's answer may take


class Desk(TypedDict, total=False):
    query: str
    hits: Annotated[list[str], operator.add]
    answered_after: float


def _search(name: str, seconds: float) -> Any:
    def search(state: dict[str, Any]) -> dict[str, Any]:
        time.sleep(seconds)  # a blocking client call: virtual under the harness
        return {"hits": [f"{state.get('source', name)}@{time.monotonic():g}"]}

    return search


def _respond(state: Desk) -> dict[str, Any]:
    return {"answered_after": time.monotonic()}


def _with_sends() -> StateGraph:
    g = StateGraph(Desk)
    g.add_node("search", _search("search", 3.0))
    g.add_node("respond", _respond)
    g.add_conditional_edges(
        START, lambda s: [Send("search", {"source": src}) for src in ("docs", "tickets")],
        ["search"])
    g.add_edge("search", "respond")
    g.add_edge("respond", END)
    return g


def _static(docs: Any = None) -> StateGraph:
    g = StateGraph(Desk)
    g.add_node("docs", docs or _search("docs", 3.0))
    g.add_node("tickets", _search("tickets", 3.0))
    g.add_node("respond", _respond)
    g.add_edge(START, "docs")
    g.add_edge(START, "tickets")
    g.add_edge(["docs", "tickets"], "respond")
    g.add_edge("respond", END)
    return g


@pytest.mark.parametrize("build", [_with_sends, _static], ids=["send", "static"])
def test_two_branches_blocking_3s_each_answer_within_the_sla(build: Any) -> None:
    for seed in range(4):
        h = LangGraphHarness(build(), seed=seed)
        result = h.trace({"query": "refund"}).result

        assert result.status == "completed"
        # the user's SLA check: it failed when the harness ran the branches one by one (6 s)
        assert result.data["answered_after"] <= SLA, seed
        assert result.data["answered_after"] == 3.0
        assert sorted(result.data["hits"]) == ["docs@3", "tickets@3"]
        assert h.clock.elapsed == 3.0


def test_overlapping_sleeps_end_at_their_own_virtual_instants() -> None:
    def staged(state: Desk) -> dict[str, Any]:
        time.sleep(1)
        time.sleep(4)
        return {"hits": [f"docs@{time.monotonic():g}"]}

    h = LangGraphHarness(_static(docs=staged), seed=0)
    trace = h.trace({"query": "refund"})

    ends = {e.node: e.finished_at - e.started_at for e in trace.events
            if e.type == "node_end" and e.node in ("docs", "tickets")}
    assert ends == {"docs": timedelta(seconds=5), "tickets": timedelta(seconds=3)}
    assert trace.result.data["answered_after"] == 5.0
    assert check_invariants(trace.events) == []


def test_same_seed_same_bytes_and_the_seed_still_orders_the_branches() -> None:
    def run(seed: int) -> tuple[str, list[str], str]:
        h = LangGraphHarness(_with_sends(), seed=seed)
        trace = h.trace({"query": "refund"})
        sources = [json.dumps(e.patch) for e in trace.events if e.type == "node_end"
                   and e.node == "search"]
        return trace.to_json(), sources, json.dumps(trace.result.data)

    assert run(5) == run(5)
    runs = [run(seed) for seed in range(10)]
    assert len({tuple(r[1]) for r in runs}) == 2  # both completion orders at 3 s
    assert len({r[2] for r in runs}) == 1  # and one final state


def test_a_sibling_failing_stops_a_sleeping_sync_node_at_its_sleep() -> None:
    ran_on: list[str] = []

    def slow(state: Desk) -> dict[str, Any]:
        time.sleep(3)
        ran_on.append("slow woke")  # never: its run failed at 1 s
        return {"hits": ["slow"]}

    def broken(state: Desk) -> dict[str, Any]:
        time.sleep(1)
        raise RuntimeError("search backend down")

    g = StateGraph(Desk)
    g.add_node("slow", slow)
    g.add_node("broken", broken)
    g.add_edge(START, "slow")
    g.add_edge(START, "broken")
    threads: list[int] = []
    for seed in range(3):
        h = LangGraphHarness(g, seed=seed)
        trace = h.trace({"query": "refund"})

        assert trace.result.status == "failed"
        assert h.clock.elapsed == 1.0
        errors = {e.node: e.error_type for e in trace.events if e.type == "error"}
        assert errors == {"broken": "RuntimeError", "slow": "CancelledError"}
        assert ran_on == []
        threads.append(threading.active_count())
    # no worker is left behind parked: the next leg reuses the same threads
    assert threads[1] == threads[2]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork of a threaded process
def test_a_forked_child_runs_parallel_sync_nodes_on_threads_of_its_own() -> None:
    LangGraphHarness(_static(), seed=0).trace({"query": "refund"})  # the pool has threads
    pid = os.fork()
    if pid == 0:  # the child: the parent's pooled threads do not exist here
        try:
            data = LangGraphHarness(_static(), seed=0).trace({"query": "refund"}).result.data
            os._exit(0 if data["answered_after"] == 3.0 else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
