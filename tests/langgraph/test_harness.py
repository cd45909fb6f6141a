"""The harness: LangGraph runs mapped to our events, interrupts, resume, failures, bad input."""

from __future__ import annotations

import asyncio
import operator
from datetime import timedelta
from typing import Annotated, Any, TypedDict

import pytest
from graphs import approval, fan_out, two_reviews
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from pytest_graphflow import RealClock, VirtualClock, assert_events
from pytest_graphflow.errors import InvalidArgument, NotSuspended, ResumeError
from pytest_graphflow.langgraph import LangGraphHarness, check_invariants


def test_a_parallel_run_maps_to_our_events() -> None:
    h = LangGraphHarness(fan_out({"a": 3.0, "b": 1.0, "c": 2.0}), seed=0)
    trace = h.trace({"log": []})

    assert trace.result.status == "completed"
    assert trace.result.data == {"log": ["a", "b", "c", "join"]}  # reducer: task-path order
    assert_events(trace.events, [
        "run_start",
        "...",
        # the three start together; they finish in virtual-time order
        {"node_start:a", "node_start:b", "node_start:c"},
        "...",
        "node_end:b", "...", "node_end:c", "...", "node_end:a",
        "...",
        {"edge_transition:a->join", "edge_transition:b->join", "edge_transition:c->join"},
        "...",
        "node_start:join",
        "...",  # with LangGraph's default "async" durability, checkpoints land meanwhile
        "node_end:join",
        "...",
        "run_end:completed",
    ])
    assert trace.events[-1].state == {"log": ["a", "b", "c", "join"]}
    assert check_invariants(trace.events) == []


def test_every_checkpoint_the_saver_stored_is_reported_once() -> None:
    h = LangGraphHarness(fan_out(), durability="sync")
    trace = h.trace({"log": []})
    saved = [e.checkpoint_id for e in trace.events if e.type == "checkpoint_saved"]
    stored = [c.config["configurable"]["checkpoint_id"] for c in h.saver.inner.list(None)]

    assert sorted(saved) == sorted(stored)
    assert len(saved) == 4  # input, START, the parallel step, join
    assert trace.result.checkpoint_id == saved[-1]


def test_interrupt_then_resume_continues_the_thread() -> None:
    h = LangGraphHarness(approval())
    first = h.trace({"log": []})

    assert first.result.status == "interrupted"
    (pending,) = first.result.interrupts.values()
    assert (pending.node, pending.payload) == ("review", {"draft": "draft"})
    assert pending.key == f"{pending.task_id}:{pending.id}"
    assert_events(first.events, ["...", "node_start:review", "...", "interrupt:review",
                                 "run_end:interrupted"])

    second = h.resume("ship it")
    assert second.result.status == "completed"
    assert second.result.data == {"log": ["draft"], "answer": "ship it"}
    # one log: seq continues, the resumed leg names the checkpoint it continued from
    assert second.events[0].seq == first.events[-1].seq + 1
    assert second.events[0].resumed_from == first.result.checkpoint_id
    assert check_invariants(h.events) == []


@pytest.mark.parametrize("key", ["node", "key", "id"])
def test_several_pending_interrupts_take_answers_by_node_key_or_id(key: str) -> None:
    h = LangGraphHarness(two_reviews())
    pending = list(h.trace({"log": []}).result.interrupts.values())
    answers = {getattr(i, key): i.node.upper() for i in pending}

    done = h.resume(answers=answers)
    assert done.result.data == {"log": ["left:LEFT", "right:RIGHT"]}


def _paused(graph: StateGraph) -> LangGraphHarness:
    h = LangGraphHarness(graph)
    h.trace({"log": []})
    return h


@pytest.mark.parametrize(
    ("make", "call", "error"),
    [
        pytest.param(lambda: LangGraphHarness(fan_out()),
                     lambda h: h.resume("yes"), NotSuspended, id="answer-with-nothing-pending"),
        pytest.param(lambda: _paused(two_reviews()), lambda h: h.resume("yes"), ResumeError,
                     id="one-answer-for-two-interrupts"),
        pytest.param(lambda: _paused(two_reviews()), lambda h: h.resume(answers={"nope": 1}),
                     ResumeError, id="answer-for-an-unknown-key"),
    ],
)
def test_a_rejected_resume_changes_nothing(make: Any, call: Any, error: type) -> None:
    h = make()
    before = (list(h.events), h.saver.calls, h.last)
    with pytest.raises(error):
        call(h)
    assert (list(h.events), h.saver.calls, h.last) == before


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"graph": object()}, "compiled LangGraph graph", id="not-a-graph"),
        pytest.param({"seed": "1"}, "seed must be an int", id="seed-not-int"),
        pytest.param({"seed": True}, "seed must be an int", id="seed-bool"),
        pytest.param({"clock": RealClock()}, "needs a VirtualClock", id="real-clock"),
        pytest.param({"durability": "later"}, "durability='later'", id="bad-durability"),
    ],
)
def test_bad_harness_arguments_are_named(kwargs: dict[str, Any], message: str) -> None:
    graph = kwargs.pop("graph", fan_out())
    with pytest.raises(InvalidArgument, match=message):
        LangGraphHarness(graph, **kwargs)


