"""Issue 29, the round trip's second pass: the parts every leg makes, made cheaper, are the
same parts.

An interrupt round trip (``invoke`` to a pause, ``resume`` to the end, on a fresh runtime)
made the same dozen objects every leg at a cost that had little to do with their content:
keywords passed to a class (``LegSpec``'s 29, ``RunState``'s, ``Runner``'s, a claim's) go
through a dict and back; a frozen dataclass sets each field through ``object.__setattr__``;
a ``Runner.__getattr__`` kept every attribute read of a runner off the interpreter's fast
path; the kept checkpoint a resume reads passed its 24 fields as keywords once more; the
paused question was validated field by field. Callgrind's instructions of a round trip,
909.6 k -> 805.1 k (docs/performance.md). Each test here pins that the cheaper way builds
what the general way builds, field for field, so a later change to one side shows.
"""

from __future__ import annotations

import dataclasses
import inspect
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from graphflow_approval import approval_graph
from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    Resume,
    VirtualClock,
    interrupt,
)
from pytest_graphflow._engine._run_state import LegOutcome, LegSpec, leg_outcome
from pytest_graphflow._engine._runner import Runner
from pytest_graphflow._engine._runtime import run_sync
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._records._events import Interrupt
from pytest_graphflow._records._fast import make
from pytest_graphflow._stores import _claims as rules


class S(BaseModel):
    n: int = 0
    answer: str = ""


def runtime() -> GraphRuntime:
    return GraphRuntime(clock=VirtualClock(), seed=0)


def leg(rt: GraphRuntime, run_id: str) -> Runner:
    runner: Runner = rt._legs.book.live[run_id]
    return runner


def test_runner_parts_are_made_once_when_first_read() -> None:
    """Without ``__getattr__`` (its slot makes every read of a runner's attributes slow), a
    leg's batch runner, halt handler and committer are still made when first read, once."""
    assert "__getattr__" not in vars(Runner)
    rt = runtime()
    paused = rt.invoke(approval_graph(), {})
    runner = leg(rt, paused.run_id)
    made = vars(runner)
    assert "committer" not in made  # a lean leg that paused never needed it
    committer = runner.committer
    assert vars(runner)["committer"] is committer is runner.committer
    assert runner.halts is vars(runner)["halts"] is committer.halts
    assert runner.batches is runner.batches
    assert runner.batches.lean is runner.lean


def test_leg_spec_gets_each_argument_in_its_place() -> None:
    """``LegSpec`` takes its 29 arguments by position (one caller, ``Legs.start``): each
    attribute of a fresh and of a resumed leg holds what that leg is."""
    graph = approval_graph()
    rt = GraphRuntime(clock=VirtualClock(), seed=0, max_supersteps=50, timeout=9.0)
    paused = rt.invoke(graph, {}, thread_id="t-1", interrupt_after=["draft"])
    spec = leg(rt, paused.run_id).run.spec
    assert (spec.graph, spec.store, spec.features, spec.clock, spec.seed) == (
        graph, rt.store, rt.store_features, rt.clock, 0)
    assert (spec.run_id, spec.thread_id, spec.tenant_id) == (paused.run_id, "t-1", None)
    assert (spec.max_supersteps, spec.timeout, spec.on_interrupt) == (50, 9.0, None)
    assert spec.wall_clock is True
    assert spec.record_events is False
    assert spec.break_before is graph.interrupt_before  # the graph's own: no new set
    assert spec.break_after == frozenset({"draft"})
    assert spec.hooks is None
    assert spec.claim is not None
    assert spec.claim.run_id == spec.run_id
    assert spec.subgraph_runner is not None
    assert spec.record is not None
    assert spec.leg is None
    assert spec.thread_explicit is True
    assert spec.resumed_from is None
    assert (spec.time_travel, spec.branch, spec.expired, dict(spec.deadlines)) == (
        False, False, (), {})
    assert (spec.stepping, spec.cancel_after, spec.cancel_at) == (False, None, None)

    asked = rt.resume(paused.run_id)  # past the breakpoint, to the question
    assert asked.status == "interrupted"
    done = rt.resume(asked.run_id, Resume("yes"), cancel_after=60.0)
    assert done.status == "completed"
    spec = leg(rt, done.run_id).run.spec
    assert spec.resumed_from == asked.checkpoint_id
    assert spec.thread_explicit is False
    assert spec.break_after is graph.interrupt_after
    assert spec.cancel_after == 60.0
    assert spec.thread_id == "t-1"
    assert spec.run_id == paused.run_id


