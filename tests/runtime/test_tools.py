"""Tools with declared contracts (issue 26; seed 004: "A tool call failed the run: the tool
returned Fatal, or broke its contract (an update to a key it does not declare, a question it
does not declare). cause says which."): what a call gives a node, its events, its key, its
retries, how its update joins the node's patch, how a recorded call is replayed, and bad
calls. The store-backed acceptance is in ``tests/stores/test_tools.py``."""

from __future__ import annotations

import contextlib
import operator
from collections import Counter
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    CompiledGraph,
    Fatal,
    Graph,
    GraphEventsExtension,
    GraphRuntime,
    InMemoryCheckpointStore,
    InvalidArgument,
    NodeContext,
    NodeFailed,
    Resume,
    Retry,
    ToolCall,
    ToolCallEvent,
    ToolFailed,
    ToolResult,
    VirtualClock,
    assert_events,
    format_events,
    interrupt,
    parse_event,
    record_effect,
    tool,
)
from pytest_graphflow.invariants import (
    check_crash_recovery,
    check_invariants,
    check_tool_replays,
)

pytestmark = pytest.mark.anyio


class S(BaseModel):
    """An order: its amount, what was paid, a log, and an answer."""

    amount: int = 0
    paid: int = 0
    log: Annotated[list[str], operator.add] = []
    note: str = ""


def _one(fn: Any, **node: Any) -> CompiledGraph:
    g = Graph("one", S)
    g.node("work", fn, **node)
    g.edge(START, "work")
    g.edge("work", END)
    return g.compile()


def _rt(store: Any = None) -> GraphRuntime:
    return GraphRuntime(store, clock=VirtualClock(), seed=3)


def _tool_events(events: Any) -> list[ToolCallEvent]:
    return [e for e in events if isinstance(e, ToolCallEvent)]


async def test_a_call_returns_the_tools_value_merges_its_update_and_is_an_event() -> None:
    keys: list[str] = []

    @tool(updates=["paid", "log"])
    def pay(args: dict[str, Any], call: ToolCall) -> ToolResult:
        keys.append(call.key)
        assert (call.tool, call.node, call.attempt) == ("pay", "work", 1)
        return ToolResult(value={"receipt": f"r-{args['amount']}"},
                          update={"paid": args["amount"], "log": ["paid"]})

    def work(state: S, ctx: NodeContext) -> dict[str, Any]:
        receipt = ctx.call_tool(pay, {"amount": state.amount})
        return {"note": receipt["receipt"], "log": ["noted"]}

    trace = await _rt().atrace(_one(work), {"amount": 30})
    state = trace.result.state
    # The tool's update joins the node's patch before the node's own: a reducer key folds.
    assert (state.paid, state.note, state.log) == (30, "r-30", ["paid", "noted"])
    assert_events(trace, ["...", "node_start:work", "tool_call:pay", "node_end:work", "..."])
    (event,) = _tool_events(trace.events)
    task = next(e.task_id for e in trace.events if e.type == "node_start")
    assert event.key == keys[0] == f"{task}:tool-0"
    assert (event.args, event.value, event.update) == (
        {"amount": 30}, {"receipt": "r-30"}, {"paid": 30, "log": ["paid"]})
    assert (event.effect, event.replayed, event.outcome, event.attempts) == (
        "external", False, "ok", 1)
    # The wire form reads back, and the readable form names the tool.
    assert parse_event(event.model_dump(mode="json")) == event
    assert "tool_call pay" in format_events([event])
    assert check_invariants(trace.events) == []


async def test_an_external_tool_called_before_an_interrupt_is_replayed_on_resume() -> None:
    """The node runs again from the top on resume: its recorded call returns what the tool
    returned, without calling it; a ``pure`` tool is called again."""
    calls: Counter[str] = Counter()

    @tool(updates=["paid"])
    def charge(args: dict[str, Any], call: ToolCall) -> ToolResult:
        calls["charge"] += 1
        return ToolResult(value=f"charged {call.key}", update={"paid": args["amount"]})

    @tool(effect="pure")
    def fmt(args: dict[str, Any]) -> str:
        calls["fmt"] += 1
        return f"{args['amount']} EUR"

    def work(state: S, ctx: NodeContext) -> dict[str, Any]:
        receipt = ctx.call_tool(charge, {"amount": state.amount})
        shown = ctx.call_tool(fmt, {"amount": state.amount})
        answer = interrupt(f"send {receipt} ({shown})?", id="send")
        return {"note": f"{receipt}/{answer}"}

    store = InMemoryCheckpointStore()
    graph = _one(work)
    paused = await _rt(store).atrace(graph, {"amount": 5})
    assert paused.result.status == "interrupted"
    assert paused.result.state.paid == 0  # the patch waits for the node's result
    resumed = await _rt(store).aresume_trace(paused.result.run_id, Resume("yes"), graph=graph)
    assert resumed.result.status == "completed"
    assert calls == {"charge": 1, "fmt": 2}
    first, again = _tool_events(resumed.events)
    assert (first.tool, first.replayed, again.tool, again.replayed) == (
        "charge", True, "fmt", False)
    assert first.value == _tool_events(paused.events)[0].value
    assert resumed.result.state.paid == 5
    assert resumed.result.state.note == f"charged {first.key}/yes"
    assert check_tool_replays([*paused.events, *resumed.events]) == []


