"""``interrupt(payload, id=..., deadline=...)`` and ``compile(on_timeout=...)`` (issue 26,
"Deadlines on human input": "the deadline is durable (it survives a restart and fires in a
worker), virtual under a ``VirtualClock``, and visible in events"). The stores and worker
processes are in ``tests/stores/test_deadline_stores.py`` and ``tests/workers``; here: the events
of an expiry, what the testing tools make of them, determinism, partial expiry and bad
arguments."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from graphflow_deadline_graphs import T0, THREE_DAYS, Approval, build
from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    GraphValidationError,
    InMemoryCheckpointStore,
    InvalidArgument,
    Resume,
    SQLiteCheckpointStore,
    Subgraph,
    TimeoutAnswer,
    VirtualClock,
    assert_events,
    format_events,
    interrupt,
    parse_event,
)
from pytest_graphflow._assert._snapshot import parse_snapshot_text, serialize_events
from pytest_graphflow.invariants import check_invariants

pytestmark = pytest.mark.anyio


async def expired_run(seed: int = 5) -> tuple[GraphRuntime, str, list[Any]]:
    """The approval paused at T0, then fired at exactly 3 days; the runtime, run id and the
    run's recorded events (wire form)."""
    store = SQLiteCheckpointStore(":memory:")
    clock = VirtualClock(start=T0)
    rt = GraphRuntime(store=store, clock=clock, seed=seed)
    paused = await rt.ainvoke(build(), {"amount": 50})
    clock.advance(THREE_DAYS.total_seconds())
    (fired,) = await rt.aexpire_due()
    assert fired.run_id == paused.run_id
    return rt, paused.run_id, await store.events(paused.run_id)


async def test_the_expiry_is_an_event_opening_the_resumed_leg() -> None:
    _, _, events = await expired_run()
    assert_events(events, """
        run_start
        ...
        interrupt:approve
        ...
        run_end:interrupted
        run_start
        interrupt_expired:approve
        node_start:approve
        node_end:approve
        edge_transition:approve->escalate
        ...
        node_end:escalate
        ...
        run_end:completed
    """)
    expired = parse_event(next(e for e in events if e["type"] == "interrupt_expired"))
    assert expired.deadline == expired.time == T0 + THREE_DAYS  # virtual, to the microsecond
    assert (expired.action, expired.routed_to) == ("routed", "escalate")
    assert expired.key.endswith(":approve")
    assert check_invariants(events, graph=build()) == []
    # The readable form (format_events) and the snapshot text (GraphEventsExtension)
    # show it with its fields, and the snapshot text reads back.
    (line,) = [x for x in format_events(events).splitlines() if "interrupt_expired" in x]
    assert "routed_to='escalate'" in line
    text = serialize_events(events)
    (line,) = [x for x in text.splitlines() if "interrupt_expired" in x]
    assert "routed_to=escalate" in line
    assert "deadline=2025-01-04T00:00:00Z" in line
    assert [e["type"] for e in parse_snapshot_text(text)] == [e["type"] for e in events]


async def test_the_deadline_checker_catches_an_expiry_before_its_deadline() -> None:
    _, _, events = await expired_run()
    early = [dict(e) for e in events]
    for e in early:
        if e["type"] == "interrupt_expired":
            e["deadline"] = "2025-01-05T00:00:00Z"
    (violation,) = check_invariants(early, graph=build())
    assert violation.rule == "deadline"
    assert "before its deadline" in violation.message


async def test_same_seed_same_bytes() -> None:
    _, _, one = await expired_run(seed=11)
    _, _, two = await expired_run(seed=11)
    assert json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)
    _, _, other = await expired_run(seed=12)
    assert json.dumps(one, sort_keys=True) != json.dumps(other, sort_keys=True)


class Two(BaseModel):
    legal: Any = None
    finance: Any = None


def two_questions() -> Any:
    g = Graph("signoff", Two)
    g.node("legal", lambda s: {"legal": interrupt("ok?", id="ok", deadline=86_400)},
           effect="human")
    g.node("finance", lambda s: {"finance": interrupt("ok?", id="ok",
                                                       deadline=timedelta(days=3))},
           effect="human")
    g.edge(START, ["legal", "finance"]).edge(["legal", "finance"], END)
    return g.compile(on_timeout=TimeoutAnswer("no answer"))


