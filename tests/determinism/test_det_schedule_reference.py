"""Issue 29 — a seed's schedule is the reference's, whatever the batch's width.

SPEC §7: "``seed``: decides the order in which a parallel batch's tasks start and interleave;
… Same graph + input + seed ⇒ identical event stream". The scheduler was made cheaper per
task for wide batches (no scan of the ready tasks per turn, a claim's renewal kept apart from
them); these tests pin the order a seed gives to a straightforward reference of the seeded
pick (``tests/graphflow_schedule_reference.py``), for sync batches (run inline, shuffled) and
for async ones (turns at every start and wake-up), with and without the claim's renewal
taking turns among the tasks.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from graphflow_schedule_reference import async_turns, sync_order
from pytest_graphflow import END, START, Expand, Graph, GraphRuntime, Reducer, VirtualClock


class S(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []


def sleeps_of(width: int) -> list[list[int]]:
    """Each task's sleeps, in whole seconds: ties, zero sleeps and tasks that never sleep."""
    return [[(k * 7) % 4, (k * 3) % 5][: k % 3] for k in range(width)]


def async_batch(sleeps: list[list[int]], turns: list[tuple[int, int]]) -> Any:
    """plan → one ``work`` task per item (item k sleeps ``sleeps[k]``) → END; every turn of a
    task appends ``(task, turn)`` to ``turns``."""

    async def work(s: S, ctx: Any) -> dict[str, Any]:
        k = ctx.item
        for turn, seconds in enumerate(sleeps[k]):
            turns.append((k, turn))
            await anyio.sleep(seconds)
        turns.append((k, len(sleeps[k])))
        return {"log": [f"{k}@{ctx.clock.elapsed}"]}

    g = Graph("turns", S)
    g.node("plan", lambda s: Expand("work", list(range(len(sleeps)))), destinations=["work"])
    g.node("work", work)
    g.edge(START, "plan").edge("work", END)
    return g.compile()


def batch_step(events: Any, node: str) -> int:
    steps = {e.step for e in events if e.type == "node_start" and e.node == node}
    assert len(steps) == 1, steps
    return steps.pop()


@pytest.mark.parametrize("seed", [0, 1, 29])
def test_an_async_batch_takes_turns_in_the_reference_order(anyio_backend: str,
                                                           seed: int) -> None:
    sleeps = sleeps_of(600)
    turns: list[tuple[int, int]] = []
    runtime = GraphRuntime(clock=VirtualClock(), seed=seed, backend=anyio_backend)
    trace = runtime.trace(async_batch(sleeps, turns), {})
    assert trace.result.status == "completed"
    expected = async_turns(seed, trace.result.run_id, batch_step(trace.events, "work"), sleeps)
    assert turns == expected
    # The state folds the writes in item order (seed 000: declared order), not turn order.
    assert [entry.split("@")[0] for entry in trace.result.data["log"]] == [
        str(k) for k in range(600)]


def test_the_claims_renewal_taking_turns_leaves_the_tasks_order_as_the_reference(
        anyio_backend: str) -> None:
    # Sleeps of 5 to 9 s against a claim of 3 s: the renewal takes a turn every second of
    # the batch (it goes first when due, and draws nothing), between the tasks' turns.
    sleeps = [[5 + k % 3, 4 if k % 2 else 0] for k in range(300)]
    turns: list[tuple[int, int]] = []
    runtime = GraphRuntime(clock=VirtualClock(), seed=3, backend=anyio_backend, claim_ttl=3)
    trace = runtime.trace(async_batch(sleeps, turns), {})
    assert trace.result.status == "completed"
    assert turns == async_turns(3, trace.result.run_id, batch_step(trace.events, "work"), sleeps)


@pytest.mark.parametrize("seed", [0, 5])
def test_a_sync_batch_runs_in_the_reference_shuffle(anyio_backend: str, seed: int) -> None:
    started: list[str] = []

    def worker(name: str) -> Any:
        def fn(s: S) -> dict[str, Any]:
            started.append(name)
            return {"log": [name]}
        return fn

    names = [f"w{i}" for i in range(2_000)]
    g = Graph("shuffle", S)
    for name in names:
        g.node(name, worker(name))
    g.edge(START, names).edge(names, END)
    runtime = GraphRuntime(clock=VirtualClock(), seed=seed, backend=anyio_backend)
    trace = runtime.trace(g.compile(), {})
    assert started == sync_order(seed, trace.result.run_id, batch_step(trace.events, "w0"),
                                 names)
    assert trace.result.data["log"] == names


def test_the_same_seed_gives_the_same_bytes_for_a_wide_async_batch(anyio_backend: str) -> None:
    sleeps = sleeps_of(400)

    def stream() -> str:
        runtime = GraphRuntime(clock=VirtualClock(), seed=11, backend=anyio_backend)
        return runtime.trace(async_batch(sleeps, []), {}).to_json()

    assert stream() == stream()