class Counter(TypedDict, total=False):
    n: Annotated[int, operator.add]


def _failing_once() -> StateGraph:
    calls = {"n": 0}

    def flaky(state: Counter) -> dict[str, int]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ValueError("first call fails")
        return {"n": 10}

    g = StateGraph(Counter)
    g.add_node("one", lambda s: {"n": 1})
    g.add_node("flaky", flaky)
    g.add_edge(START, "one")
    g.add_edge("one", "flaky")
    g.add_edge("flaky", END)
    return g


def test_a_node_error_fails_the_leg_and_resume_retries_from_the_last_checkpoint() -> None:
    h = LangGraphHarness(_failing_once())
    failed = h.trace({"n": 0})

    assert failed.result.status == "failed"
    assert isinstance(failed.result.error, ValueError)  # what LangGraph raised, unwrapped
    with pytest.raises(ValueError, match="first call fails"):
        failed.result.raise_for_status()
    assert_events(failed.events, ["...", "node_start:flaky", "...", "error:flaky",
                                  {"type": "run_end", "status": "failed",
                                   "error_type": "ValueError"}])
    done = h.resume()
    assert done.result.status == "completed"
    assert done.result.data == {"n": 11}  # "one" did not run again


def test_a_module_level_checkpointer_never_carries_a_thread_between_harnesses() -> None:
    shared = InMemorySaver()
    app = approval().compile(checkpointer=shared)  # as an app module does, imported once
    first = LangGraphHarness(app, seed=3).trace({"log": []})
    second = LangGraphHarness(app, seed=3).trace({"log": []})  # the same seed: the same thread
    # Each harness starts its thread afresh (a shared saver would resume the first's, so a
    # snapshot would depend on test order) and the compiled-in saver is left untouched.
    assert first.result.status == second.result.status == "interrupted"
    assert [e.model_dump_json() for e in second.events] == [
        e.model_dump_json() for e in first.events]
    assert list(shared.list(None)) == []

    explicit = InMemorySaver()
    h = LangGraphHarness(app, saver=explicit)  # passed on purpose: used
    h.trace({"log": []})
    assert h.saver.inner is explicit
    assert list(explicit.list(None))
    assert isinstance(LangGraphHarness(fan_out()).saver.inner, InMemorySaver)


def test_an_untouched_graph_runs_as_plain_langgraph_outside_the_harness() -> None:
    LangGraphHarness(fan_out()).trace({"log": []})  # the hooks are installed now
    saver = InMemorySaver()
    app = approval().compile(checkpointer=saver)
    app.invoke({"log": []}, {"configurable": {"thread_id": "plain"}})
    (tup, *_) = saver.list(None)
    stamp = tup.checkpoint["ts"]
    # real time, not the harness's virtual 2025-01-01
    assert not stamp.startswith(VirtualClock().now().date().isoformat())


def test_state_reads_the_threads_values_without_logging() -> None:
    h = LangGraphHarness(approval())
    h.trace({"log": []})
    calls = len(h.saver.calls)
    assert h.state() == {"log": ["draft"]}
    assert len(h.saver.calls) == calls


@pytest.mark.anyio
async def test_atrace_and_aresume_from_async_code() -> None:
    h = LangGraphHarness(approval())
    paused = await h.atrace({"log": []})
    assert paused.result.status == "interrupted"
    done = await h.aresume("ok")
    assert done.result.data == {"log": ["draft"], "answer": "ok"}


class _Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def _fast_and_asking() -> StateGraph:
    """START -> fast and ask in one step; ask interrupts, fast finishes (its writes saved)."""
    g = StateGraph(_Log)
    g.add_node("fast", lambda s: {"log": ["fast"]})
    g.add_node("ask", lambda s: {"log": [f"ask:{interrupt('go?')}"]})
    g.add_edge(START, "fast")
    g.add_edge(START, "ask")
    g.add_edge("fast", END)
    g.add_edge("ask", END)
    return g


def _fast_and_failing_once(fast_s: float = 0.0, flaky_s: float = 1.0) -> StateGraph:
    """START -> fast (async, ``fast_s`` s) and flaky (async, fails once after ``flaky_s`` s)."""
    calls: list[int] = []

    async def fast(state: _Log) -> dict[str, Any]:
        await asyncio.sleep(fast_s)
        return {"log": ["fast"]}

    async def flaky(state: _Log) -> dict[str, Any]:
        await asyncio.sleep(flaky_s)
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("down")
        return {"log": ["flaky"]}

    g = StateGraph(_Log)
    g.add_node("fast", fast)
    g.add_node("flaky", flaky)
    g.add_edge(START, "fast")
    g.add_edge(START, "flaky")
    g.add_edge("fast", END)
    g.add_edge("flaky", END)
    return g


