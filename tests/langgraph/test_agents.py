"""Real agents under the harness: message ids, breakpoints, update_state, context, chat models.

Each test compares with what plain LangGraph does on the same graph, or runs the same seed
twice (and in a fresh process) and asks for the same bytes.
"""

from __future__ import annotations

import copy
import operator
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
from graphs import FanState
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from pytest_graphflow.errors import InvalidArgument, ResumeError, SimulatedCrash
from pytest_graphflow.langgraph import FaultySaver, LangGraphHarness, check_invariants

HERE = Path(__file__).resolve().parent
CONFIG = {"configurable": {"thread_id": "t"}}


def chat() -> StateGraph:
    """START -> a -> b -> END on ``MessagesState``; the nodes answer with id-less messages."""

    def a(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("a")]}

    def b(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("b1"), AIMessage("b2")]}

    g = StateGraph(MessagesState)
    g.add_node("a", a)
    g.add_node("b", b)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g


def _talk(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    return [(m.type, str(m.content)) for m in messages]


# ------------------------------------------------------------- ids after a fresh harness

CRASHES = [(op, nth, phase) for op, calls in (("put", 4), ("put_writes", 3))
           for nth in range(1, calls + 1) for phase in ("before", "after")]
"""Every saver write of the run (4 checkpoints, 3 tasks' writes), crashing before or after."""


@pytest.mark.parametrize(("op", "nth", "phase"), CRASHES,
                         ids=[f"{op}-{nth}-{phase}" for op, nth, phase in CRASHES])
def test_a_fresh_harness_after_a_crash_keeps_the_conversation_plain_langgraph_keeps(
        op: str, nth: int, phase: Any) -> None:
    saver = FaultySaver(InMemorySaver()).crash_at(op, nth, phase=phase)
    h = LangGraphHarness(chat(), saver=saver)
    with pytest.raises(SimulatedCrash):
        h.trace({"messages": [("user", "hi")]})
    if not list(saver.inner.list(None)):
        return  # nothing was saved: there is no thread to recover
    plain = chat().compile(checkpointer=copy.deepcopy(saver.inner))
    config = {"configurable": {"thread_id": h.thread_id}}
    plain.invoke(None, config)
    expected = _talk(plain.get_state(config).values["messages"])

    # The documented recovery: a fresh harness (a new process) over the saver's inner saver.
    fresh = LangGraphHarness(chat(), saver=saver.inner, thread_id=h.thread_id)
    assert fresh.resume().result.status == "completed"
    messages = fresh.state()["messages"]
    assert _talk(messages) == expected == [("human", "hi"), ("ai", "a"), ("ai", "b1"),
                                           ("ai", "b2")]
    assert len({m.id for m in messages}) == len(messages)  # no id given twice


def reviewed() -> StateGraph:
    """START -> draft -> review (an interrupt) -> END, adding id-less messages."""

    def draft(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("draft")]}

    def review(state: MessagesState) -> dict[str, Any]:
        return {"messages": [HumanMessage(str(interrupt("ok?"))), AIMessage("sent")]}

    g = StateGraph(MessagesState)
    g.add_node("draft", draft)
    g.add_node("review", review)
    g.add_edge(START, "draft")
    g.add_edge("draft", "review")
    g.add_edge("review", END)
    return g


def test_a_fresh_harness_resuming_a_thread_draws_the_ids_the_original_would_have() -> None:
    inner = InMemorySaver()
    original = LangGraphHarness(reviewed(), seed=4, saver=inner)
    original.trace({"messages": [("user", "hi")]})
    restarted = copy.deepcopy(inner)  # the saved thread, as a new process finds it
    original.resume("yes")

    fresh = LangGraphHarness(reviewed(), seed=4, saver=restarted, thread_id=original.thread_id)
    fresh.resume("yes")
    # Ids depend on the seed and the thread's saved history, not on the harness object.
    assert [(m.content, m.id) for m in fresh.state()["messages"]] == [
        (m.content, m.id) for m in original.state()["messages"]]
    assert [s.config for s in fresh.state_history()] == [
        s.config for s in original.state_history()]


class Ticketed(MessagesState):
    """Messages, and ticket ids the nodes make with ``uuid4``."""

    tickets: Annotated[list[str], operator.add]


