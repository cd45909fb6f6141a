"""Issue 24 — a cancel at an event: ``cancel_at=`` takes one item of ``assert_events``'s
pattern language (``"node_end:search"``, ``"* seq=7"``, a dict of field matchers, an event, a
predicate) and cancels the leg right after its first matching event.

What that means in our runtime (docs/control.md): the leg is cancelled as ``RunHandle.cancel()``
would cancel it from the code reading that event. A step's events are made together, once its
batch ran and its checkpoint is saved (C4, C5), so the rest of that step's events are still
delivered and the next step does not start; the leg ends ``cancelled`` (an ``error`` event
``Cancelled``, a checkpoint, ``run_end:cancelled``), no finished task runs again (C9), and a
resume — here or from a fresh runtime over the same store — ends as the run that was never
cancelled. An event of the leg's last step, or its ``run_end``, leaves nothing to cancel.
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Cancelled,
    Expand,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    InvalidArgument,
    Reducer,
    Resume,
    Retry,
    SQLiteCheckpointStore,
    VirtualClock,
    assert_events,
    interrupt,
)
from pytest_graphflow.invariants import check_invariants

SLEEPS = {"kb": 30.0, "web": 5.0, "tickets": 12.0}


class Support(BaseModel):
    question: str = ""
    found: Annotated[list[str], Reducer(operator.add)] = []
    draft: str = ""
    approved: str = ""
    sent: bool = False


def _support(sent: list[str]) -> Any:
    """A support agent: parallel searches of three sources (different latencies), a draft
    that fails once and is retried after a backoff, a human review, an external send."""

    def classify(s: Support) -> Expand:
        return Expand("search", list(SLEEPS))

    async def search(s: Support, ctx: Any) -> dict[str, Any]:
        await anyio.sleep(SLEEPS[ctx.item])
        return {"found": [f"{ctx.item}:{s.question}"]}

    def draft(s: Support, ctx: Any) -> dict[str, Any]:
        if ctx.attempt == 1:
            raise ConnectionError("model overloaded")
        return {"draft": " + ".join(s.found)}

    def review(s: Support) -> dict[str, Any]:
        return {"approved": interrupt({"draft": s.draft}, id="review")}

    def send(s: Support) -> dict[str, Any]:
        sent.append(s.draft)
        return {"sent": True}

    g = Graph("support", Support)
    g.node("classify", classify, destinations=["search"])
    g.node("search", search)
    g.node("draft", draft, retry=Retry(attempts=2, backoff=4.0))
    g.node("review", review, effect="human")
    g.node("send", send, effect="external")
    g.edge(START, "classify").edge("search", "draft").edge("draft", "review")
    g.edge("review", "send").edge("send", END)
    return g.compile()


def _finish(rt: GraphRuntime, graph: Any, run_id: str, status: str) -> list[Any]:
    """Resume the run until it completes (answering the review); every leg's events."""
    events: list[Any] = []
    while status != "completed":
        answer = Resume("yes") if status == "interrupted" else None
        trace = rt.resume_trace(run_id, answer, graph=graph)
        events += trace.events
        status = trace.result.status
    return events


def _uncancelled() -> tuple[list[Any], dict[str, Any]]:
    rt = GraphRuntime(clock=VirtualClock(), seed=5)
    graph = _support([])
    first = rt.trace(graph, {"question": "refund?"}, thread_id="t")
    rest = _finish(rt, graph, first.result.run_id, first.result.status)
    return [*first.events, *rest], rest[-1].state


