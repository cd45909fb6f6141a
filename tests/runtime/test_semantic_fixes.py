"""Behaviours issue 13 found wrong, each checked against the seed sentence it breaks.

Validators that compound, a node returning an exception, answers for a failed run, reading an
unknown key, a snapshot problem list that dropped the schema, and an ``on_error`` route that
starves a join.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, field_validator, model_validator

from pytest_graphflow import (
    END,
    START,
    ConflictingWrites,
    Graph,
    GraphValidationError,
    NodeFailed,
    NotSuspended,
    Resume,
    ResumeError,
    Retry,
    SnapshotMismatch,
    UnknownKey,
    UpdateRejected,
    interrupt,
)

from .conftest import Boom, S, brief, of, resume, run, runtime

pytestmark = pytest.mark.anyio


class Tagged(BaseModel):
    """A transforming (non-idempotent) field validator and a model validator that checks."""

    name: str = ""
    n: int = 0

    @field_validator("name")
    @classmethod
    def tag(cls, value: str) -> str:
        return "V:" + value

    @model_validator(mode="after")
    def bounded(self) -> Tagged:
        if self.n > 10:
            raise ValueError("n must be <= 10")
        return self


def three_steps(seen: list[str], write: dict[str, Any] | None = None) -> Any:
    def count(state: Tagged) -> dict[str, Any]:
        seen.append(state.name)
        return {"n": state.n + 1}

    def last(state: Tagged) -> dict[str, Any]:
        seen.append(state.name)
        return write or {"n": state.n + 1}

    g = Graph("tagged", Tagged)
    g.node("a", count).node("b", count).node("c", last)
    g.edge(START, "a").edge("a", "b").edge("b", "c").edge("c", END)
    return g.compile()


async def test_a_transforming_validator_runs_once_per_write_not_every_superstep() -> None:
    """Seed 002: "The runtime advances through nodes, applies validated state patches": a
    patch is validated as it is applied; a key no node wrote is not validated again (it was
    'John' -> 'V:V:V:John' over three nodes)."""
    seen: list[str] = []
    _, result = await run(runtime(), three_steps(seen), {"name": "John"})
    assert seen == ["V:John", "V:John", "V:John"]
    assert result.data["name"] == "V:John"
    assert result.state.name == "V:John"


async def test_a_written_key_is_still_validated_and_the_model_validator_still_checks() -> None:
    seen: list[str] = []
    _, result = await run(runtime(), three_steps(seen, {"name": "Bob"}), {"name": "John"})
    assert result.data == {"name": "V:Bob", "n": 2}

    _, failed = await run(runtime(), three_steps([], {"n": 11}), {"name": "John"})
    assert failed.status == "failed"
    assert isinstance(failed.error, UpdateRejected)
    assert failed.error.node == "c"


async def test_validators_do_not_compound_across_a_resume_or_a_thread() -> None:
    asked: list[str] = []

    def ask(state: Tagged) -> dict[str, Any]:
        asked.append(state.name)
        return {"n": int(interrupt("n?", id="n"))}

    g = Graph("tagged-ask", Tagged)
    g.node("ask", ask, effect="human")
    g.edge(START, "ask").edge("ask", END)
    graph = g.compile()
    rt = runtime()
    _, paused = await run(rt, graph, {"name": "John"}, thread_id="t-1")
    _, done = await resume(rt, paused.run_id, Resume(3))
    assert asked == ["V:John", "V:John"]
    assert done.data == {"name": "V:John", "n": 3}
    _, again = await run(rt, graph, {"n": 0}, thread_id="t-1", on_interrupt=lambda i: 4)
    assert again.data == {"name": "V:John", "n": 4}


async def test_a_node_that_returns_an_exception_fails_with_node_failed() -> None:
    """Seed 004: "A node returned a failure or threw." -> NodeFailed (it was UpdateRejected),
    with the returned exception as ``__cause__``, and retried like a raised one."""
    calls: list[int] = []
    returned = Boom("out of stock")

    def node(state: S) -> Any:
        calls.append(1)
        return returned

    g = Graph("returns-error", S)
    g.node("n", node, retry=Retry(attempts=2, backoff=1.0))
    g.edge(START, "n").edge("n", END)
    events, result = await run(runtime(), g.compile())
    assert result.status == "failed"
    assert isinstance(result.error, NodeFailed)
    assert result.error.__cause__ is returned
    assert result.error.node == "n"
    assert len(calls) == 2
    assert [(e.error_type, e.will_retry) for e in of(events, "error")] == [
        ("Boom", True), ("Boom", False)]


async def test_answers_for_a_failed_run_raise_not_suspended_and_change_nothing() -> None:
    """Seed 004: "resume was called on a thread that is not suspended." -> NotSuspended (it
    was a plain ResumeError); the run stays resumable without answers."""
    fail = [True]

    def flaky(state: S) -> dict[str, Any]:
        if fail[0]:
            raise Boom("down")
        return {"n": 1}

    g = Graph("failed-run", S)
    g.node("f", flaky)
    g.edge(START, "f").edge("f", END)
    rt = runtime()
    _, failed = await run(rt, g.compile())
    assert failed.status == "failed"
    before = await rt.store.list(failed.run_id)
    with pytest.raises(NotSuspended, match="no pending interrupts") as info:
        await rt.aresume(failed.run_id, Resume("yes"))
    assert isinstance(info.value, ResumeError)
    assert await rt.store.list(failed.run_id) == before
    fail[0] = False
    done = await rt.aresume(failed.run_id)
    assert done.data["n"] == 1


async def test_reading_an_unknown_state_key_fails_with_unknown_key() -> None:
    """Seed 004: "A key was read or written that the graph did not register." (it was
    NodeFailed(AttributeError)); not retried, it is the graph's mistake."""
    calls: list[int] = []

    def typo(state: S) -> dict[str, Any]:
        calls.append(1)
        return {"n": state.totl}  # type: ignore[attr-defined]

    g = Graph("typo", S)
    g.node("typo", typo, retry=Retry(attempts=3))
    g.edge(START, "typo").edge("typo", END)
    events, result = await run(runtime(), g.compile())
    assert result.status == "failed"
    error = result.error
    assert isinstance(error, UnknownKey)
    assert (error.node, error.key, error.read) == ("typo", "totl", True)
    assert "read key 'totl'" in str(error)
    assert isinstance(error.__cause__, AttributeError)
    assert calls == [1]
    assert of(events, "error")[0].error_type == "UnknownKey"