async def test_a_node_retry_replays_the_calls_its_failed_attempt_recorded() -> None:
    calls: Counter[str] = Counter()

    @tool
    def book(args: Any) -> str:
        calls["book"] += 1
        return "booked"

    def work(state: S, ctx: NodeContext) -> dict[str, Any]:
        booked = ctx.call_tool(book, None)
        if ctx.attempt == 1:
            raise ConnectionError("the confirmation mail bounced")
        return {"note": booked}

    trace = await _rt().atrace(_one(work, retry=Retry(attempts=2, backoff=1)), {})
    assert trace.result.state.note == "booked"
    assert calls["book"] == 1
    assert [e.replayed for e in _tool_events(trace.events)] == [False, True]
    assert check_invariants(trace.events) == []


@pytest.mark.parametrize("cause", ["fatal", "undeclared_update", "undeclared_question"])
async def test_a_node_that_catches_tool_failed_still_fails_with_it(cause: str) -> None:
    @tool(updates=["paid"], asks=["approve"])
    def risky(args: Any) -> Any:
        if cause == "fatal":
            return Fatal("card reported stolen")
        if cause == "undeclared_update":
            return ToolResult(update={"paid": 1, "note": "sneaky"})
        with contextlib.suppress(ToolFailed):  # swallowing it changes nothing
            interrupt("really?", id="confirm")  # it declares "approve" only
        return "done"

    def work(state: S, ctx: NodeContext) -> dict[str, Any]:
        try:
            ctx.call_tool(risky, None)
        except ToolFailed:
            return {"note": "carried on"}
        return {}

    trace = await _rt().atrace(_one(work, retry=Retry(attempts=3, backoff=0)), {})
    result = trace.result
    assert result.status == "failed"
    err = result.error
    assert isinstance(err, ToolFailed)
    assert (err.cause, err.tool, err.node) == (cause, "risky", "work")
    assert result.state.note == ""  # nothing of the task was applied
    detail = {"fatal": "card reported stolen", "undeclared_update": "['note']",
              "undeclared_question": "'confirm'"}[cause]
    assert detail in str(err)
    assert_events(trace, ["...", "node_start:work", "tool_call:risky",
                          "error:work", "checkpoint_saved", "run_end"])
    # Neither the tool's nor the node's Retry tries again: one attempt, one call.
    assert [e.attempt for e in trace.events if e.type == "node_start"] == [1]
    (event,) = _tool_events(trace.events)
    assert (event.outcome, event.error) == (cause, str(err))


async def test_tool_failed_takes_the_nodes_on_error_route() -> None:
    @tool
    def refund(args: Any) -> Any:
        return Fatal("the payment provider refused the refund")

    def work(state: S, ctx: NodeContext) -> None:
        ctx.call_tool(refund, None)

    def handle(state: S, ctx: NodeContext) -> dict[str, Any]:
        assert ctx.failure is not None
        return {"note": f"{ctx.failure['error_type']}: escalated"}

    g = Graph("routed", S)
    g.node("work", work, on_error="handle")
    g.node("handle", handle)
    g.edge(START, "work").edge("work", END).edge("handle", END)
    result = await _rt().ainvoke(g.compile(), {})
    assert result.status == "completed"
    assert result.state.note == "ToolFailed: escalated"


async def test_a_tools_retry_waits_on_the_virtual_clock_and_counts_its_attempts() -> None:
    attempts: list[int] = []

    @tool(retry=Retry(attempts=3, backoff=2.0, factor=2.0, retry_on=(TimeoutError,)))
    async def quote(args: Any, call: ToolCall) -> int:
        attempts.append(call.attempt)
        await anyio.sleep(0)
        if call.attempt < 3:
            raise TimeoutError("the pricing service timed out")
        return 42

    async def work(state: S, ctx: NodeContext) -> dict[str, Any]:
        before = ctx.now()
        price = await ctx.acall_tool(quote, {"sku": "X"})
        return {"amount": price, "note": str((ctx.now() - before).total_seconds())}

    result = await _rt().ainvoke(_one(work), {})
    assert (result.state.amount, result.state.note) == (42, "6.0")  # waited 2 s, then 4 s
    assert attempts == [1, 2, 3]


async def test_a_tool_error_its_retry_does_not_take_fails_the_node() -> None:
    @tool(retry=Retry(attempts=3, backoff=0, retry_on=(TimeoutError,)))
    def lookup(args: Any) -> Any:
        raise KeyError("no such customer")

    def work(state: S, ctx: NodeContext) -> None:
        ctx.call_tool(lookup, None)

    trace = await _rt().atrace(_one(work), {})
    assert isinstance(trace.result.error, NodeFailed)
    assert isinstance(trace.result.error.__cause__, KeyError)
    (event,) = _tool_events(trace.events)
    assert (event.outcome, event.attempts) == ("error", 1)
    assert "KeyError" in (event.error or "")