def test_cancelling_at_every_event_of_the_thread_ends_as_the_uncancelled_run(
        tmp_path: Path) -> None:
    events, final = _uncancelled()
    assert (final["sent"], final["approved"]) == (True, "yes")
    first_leg = next(i for i, e in enumerate(events) if e.type == "run_end") + 1
    for i, target in enumerate(events):
        sent: list[str] = []
        graph = _support(sent)
        store = SQLiteCheckpointStore(tmp_path / f"cut-{i}.db")
        rt = GraphRuntime(store, clock=VirtualClock(), seed=5)
        at = {"seq": target.seq}
        if i < first_leg:
            cut = rt.trace(graph, {"question": "refund?"}, thread_id="t", cancel_at=at)
            before: list[Any] = []
        else:
            leg = rt.trace(graph, {"question": "refund?"}, thread_id="t")
            before = list(leg.events)
            cut = rt.resume_trace(leg.result.run_id, Resume("yes"), cancel_at=at)
        got = [*before, *cut.events]
        # up to the event asked for, the leg is the uncancelled run's, byte for byte
        assert [e.model_dump_json() for e in got[:i + 1]] == [
            e.model_dump_json() for e in events[:i + 1]], i
        status = cut.result.status
        if status == "cancelled":
            assert isinstance(cut.result.error, Cancelled), i
            assert_events(cut, ["...", "error error_type='Cancelled'", "checkpoint_saved",
                                "run_end:cancelled"])
        else:  # an event of the leg's last step or its end: nothing was left to cancel
            assert (status, cut.events[-1].status) in (
                ("interrupted", "interrupted"), ("completed", "completed")), i
        # a new process: a fresh runtime over the same store finishes the thread
        fresh = GraphRuntime(SQLiteCheckpointStore(tmp_path / f"cut-{i}.db"),
                             clock=VirtualClock(start=rt.clock.now()), seed=5)
        rest = _finish(fresh, graph, cut.result.run_id, status)
        whole = [*got, *rest]
        assert whole[-1].state == final, i
        assert sent == [final["draft"]], i  # the external send ran exactly once
        assert check_invariants(whole, graph=graph) == [], i
        # every checkpoint the store holds reads back and extends one it holds
        history = anyio.run(fresh.history, cut.result.run_id)
        ids = {cp.id for cp in history}
        assert all(cp.parent_id is None or cp.parent_id in ids for cp in history), i
        assert history[-1].status == "completed", i


def test_a_cancel_at_an_event_inside_a_step_lets_the_step_finish() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=5)
    cut = rt.trace(_support([]), {"question": "q"}, cancel_at="node_end:search")

    assert cut.result.status == "cancelled"
    # the three searches ran as one batch: all of them finished, draft never started
    assert sorted(e.task_id is not None and e.node for e in cut.events
                  if e.type == "node_end") == ["classify", "search", "search", "search"]
    assert rt.clock.elapsed == 30.0  # no virtual time passes after the event
    done = rt.resume_trace(cut.result.run_id)
    assert [e.node for e in done.events if e.type == "node_start"][:1] == ["draft"]


@pytest.mark.parametrize("matcher", [
    "node_start:draft attempt=2",
    {"type": "error", "node": "draft", "will_retry": True},
    lambda e: e.type == "error" and e.node == "draft",
])
def test_the_matcher_is_an_assert_events_item(matcher: Any) -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=5)
    cut = rt.trace(_support([]), {"question": "q"}, cancel_at=matcher)

    assert cut.result.status == "cancelled"
    # the retry belongs to draft's step: that step finished, the review never started
    assert_events(cut, ["...", "node_end:draft", "...", "run_end:cancelled"])
    assert "review" not in [e.node for e in cut.events]


def test_a_matcher_that_never_matches_changes_nothing() -> None:
    events, _ = _uncancelled()
    rt = GraphRuntime(clock=VirtualClock(), seed=5)
    graph = _support([])
    first = rt.trace(graph, {"question": "refund?"}, thread_id="t",
                     cancel_at="node_end:nowhere")
    rest = _finish(rt, graph, first.result.run_id, first.result.status)
    assert [e.model_dump_json() for e in [*first.events, *rest]] == [
        e.model_dump_json() for e in events]


def test_cancel_at_works_on_every_run_api() -> None:
    graph = _support([])
    rt = GraphRuntime(InMemoryCheckpointStore(), clock=VirtualClock(), seed=5)
    result = rt.invoke(graph, {"question": "q"}, thread_id="t", cancel_at="node_end:classify")
    assert result.status == "cancelled"
    again = rt.resume(result.run_id, cancel_at="node_end:search")
    assert again.status == "cancelled"
    assert rt.recover("t").status == "interrupted"  # review asks: it needs a human

    async def main() -> list[str]:
        other = GraphRuntime(clock=VirtualClock(), seed=5)
        seen = []
        async with other.stream(graph, {"question": "q"}, cancel_at="checkpoint_saved") as evs:
            async for e in evs:
                seen.append(e.type)
        return seen

    assert anyio.run(main) == ["run_start", "checkpoint_saved", "error", "checkpoint_saved",
                               "run_end"]


@pytest.mark.parametrize(("bad", "problem"), [
    ("node_end:a foo=1", "node_end has no field 'foo'"),
    ("nonsense", "unknown event type 'nonsense'"),
    ("...", "a gap matches no one event"),
    ({"node_end:a", "node_end:b"}, "a group matches several events"),
    (3, "items of type int are not understood"),
])
def test_a_bad_cancel_at_names_the_option_and_the_fix(bad: Any, problem: str) -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    with pytest.raises(InvalidArgument) as caught:
        rt.invoke(_support([]), cancel_at=bad)
    message = str(caught.value)
    assert message.startswith("cancel_at=")
    assert problem in message
    assert "pass one event as an assert_events pattern item" in message