async def test_an_attribute_error_of_the_node_itself_stays_a_node_failure() -> None:
    def broken(state: S) -> dict[str, Any]:
        return {"n": None.real}  # type: ignore[union-attr]

    g = Graph("attr", S)
    g.node("b", broken)
    g.edge(START, "b").edge("b", END)
    _, result = await run(runtime(), g.compile())
    assert isinstance(result.error, NodeFailed)
    assert isinstance(result.error.__cause__, AttributeError)


class Other(BaseModel):
    n: str  # required, so S's checkpoint state does not fit


async def test_snapshot_mismatch_lists_every_problem_schema_included() -> None:
    """Seed 004: "A snapshot does not match this compiled graph; every problem is listed."
    (the schema problem was dropped when there were others)."""
    g = Graph("snap", S)
    g.node("ask", lambda s: {"answer": interrupt("?", id="q")})
    g.edge(START, "ask").edge("ask", END)
    rt = runtime()
    _, paused = await run(rt, g.compile())
    other = Graph("snap", Other)
    other.node("different", lambda s: None)
    other.edge(START, "different").edge("different", END)
    before = await rt.store.list(paused.run_id)
    with pytest.raises(SnapshotMismatch) as info:
        await rt.aresume(paused.run_id, Resume(1), graph=other.compile())
    kinds = {p.kind for p in info.value.problems}
    assert "node_removed" in kinds  # the node the run paused in is gone ...
    assert kinds & {"key_removed", "key_type", "key_added"}  # ... and the schema problem stays
    assert all(p.message in str(info.value) for p in info.value.problems)
    assert await rt.store.list(paused.run_id) == before


def noop(state: S) -> None:
    return None


