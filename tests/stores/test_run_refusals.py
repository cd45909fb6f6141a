"""Seed 004's refusals of a run as a whole, on every store and both anyio backends: an
execution passed to another graph (``ExecutionMismatch``), and an unexpected throwable - a
clock that throws - at admission or mid-run (``UnexpectedError``): each changes nothing the
store holds beyond what was committed, and leaves the thread's claim released."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    CompiledGraph,
    ExecutionMismatch,
    Graph,
    GraphRuntime,
    Resume,
    SnapshotMismatch,
    UnexpectedError,
    VirtualClock,
    interrupt,
)

pytestmark = pytest.mark.anyio


class S(BaseModel):
    """The state of the test graphs."""

    n: int = 0
    answer: Any = None


def _inc(state: S) -> dict[str, Any]:
    return {"n": state.n + 1}


def _ask(state: S) -> dict[str, Any]:
    return {"answer": interrupt("ok?", id="ok")}


def _graph(graph_id: str) -> CompiledGraph:
    """``a -> ask -> b -> c``: pauses at ``ask``'s question."""
    g = Graph(graph_id, S)
    g.node("a", _inc)
    g.node("ask", _ask)
    g.node("b", _inc)
    g.node("c", _inc)
    g.edge(START, "a")
    g.edge("a", "ask")
    g.edge("ask", "b")
    g.edge("b", "c")
    g.edge("c", END)
    return g.compile()


async def _rows(store: Any, thread_id: str) -> tuple[Any, ...]:
    """Everything the store holds for the thread: checkpoints, their runs' events and run
    records, and its claim."""
    cps = await store.list(thread_id=thread_id)
    runs = sorted({cp.run_id for cp in cps})
    return ([cp.model_dump(mode="json") for cp in cps],
            [await store.events(r) for r in runs], [await store.run(r) for r in runs],
            await store.current_claim(thread_id))


# -- ExecutionMismatch ------------------------------------------------------------------------

SEED_MISMATCH = "An execution was passed to a graph other than the one that created or restored it."


def _resume(rt: GraphRuntime, run_id: str, other: CompiledGraph) -> Any:
    return rt.aresume(run_id, Resume("yes"), graph=other)


def _step(rt: GraphRuntime, run_id: str, other: CompiledGraph) -> Any:
    return rt.astep(other, run_id=run_id, resume=Resume("yes"))


def _update(rt: GraphRuntime, run_id: str, other: CompiledGraph) -> Any:
    return rt.aupdate_state(run_id, {"n": 7}, graph=other)


@pytest.mark.parametrize("call", [_resume, _step, _update], ids=["aresume", "astep",
                                                                  "aupdate_state"])
async def test_an_execution_passed_to_another_graph_is_refused_changing_nothing(
    any_store: Any, call: Any
) -> None:
    assert ExecutionMismatch.__doc__ is not None
    assert ExecutionMismatch.__doc__.startswith(SEED_MISMATCH)
    rt = GraphRuntime(any_store, clock=VirtualClock(), seed=3)
    paused = await rt.ainvoke(_graph("orders"), {}, thread_id="t-1")
    assert paused.status == "interrupted"
    before = await _rows(any_store, "t-1")
    other = _graph("refunds")  # the same shape, another graph
    with pytest.raises(ExecutionMismatch) as info:
        await call(rt, paused.run_id, other)
    err = info.value
    assert isinstance(err, SnapshotMismatch)  # what callers caught before it had a name
    assert (err.run_id, err.expected, err.given) == (paused.run_id, "orders", "refunds")
    assert "created by graph 'orders', not 'refunds'" in str(err)
    assert await _rows(any_store, "t-1") == before
    done = await rt.aresume(paused.run_id, Resume("yes"), graph=_graph("orders"))
    assert (done.status, done.state.n) == ("completed", 3)  # its own graph continues it


# -- UnexpectedError: a clock that throws ----------------------------------------------------

SEED_UNEXPECTED = ("An unexpected throwable - such as a Clock that threw - refused the run at "
                   "admission, or ended it where it was")


class ClockBroke(Exception):
    """The broken clock's own exception."""


class BreakingClock(VirtualClock):
    """A virtual clock whose ``now``/``monotonic`` throw from call number ``breaks_at`` on
    (counted from when it is armed); ``None``: it never throws."""

    def __init__(self) -> None:
        super().__init__(patch_wall_clock=False)
        self.calls = 0
        self.breaks_at: int | None = None

    def arm(self, after: int) -> None:
        """Throw at the ``after``-th call from now (0: the very next one)."""
        self.breaks_at = self.calls + after

    def _count(self) -> None:
        call, self.calls = self.calls, self.calls + 1
        if self.breaks_at is not None and call >= self.breaks_at:
            raise ClockBroke(f"the clock broke at call {call}")

    def now(self) -> Any:
        self._count()
        return super().now()

    def monotonic(self) -> float:
        self._count()
        return super().monotonic()