@pytest.mark.parametrize(("make", "answer", "log"), [
    (_fast_and_asking, "yes", ["ask:yes", "fast"]),
    (_fast_and_failing_once, None, ["fast", "flaky"]),
], ids=["after-an-interrupt", "after-a-failure"])
def test_a_resumed_step_starts_only_the_tasks_that_run_again(make: Any, answer: Any,
                                                             log: list[str]) -> None:
    # LangGraph restores the finished task's writes from the saved pending writes and runs
    # only the other one; it still reports a `task` for both (issue 24.6).
    h = LangGraphHarness(make(), seed=1)
    h.trace({"log": []})
    resumed = h.resume(answer) if answer is not None else h.resume()

    assert resumed.result.status == "completed"
    assert resumed.result.data == {"log": log}  # fast's writes restored, not run again
    assert [e.node for e in resumed.events if e.type == "node_start"] == [
        "ask" if answer else "flaky"]
    assert check_invariants(h.events) == []


def test_a_task_cancelled_by_a_failing_sibling_reports_its_cancellation() -> None:
    # flaky fails at once, while fast sleeps: LangGraph cancels fast, saves a
    # CancelledError as its write and runs it again on resume
    h = LangGraphHarness(_fast_and_failing_once(fast_s=5.0, flaky_s=0.0), seed=1)
    failed = h.trace({"log": []})

    assert failed.result.status == "failed"
    assert_events(failed.events, ["...", {"node_start:fast", "node_start:flaky"}, "...",
                                  "error:flaky", "...",
                                  {"type": "error", "node": "fast",
                                   "error_type": "CancelledError"},
                                  {"type": "run_end", "status": "failed"}])
    resumed = h.resume()
    assert resumed.result.data == {"log": ["fast", "flaky"]}
    assert sorted(e.node for e in resumed.events if e.type == "node_start") == [
        "fast", "flaky"]
    assert check_invariants(h.events) == []


def test_an_error_handler_task_starts_before_it_ends() -> None:
    async def handler(state: _Log) -> dict[str, Any]:
        await asyncio.sleep(3)  # virtual
        return {"log": ["refunded"]}

    def charge(state: _Log) -> dict[str, Any]:
        raise ValueError("card declined")

    g = StateGraph(_Log)
    g.add_node("charge", charge, error_handler=handler)
    g.add_edge(START, "charge")
    g.add_edge("charge", END)
    h = LangGraphHarness(g, seed=1)
    trace = h.trace({"log": []})

    assert trace.result.status == "completed"
    assert trace.result.data == {"log": ["refunded"]}
    assert_events(trace.events, ["...", "node_start:charge", "...", "error:charge",
                                 "node_start:__error_handler__charge",
                                 "node_end:__error_handler__charge", "...",
                                 "run_end:completed"])
    # LangGraph reports no `task` for the handler; its start is when it began to run
    end = next(e for e in trace.events if e.type == "node_end")
    start = next(e for e in trace.events if e.type == "node_start" and e.node == end.node)
    assert start.time == end.started_at == end.finished_at - timedelta(seconds=3)
    assert check_invariants(h.events) == []


class _Ask(TypedDict, total=False):
    question: str
    notes: list[str]
    sources: Annotated[list[str], operator.add]
    answer: str


class _Answer(TypedDict):
    answer: str
    sources: list[str]


def _researcher(mutate: bool = False) -> StateGraph:
    """START -> search -> write -> END, returning only ``answer`` and ``sources``."""

    def search(state: _Ask) -> dict[str, Any]:
        return {"notes": [f"about {state['question']}"], "sources": ["s1", "s2"]}

    def write(state: _Ask) -> dict[str, Any]:
        if mutate:
            state["sources"].append("scribbled")  # in place: LangGraph never saves it
        return {"answer": f"{state['question']}: {len(state['notes'])} note(s)"}

    g = StateGraph(_Ask, output_schema=_Answer)
    g.add_node("search", search)
    g.add_node("write", write)
    g.add_edge(START, "search")
    g.add_edge("search", "write")
    g.add_edge("write", END)
    return g


def test_the_result_is_what_langgraph_returns_through_the_output_schema() -> None:
    trace = LangGraphHarness(_researcher(), seed=1).trace({"question": "tides"})
    plain = _researcher().compile().invoke({"question": "tides"})

    assert plain == {"answer": "tides: 1 note(s)", "sources": ["s1", "s2"]}
    assert trace.result.state == trace.result.data == plain
    assert trace.events[-1].state == plain  # run_end says the same


def test_the_result_shows_what_langgraph_saved_not_an_in_place_mutation() -> None:
    h = LangGraphHarness(_researcher(mutate=True), seed=1)
    trace = h.trace({"question": "tides"})
    # the thread, as a resume or a fresh process reads it, never had the scribble (plain
    # LangGraph's invoke would return the live list, scribble included)
    assert h.state()["sources"] == ["s1", "s2"]
    assert trace.result.state == {"answer": "tides: 1 note(s)", "sources": ["s1", "s2"]}
    assert "scribbled" not in trace.to_json()