def test_an_on_error_route_that_starves_a_join_is_refused_by_compile() -> None:
    """Seed 004 JoinStarved: "The graph went quiescent while a join still waited for
    arrivals that nothing can produce." A failure route from a join's source never arrives:
    compile() says so up front instead of the run failing after the fallback's side effects."""
    g = Graph("starve", S)
    g.node("a", noop, on_error="fallback").node("b", noop).node("fallback", noop)
    g.node("z", noop)
    g.edge(START, ["a", "b"]).edge(["a", "b"], "z").edge("z", END).edge("fallback", END)
    with pytest.raises(GraphValidationError) as info:
        g.compile()
    (problem,) = info.value.problems
    assert problem.startswith("node 'a' on_error 'fallback': 'a' feeds join ['a', 'b'] -> 'z'")
    assert "JoinStarved" in problem


def test_an_on_error_route_that_leads_back_to_the_source_compiles() -> None:
    g = Graph("retry-loop", S)
    g.node("a", noop, on_error="fix").node("b", noop).node("fix", noop).node("z", noop)
    g.edge(START, ["a", "b"]).edge(["a", "b"], "z").edge("z", END).edge("fix", "a")
    g.compile()


@pytest.mark.parametrize("policy", ["every_step", "on_halt", "never"])
async def test_an_empty_run_completes_its_thread(policy: str) -> None:
    """SPEC §2: "a new run on a thread that has completed runs starts from that thread's last
    state". A run whose START routes straight to END completed, so its checkpoint must say so
    (it stayed ``running`` and the next run on the thread raised MidExecution)."""
    g = Graph("empty", S)
    g.node("work", lambda s: {"n": s.n + 1})
    g.branch(START, lambda s: "work" if s.n else END, ["work", END])
    g.edge("work", END)
    graph = g.compile(checkpoint_policy=policy)  # type: ignore[arg-type]
    rt = runtime()
    events, first = await run(rt, graph, {"log": ["hi"]}, thread_id="t-empty")
    assert first.status == "completed"
    assert [c.status for c in await rt.store.list(thread_id="t-empty")] == ["completed"]
    assert [e.type for e in events][-2:] == ["checkpoint_saved", "run_end"]
    _, second = await run(rt, graph, {"n": 1}, thread_id="t-empty")
    assert second.status == "completed"
    assert second.data["n"] == 2
    assert second.data["log"] == ["hi"]  # the empty run's input is the thread's state


async def test_conflicting_writes_fail_the_batch_before_an_interrupt_pauses_it() -> None:
    """Seed 002: "Parallel branches are merged only when their writes are disjoint or use a
    registered reducer." Two writers of a plain key fail the run with ConflictingWrites at
    once; the human is not asked first (it failed only after the answer)."""
    asked: list[str] = []

    def ask(state: S) -> dict[str, Any]:
        asked.append("ask")
        return {"answer": interrupt("ok?", id="ok")}

    g = Graph("conflict-vs-interrupt", S)
    g.node("ask", ask, effect="human")
    g.node("w1", lambda s: {"n": 1}).node("w2", lambda s: {"n": 2})
    g.edge(START, ["ask", "w1", "w2"]).edge(["ask", "w1", "w2"], END)
    rt = runtime()
    events, result = await run(rt, g.compile())
    assert result.status == "failed"
    assert isinstance(result.error, ConflictingWrites)
    assert (result.error.key, result.error.nodes) == ("n", ["w1", "w2"])
    assert result.interrupts == {}
    (cp,) = [c for c in await rt.store.list(result.run_id) if c.status != "running"]
    assert (cp.status, cp.interrupts) == ("failed", [])
    assert [e.error_type for e in of(events, "error")] == ["ConflictingWrites"]
    assert brief(events)[-3:] == ["error", "checkpoint_saved", "run_end"]


async def test_writes_through_a_reducer_still_pause_at_the_interrupt() -> None:
    """The passing twin: the same batch writing a key with a reducer pauses for the human."""

    def ask(state: S) -> dict[str, Any]:
        return {"answer": interrupt("ok?", id="ok")}

    g = Graph("reducer-vs-interrupt", S)
    g.node("ask", ask, effect="human")
    g.node("w1", lambda s: {"log": ["w1"]}).node("w2", lambda s: {"log": ["w2"]})
    g.edge(START, ["ask", "w1", "w2"]).edge(["ask", "w1", "w2"], END)
    rt = runtime()
    _, paused = await run(rt, g.compile())
    assert paused.status == "interrupted"
    _, done = await resume(rt, paused.run_id, Resume("yes"))
    assert done.data["log"] == ["w1", "w2"]
    assert done.data["answer"] == "yes"