async def test_the_sync_call_refuses_a_retry_that_would_wait_and_an_async_tool() -> None:
    @tool(retry=Retry(attempts=2, backoff=1.0))
    def slow(args: Any) -> int:
        return 1

    @tool
    async def remote(args: Any) -> int:
        return 1

    for t in (slow, remote):
        def work(state: S, ctx: NodeContext, t: Any = t) -> None:
            ctx.call_tool(t, None)

        result = await _rt().ainvoke(_one(work), {})
        cause = result.error.__cause__  # type: ignore[union-attr]
        assert isinstance(cause, InvalidArgument)
        assert "await ctx.acall_tool" in str(cause)
        assert repr(t.name) in str(cause)


async def test_a_sync_call_retries_without_waiting() -> None:
    tries: list[int] = []

    @tool(retry=Retry(attempts=3, backoff=0))
    def flaky(args: Any, call: ToolCall) -> str:
        tries.append(call.attempt)
        if call.attempt == 1:
            raise ConnectionError("reset")
        return "ok"

    def work(state: S, ctx: NodeContext) -> dict[str, Any]:
        return {"note": ctx.call_tool(flaky, None)}

    trace = await _rt().atrace(_one(work), {})
    assert trace.result.state.note == "ok"
    assert tries == [1, 2]
    assert _tool_events(trace.events)[0].attempts == 2


def test_bad_declarations_and_calls_are_refused_with_the_fix() -> None:
    with pytest.raises(InvalidArgument, match="effect='sometimes' must be one of"):
        tool(effect="sometimes")(lambda args: None)
    with pytest.raises(InvalidArgument, match="must take"):
        tool(lambda: None)
    with pytest.raises(InvalidArgument, match="updates"):
        tool(updates=[1])(lambda args: None)  # type: ignore[list-item]
    with pytest.raises(InvalidArgument, match="give the reason"):
        Fatal("")

    def work(state: S, ctx: NodeContext) -> None:
        ctx.call_tool(lambda args: None, None)

    result = GraphRuntime(clock=VirtualClock(), seed=0).invoke(_one(work), {})
    assert "declare it with @tool" in str(result.error.__cause__)  # type: ignore[union-attr]


async def test_check_tool_replays_reports_an_external_call_executed_twice() -> None:
    """The checker fails when it should: the same key executed in two legs."""
    @tool
    def send(args: Any) -> str:
        return "sent"

    def work(state: S, ctx: NodeContext) -> dict[str, Any]:
        return {"note": ctx.call_tool(send, None)}

    events = (await _rt().atrace(_one(work), {})).events
    (event,) = _tool_events(events)
    assert check_tool_replays([*events, event]) != []
    twice = check_tool_replays([*events, event])[0]
    assert twice.rule == "tools"
    assert "called again" in twice.message
    replay = event.model_copy(update={"replayed": True, "value": "other"})
    assert "value='other'" in check_tool_replays([*events, replay])[0].message
    assert check_tool_replays([*events, event.model_copy(update={"replayed": True})]) == []


def _mailer(effect: str) -> CompiledGraph:
    """A pure node that sends a mail through a tool, then asks a question; a fresh mail
    service per graph (the checker builds one per crash point)."""
    sent: list[str] = []

    @tool(effect=effect)
    def send(args: Any, call: ToolCall) -> str:
        if call.key not in sent:  # the mail service dedups by idempotency key
            sent.append(call.key)
            record_effect("mail", key=call.key)
        return "sent"

    def work(state: S, ctx: NodeContext) -> dict[str, Any]:
        ctx.call_tool(send, None)
        return {"note": interrupt("done?", id="done")}

    return _one(work)


def test_an_effect_in_an_external_tool_of_a_pure_node_is_protected_across_crashes() -> None:
    assert check_crash_recovery(lambda: _mailer("external"), {}, {"done": "yes"}) == []
    # The same effect in a pure tool is what the checker reports: it is re-run freely.
    (found,) = check_crash_recovery(lambda: _mailer("pure"), {}, {"done": "yes"})
    assert "pure node 'work' recorded effect 'mail'" in found.message


async def test_a_snapshot_shows_tool_calls_with_stable_keys() -> None:
    @tool(updates=["paid"])
    def pay(args: Any) -> ToolResult:
        return ToolResult(value="ok", update={"paid": 1})

    def work(state: S, ctx: NodeContext) -> None:
        ctx.call_tool(pay, {"amount": 1})

    texts = {GraphEventsExtension().serialize(
        await GraphRuntime(clock=VirtualClock(), seed=seed).atrace(_one(work), {}))
        for seed in (1, 2)}
    (text,) = texts  # the seed's id tokens are numbered: one text for both seeds
    (line,) = [ln for ln in text.splitlines() if " tool_call " in ln]
    assert line.endswith(' tool_call work args={"amount":1} key=task-1-1:tool-0 '
                         'task_id=task-1-1 tool=pay update={"paid":1} value=ok')