def ticketed() -> StateGraph:
    """START -> a -> b -> END: id-less messages and a ``uuid4`` ticket id in each node."""

    def a(state: Ticketed) -> dict[str, Any]:
        return {"messages": [AIMessage("a")], "tickets": [f"T-{uuid.uuid4().hex[:12]}"]}

    def b(state: Ticketed) -> dict[str, Any]:
        return {"messages": [AIMessage("b1"), AIMessage("b2")],
                "tickets": [f"T-{uuid.uuid4().hex[:12]}"]}

    g = StateGraph(Ticketed)
    g.add_node("a", a)
    g.add_node("b", b)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g


@pytest.mark.parametrize(("op", "nth", "phase"), CRASHES,
                         ids=[f"{op}-{nth}-{phase}" for op, nth, phase in CRASHES])
def test_a_run_recovered_after_a_crash_has_the_ids_of_the_run_that_never_crashed(
        op: str, nth: int, phase: Any) -> None:
    # Ids are drawn at their place (the checkpoint being extended, the task), not in the
    # order a leg draws them: the recovered leg starts from another checkpoint, yet every
    # message id, ticket id and checkpoint id is the uncrashed run's.
    clean = LangGraphHarness(ticketed(), seed=2)
    clean.trace({"messages": [("user", "hi")]})
    saver = FaultySaver(InMemorySaver()).crash_at(op, nth, phase=phase)
    crashed = LangGraphHarness(ticketed(), seed=2, saver=saver)
    with pytest.raises(SimulatedCrash):
        crashed.trace({"messages": [("user", "hi")]})
    fresh = LangGraphHarness(ticketed(), seed=2, saver=saver.inner, thread_id=crashed.thread_id)
    if list(saver.inner.list(None)):
        fresh.resume()
    else:
        fresh.trace({"messages": [("user", "hi")]})  # nothing saved: start again

    def ids(h: LangGraphHarness) -> tuple[Any, ...]:
        state = h.state()
        return ([(m.content, m.id) for m in state["messages"]], state["tickets"],
                h.state_history(limit=1)[0].config["configurable"]["checkpoint_id"])

    assert ids(fresh) == ids(clean)


# ------------------------------------------------------------------ static breakpoints