async def test_only_the_due_question_expires_and_the_other_keeps_its_deadline() -> None:
    clock = VirtualClock(start=T0)
    rt = GraphRuntime(clock=clock, seed=1)
    graph = two_questions()
    paused = await rt.ainvoke(graph)
    deadlines = sorted(i.deadline for i in paused.interrupts.values())
    assert deadlines == [T0 + timedelta(days=1), T0 + THREE_DAYS]
    clock.advance(timedelta(days=1).total_seconds())
    (first,) = await rt.aexpire_due()
    assert first.status == "interrupted"  # finance still waits, with its first deadline
    (left,) = first.interrupts.values()
    assert (left.node, left.deadline) == ("finance", T0 + THREE_DAYS)
    (row,) = await rt.waiting()
    assert row.deadline == T0 + THREE_DAYS
    clock.advance(timedelta(days=2).total_seconds())
    (second,) = await rt.aexpire_due()
    assert second.status == "completed"
    assert second.data == {"legal": "no answer", "finance": "no answer"}


def test_expire_due_is_also_synchronous() -> None:
    clock = VirtualClock(start=T0)
    rt = GraphRuntime(clock=clock, seed=0)
    paused = rt.invoke(build(), {"amount": 1})
    assert rt.expire_due() == []
    clock.advance(THREE_DAYS.total_seconds())
    (fired,) = rt.expire_due()
    assert (fired.run_id, fired.data["escalated"]) == (paused.run_id, True)


def test_a_route_to_an_unknown_node_is_a_validation_problem() -> None:
    g = Graph("approval", Approval)
    g.node("approve", lambda s: None).edge(START, "approve").edge("approve", END)
    with pytest.raises(GraphValidationError, match=r"on_timeout='escalte'.*unknown node"):
        g.compile(on_timeout="escalte")
    with pytest.raises(InvalidArgument, match="TimeoutAnswer"):
        g.compile(on_timeout=42)  # type: ignore[arg-type]


@pytest.mark.parametrize("deadline", [0, -5, float("inf"), float("nan"), "3 days", True,
                                      timedelta(0)],
                         ids=["zero", "negative", "inf", "nan", "str", "bool", "zero-delta"])
def test_a_bad_deadline_fails_the_node_naming_it(deadline: Any) -> None:
    def ask(state: Approval) -> dict[str, Any]:
        return {"decision": interrupt("ok?", id="q", deadline=deadline)}

    g = Graph("approval", Approval)
    g.node("approve", ask).edge(START, "approve").edge("approve", END)
    result = GraphRuntime(clock=VirtualClock(), seed=0).invoke(g.compile())
    assert result.status == "failed"
    cause = result.error.__cause__
    assert isinstance(cause, ValueError)
    assert "interrupt(id='q') in node 'approve'" in str(cause)
    assert "deadline=" in str(cause)


def test_a_deadline_inside_a_subgraph_is_refused_naming_the_fix() -> None:
    child = Graph("child", Approval)
    child.node("ask", lambda s: {"decision": interrupt("ok?", id="ok", deadline=60)})
    child.edge(START, "ask").edge("ask", END)
    parent = Graph("parent", Approval)
    parent.node("review", Subgraph(child.compile())).edge(START, "review").edge("review", END)
    result = GraphRuntime(clock=VirtualClock(), seed=0).invoke(parent.compile())
    assert result.status == "failed"
    assert "deadlines are kept and fired for a top-level run only" in str(result.error)


class StaleList(InMemoryCheckpointStore):
    """A store whose ``waiting()`` answers what it listed before (a race: the run was
    answered between the list and the firing)."""

    stale: list[Any] | None = None

    async def waiting(self, **kwargs: Any) -> list[Any]:
        return self.stale if self.stale is not None else await super().waiting(**kwargs)


async def test_a_run_answered_after_it_was_listed_is_skipped_not_fired() -> None:
    store = StaleList()
    clock = VirtualClock(start=T0)
    rt = GraphRuntime(store=store, clock=clock, seed=0)
    paused = await rt.ainvoke(build(), {"amount": 5})
    store.stale = await store.waiting()
    clock.advance(THREE_DAYS.total_seconds() - 1)
    done = await rt.aresume(paused.run_id, Resume("approved"))
    clock.advance(1)
    assert await rt.aexpire_due() == []  # listed as due, but answered meanwhile
    assert (await store.latest(paused.run_id)).id == done.checkpoint_id
