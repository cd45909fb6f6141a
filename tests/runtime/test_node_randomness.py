"""Issue 14: seeded randomness for node code, a warning for blocking sleeps, and an opt-in
lint for non-deterministic calls.

"No seeded randomness for node code (ctx.random(), ctx.uuid() in the manner of Temporal's
workflow random) ... Nothing warns about random, uuid4 or a blocking time.sleep in a node
(0.5 s of real time per call; the virtual clock does not move)."
"""

from __future__ import annotations

import os
import random
import secrets
import time
import uuid
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    BlockingSleepWarning,
    Graph,
    GraphRuntime,
    Resume,
    VirtualClock,
    interrupt,
)
from pytest_graphflow._time._entropy import UNOWNED
from pytest_graphflow.invariants import check_determinism, check_node_code


class S(BaseModel):
    draws: list[float] = []
    ids: list[str] = []
    answer: Any = None


def draw(state: S, ctx: Any) -> dict[str, Any]:
    rng = ctx.random()
    return {"draws": [rng.random(), rng.random()], "ids": [str(ctx.uuid()), str(ctx.uuid())]}


def draw_then_ask(state: S, ctx: Any) -> dict[str, Any]:
    out = draw(state, ctx)
    out["answer"] = interrupt("ok?", id="q")
    return out


def graph(*nodes: Any) -> Any:
    g = Graph("rand", S)
    prev = START
    for i, fn in enumerate(nodes):
        g.node(f"n{i}", fn)
        g.edge(prev, f"n{i}")
        prev = f"n{i}"
    g.edge(prev, END)
    return g.compile()


def run(seed: int, *nodes: Any) -> Any:
    return GraphRuntime(clock=VirtualClock(), seed=seed).invoke(graph(*nodes)).data


def test_same_seed_same_draws_and_uuids() -> None:
    first = run(7, draw)

    assert run(7, draw) == first
    assert check_determinism(graph(draw)) == []
    assert all(uuid.UUID(i).version == 4 for i in first["ids"])
    assert len(set(first["ids"])) == 2


def test_another_seed_draws_other_values() -> None:
    assert run(7, draw)["draws"] != run(8, draw)["draws"]


def test_tasks_draw_their_own_streams() -> None:
    def second(state: S, ctx: Any) -> dict[str, Any]:
        return {"ids": [*state.ids, str(ctx.uuid())]}

    data = run(3, draw, second)

    assert len(set(data["ids"])) == 3


def test_a_resumed_task_draws_what_it_drew_before_the_pause() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=1)
    seen: list[list[float]] = []

    def spy(state: S, ctx: Any) -> dict[str, Any]:
        seen.append([ctx.random().random()])
        return draw_then_ask(state, ctx)

    paused = rt.invoke(graph(spy))
    done = rt.resume(paused.run_id, Resume("yes"))

    assert seen[0] == seen[1]  # the node ran twice and drew the same value
    assert done.data["answer"] == "yes"


# --------------------------------------------------------------------------- time.sleep


def sleeps_blocking(state: S) -> None:
    time.sleep(0.001)


def test_time_sleep_in_a_node_of_a_virtual_run_warns() -> None:
    with pytest.warns(BlockingSleepWarning, match=r"node 'n0' called time.sleep\(0.001\).*"
                      "anyio.sleep"):
        GraphRuntime(clock=VirtualClock(), seed=0).invoke(graph(sleeps_blocking))


def test_time_sleep_in_a_worker_thread_does_not_warn() -> None:
    async def in_thread(state: S) -> None:
        await anyio.to_thread.run_sync(time.sleep, 0.001)

    result = GraphRuntime(clock=VirtualClock(), seed=0).invoke(graph(in_thread))

    assert result.status == "completed"  # filterwarnings=error: a warning would fail it


def test_time_sleep_outside_nodes_does_not_warn() -> None:
    time.sleep(0)


# --------------------------------------------------------------------------- lint


def rolls(state: S) -> dict[str, Any]:
    return {"draws": [random.random(), random.Random().random()]}


def names(state: S) -> dict[str, Any]:
    return {"ids": [str(uuid.uuid4()), str(uuid.uuid1())]}


def salts(state: S) -> dict[str, Any]:
    return {"ids": [os.urandom(8).hex()]}


def tokens(state: S) -> dict[str, Any]:
    return {"ids": [secrets.token_hex(8)]}


def system(state: S) -> dict[str, Any]:
    return {"draws": [random.SystemRandom().random()]}


# what `from random import random` binds when it runs before the first runtime is made
_early_random = UNOWNED["random.random"]


def early(state: S) -> dict[str, Any]:
    return {"draws": [_early_random()]}


def naps(state: S) -> None:
    time.sleep(0)


@pytest.mark.parametrize(("fn", "call", "use"), [
    (salts, "os.urandom", "random.randbytes(n)"),
    (tokens, "secrets.token_hex", "ctx.random()"),
    (system, "random.SystemRandom", "random.Random()"),
    (early, "random.random", "`import random` and call it through the module"),
    (naps, "time.sleep", "anyio.sleep"),
], ids=["os.urandom", "secrets", "SystemRandom", "random-bound-early", "time.sleep"])
def test_the_lint_reports_each_call_a_run_cannot_own(fn: Any, call: str, use: str) -> None:
    found = check_node_code(graph(draw, fn))

    assert len(found) == 1
    assert found[0].rule == "nondeterminism"
    assert f"node 'n1' calls {call}()" in found[0].message
    assert use in found[0].message
    assert "test_node_randomness.py:" in found[0].message


def test_the_lint_passes_the_uuid_and_random_calls_a_run_owns() -> None:
    assert check_node_code(graph(rolls, names)) == []


def test_the_lint_finds_a_call_through_a_closure_and_passes_seeded_code() -> None:
    salt = os.urandom

    def picks(state: S) -> dict[str, Any]:
        return {"ids": [salt(4).hex()]}

    assert check_node_code(graph(draw)) == []
    assert [v.message.split(" at ")[0] for v in check_node_code(graph(picks))] == [
        "node 'n0' calls os.urandom()"]