def line() -> StateGraph:
    """START -> a -> b -> c -> END, each appending its name."""
    g = StateGraph(FanState)
    for name in ("a", "b", "c"):
        g.add_node(name, lambda state, name=name: {"log": [name]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    return g


BREAKPOINTS = [
    pytest.param({"interrupt_before": ["b"]}, {}, "before", ["a"], id="compiled-before"),
    pytest.param({"interrupt_after": ["b"]}, {}, "after", ["a", "b"], id="compiled-after"),
    pytest.param({}, {"interrupt_before": ["b"]}, "before", ["a"], id="per-run-before"),
    pytest.param({}, {"interrupt_after": ["b"]}, "after", ["a", "b"], id="per-run-after"),
]


@pytest.mark.parametrize(("compiled", "per_run", "when", "log"), BREAKPOINTS)
def test_a_static_breakpoint_pauses_naming_the_node_and_resumes(
        compiled: dict[str, Any], per_run: dict[str, Any], when: str, log: list[str]) -> None:
    plain = line().compile(checkpointer=InMemorySaver(), **compiled)
    plain.invoke({"log": []}, CONFIG, **per_run)
    waiting = plain.get_state(CONFIG).next

    h = LangGraphHarness(line().compile(**compiled), **per_run)
    trace = h.trace({"log": []})
    assert trace.result.status == "interrupted"
    assert trace.result.breakpoint is not None
    assert (trace.result.breakpoint.when, trace.result.breakpoint.nodes) == (when, ["b"])
    assert trace.events[-1].breakpoint == trace.result.breakpoint  # type: ignore[attr-defined]
    assert h.state() == {"log": log} == plain.get_state(CONFIG).values
    assert h.state_history()[0].next == waiting
    assert check_invariants(trace.events) == []

    with pytest.raises(ResumeError, match=r"breakpoint .* nothing to answer"):
        h.resume("go")  # there is nothing to answer; the thread is unchanged
    done = h.resume()
    plain.invoke(None, CONFIG, **per_run)
    assert done.result.status == "completed"
    assert done.result.breakpoint is None
    assert h.state() == plain.get_state(CONFIG).values == {"log": ["a", "b", "c"]}


@pytest.mark.parametrize(("kwargs", "message"), [
    pytest.param({"interrupt_before": ["nope"]}, "no node named 'nope'", id="unknown-node"),
    pytest.param({"interrupt_after": "b"}, "a list of node names or '\\*'", id="bare-string"),
    pytest.param({"interrupt_before": [1]}, "a list of node names", id="not-a-name"),
])
def test_bad_breakpoints_are_named(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        LangGraphHarness(line(), **kwargs)


# -------------------------------------------------- update_state, history and context


def _review_run(seed: int, via: str) -> tuple[list[tuple[str, str | None]], list[Any]]:
    h = LangGraphHarness(chat().compile(interrupt_before=["b"]), seed=seed)
    h.trace({"messages": [("user", "hi")]})
    edit = {"messages": [HumanMessage("make it shorter")]}
    if via == "harness":
        h.update_state(edit, as_node="a")
    else:  # what a research-assistant test does with the graph it holds
        h.graph.update_state({"configurable": {"thread_id": h.thread_id}}, edit, as_node="a")
    assert h.resume().result.status == "completed"
    history = h.state_history() if via == "harness" else list(
        h.graph.get_state_history({"configurable": {"thread_id": h.thread_id}}))
    return ([(str(m.content), m.id) for m in h.state()["messages"]],
            [s.config["configurable"]["checkpoint_id"] for s in history])


@pytest.mark.parametrize("via", ["harness", "graph"])
def test_update_state_through_the_harness_draws_owned_ids(via: str) -> None:
    messages, checkpoints = _review_run(5, via)
    assert [c for c, _ in messages] == ["hi", "a", "make it shorter", "b1", "b2"]
    # Same seed, same ids: the update's checkpoint and message ids, and every one after it.
    assert _review_run(5, via) == (messages, checkpoints)
    assert checkpoints == sorted(checkpoints, reverse=True)  # newest first, ids increasing


@dataclass
class Desk:
    """The run context of ``helpdesk``."""

    team: str


def helpdesk() -> StateGraph:
    """One node reading its ``Runtime[Desk]`` context."""

    def route(state: FanState, runtime: Runtime[Desk]) -> dict[str, Any]:
        return {"log": [f"routed to {runtime.context.team}"]}

    g = StateGraph(FanState, context_schema=Desk)
    g.add_node("route", route)
    g.add_edge(START, "route")
    g.add_edge("route", END)
    return g


def test_context_reaches_runtime_context_nodes() -> None:
    h = LangGraphHarness(helpdesk(), context=Desk(team="billing"))
    assert h.trace({"log": []}).result.data == {"log": ["routed to billing"]}


# ----------------------------------------------------------------- chat-model message ids


def assistant() -> StateGraph:
    """A node calling langchain-core's own fake chat model, whose answers carry no id."""
    model = GenericFakeChatModel(messages=iter([AIMessage("hello"), AIMessage("again")]))

    def call(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("call", call)
    g.add_edge(START, "call")
    g.add_edge("call", END)
    return g


_SCRIPT = """
import sys
sys.path.insert(0, {here!r})
from test_agents import chat_bytes
sys.stdout.write(chat_bytes().decode())
"""


def chat_bytes() -> bytes:
    """Two turns with the assistant under seed 7: its events and the conversation's ids."""
    h = LangGraphHarness(assistant(), seed=7)
    h.trace({"messages": [("user", "hi")]})
    h.trace({"messages": [("user", "and?")]})
    ids = "\n".join(f"{m.content}={m.id}" for m in h.state()["messages"])
    return ("\n".join(e.model_dump_json() for e in h.events) + "\n" + ids).encode()


def test_chat_model_message_ids_are_seeded() -> None:
    first = chat_bytes()
    assert chat_bytes() == first
    ids = [row.split("=", 1)[1] for row in first.decode().splitlines() if "=lc_run--" in row]
    assert len(ids) == 2
    assert len(set(ids)) == 2
    # Plain langchain-core in the same process keeps its own run ids.
    model = GenericFakeChatModel(messages=iter([AIMessage("x"), AIMessage("x")]))
    assert model.invoke("q").id != model.invoke("q").id


def test_chat_model_message_ids_are_the_same_in_a_fresh_process() -> None:
    hash_seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    there = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(here=str(HERE))],
        check=True, capture_output=True, env={"PYTHONHASHSEED": hash_seed, "PATH": ""},
        timeout=120).stdout
    assert there == chat_bytes()