def test_a_kept_checkpoint_is_the_model_make_builds() -> None:
    """The checkpoint a resume reads from the in-memory store's kept fields is the one
    ``make(Checkpoint, **fields)`` builds: the same fields, the same fields-set."""
    rt = runtime()
    paused = rt.invoke(approval_graph(), {})
    store: Any = rt.store
    kept = store.kept_latest(paused.run_id)
    fields = dict(kept.__dict__)
    general = make(Checkpoint, **fields)
    assert kept.model_dump() == general.model_dump()
    assert kept.model_fields_set == general.model_fields_set == set(Checkpoint.model_fields)
    assert kept == store._by_id[kept.id].checkpoint()  # built once, then the same
    latest = run_sync(rt, lambda: store.latest(paused.run_id))
    assert kept.model_dump() == latest.model_dump()
    assert latest is not kept


@pytest.mark.parametrize("deadline", [None, 30.0], ids=["no-deadline", "deadline"])
def test_the_paused_question_is_the_validated_one(deadline: float | None) -> None:
    """A question made without validation equals ``Interrupt(...)`` validated from the same
    values, as the run's result and its checkpoint carry it."""
    g = Graph("ask", S)
    g.node("ask", lambda s: {"answer": interrupt({"n": s.n, "xs": [1, 2.5]}, id="q",
                                                 deadline=deadline)})
    g.edge(START, "ask").edge("ask", END)
    rt = runtime()
    paused = rt.invoke(g.compile(), {"n": 3})
    (question,) = paused.interrupts.values()
    validated = Interrupt(key=question.key, id="q", node="ask", task_id=question.task_id,
                          payload={"n": 3, "xs": [1, 2.5]}, deadline=question.deadline)
    assert question == validated
    assert question.model_fields_set == validated.model_fields_set
    assert question.model_dump(mode="json") == validated.model_dump(mode="json")
    assert (question.deadline is None) == (deadline is None)
    with pytest.raises(ValueError, match="frozen"):
        question.id = "other"  # type: ignore[misc]


def test_leg_outcome_is_the_dataclass_its_init_makes() -> None:
    at = datetime(2026, 1, 2, tzinfo=UTC)
    fast = leg_outcome("interrupted", None, (), None, "cp-1", at)
    assert fast == LegOutcome("interrupted", None, (), None, "cp-1", at)
    assert dataclasses.replace(fast, status="failed").status == "failed"
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.status = "failed"  # type: ignore[misc]


def test_fresh_claim_is_the_claim_dataclass() -> None:
    now = datetime(2026, 1, 2, tzinfo=UTC)
    for ttl in (30.0, 0.5, 30.0):
        claim = rules.fresh_claim("run-1", 3, now, ttl)
        assert claim == rules.Claim("run-1", 3, now + timedelta(seconds=ttl), ttl)
        assert claim.as_tuple() == ("run-1", 3, now + timedelta(seconds=ttl))
        assert claim.live(now)
        assert not claim.live(claim.expires_at)
    with pytest.raises(dataclasses.FrozenInstanceError):
        claim.token = 4  # type: ignore[misc]
    for i in range(100):  # the kept deltas stay bounded
        rules.fresh_claim("run-1", 1, now, 1.0 + i)
    assert len(rules._DELTAS) <= 64


def test_leg_spec_arguments_are_positional() -> None:
    """``LegSpec``'s one caller passes its arguments by position: keywords through a class's
    ``__init__`` go into a dict and out again (about 9,000 of a 13,000-instruction call)."""
    params = list(inspect.signature(LegSpec).parameters.values())
    assert len(params) == 29
    assert {p.kind for p in params} == {inspect.Parameter.POSITIONAL_ONLY}