def _chain() -> CompiledGraph:
    g = Graph("chain", S)
    for name in ("a", "b", "c"):
        g.node(name, _inc)
    g.edge(START, "a")
    g.edge("a", "b")
    g.edge("b", "c")
    g.edge("c", END)
    return g.compile()


@pytest.fixture
def fresh_store(request: pytest.FixtureRequest, make_any_store: Any) -> Iterator[Any]:
    """A factory of empty stores of this test's backend (PostgreSQL: each on its own schema,
    dropped when the test ends)."""
    schemas: list[str] = []

    def make() -> Any:
        if request.node.callspec.params["make_any_store"] != "postgres":
            return make_any_store()
        schemas.append(f"refusals_{os.getpid()}_{len(schemas)}")
        return make_any_store(schema=schemas[-1])

    yield make
    if schemas:
        import psycopg

        with psycopg.connect(request.getfixturevalue("postgres_dsn"), autocommit=True) as conn:
            for name in schemas:
                conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def _is_prefix(part: list[Any], whole: list[Any]) -> bool:
    return whole[:len(part)] == part


async def test_a_clock_that_throws_at_admission_or_mid_run_ends_the_run_named_and_releases(
    fresh_store: Any,
) -> None:
    """The thread already holds a completed run; a second run's clock throws at its n-th
    call, for every n until the run gets through: it is refused at admission (the store as
    before) or ended where it was (the store as of its last commit: a prefix of what a run
    with a sound clock writes, no failure recorded). Either way the claim is released, so
    another runtime continues the thread at once."""
    assert UnexpectedError.__doc__ is not None
    assert " ".join(UnexpectedError.__doc__.split()).startswith(SEED_UNEXPECTED)
    graph = _chain()
    sound = fresh_store()
    ref_rt = GraphRuntime(sound, clock=BreakingClock(), seed=5)
    await ref_rt.ainvoke(graph, {}, thread_id="t")
    second = await ref_rt.ainvoke(graph, {}, thread_id="t")
    ref_cps, ref_events, _, _ = await _rows(sound, "t")
    outcomes: set[bool] = set()
    n = 0
    while True:
        store = fresh_store()
        clock = BreakingClock()
        rt = GraphRuntime(store, clock=clock, seed=5)
        first = await rt.ainvoke(graph, {}, thread_id="t")
        before = await _rows(store, "t")
        clock.arm(n)
        try:
            done = await rt.ainvoke(graph, {}, thread_id="t")
        except UnexpectedError as exc:
            err = exc
        else:
            assert (done.state.n, n > 0) == (6, True)
            break
        assert isinstance(err.__cause__, ClockBroke), n
        assert err.error is err.__cause__
        outcomes.add(err.admitted)
        cps, events, records, claim = await _rows(store, "t")
        assert claim is None, n  # released, not left to expire
        if not err.admitted:
            assert (cps, events, records, claim) == before, n
            assert "refused the run at admission" in str(err)
        else:
            assert (err.run_id, err.thread_id) == (second.run_id, "t")
            assert _is_prefix(cps, ref_cps), n
            assert len(cps) >= len(before[0]), n
            assert all(_is_prefix(mine, ref) for mine, ref in zip(events, ref_events,
                                                                  strict=False)), n
            assert all(r is None or r["status"] == "running" for r in records[1:]), n
        # another runtime, whose clock has not moved, takes the thread over at once
        other = GraphRuntime(store, clock=VirtualClock(), seed=9)
        latest = cps[-1]
        if latest["status"] == "running":
            after = await other.arecover("t", graph=graph)
            assert (after.status, after.state.n) == ("completed", 6), n
        else:  # refused, or ended after its last checkpoint: a new run goes on from there
            after = await other.ainvoke(graph, {}, thread_id="t")
            assert (after.status, after.state.n) == ("completed", latest["state"]["n"] + 3), n
        assert first.state.n == 3
        n += 1
    assert outcomes == {False, True}  # both ends were reached


async def test_a_clock_that_throws_as_a_resume_is_admitted_changes_nothing(
    any_store: Any,
) -> None:
    clock = BreakingClock()
    rt = GraphRuntime(any_store, clock=clock, seed=3)
    paused = await rt.ainvoke(_graph("orders"), {}, thread_id="t-1")
    before = await _rows(any_store, "t-1")
    clock.arm(0)
    with pytest.raises(UnexpectedError) as info:
        await rt.aresume(paused.run_id, Resume("yes"))
    assert not info.value.admitted
    assert isinstance(info.value.__cause__, ClockBroke)
    assert await _rows(any_store, "t-1") == before
    clock.breaks_at = None
    done = await rt.aresume(paused.run_id, Resume("yes"))
    assert (done.status, done.state.n) == ("completed", 3)
