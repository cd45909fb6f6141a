"""A batch's tasks on asyncio, started without anyio's per-task layers (issue 29).

On asyncio a batch starts each task it needs (``_sched._spawn_asyncio``) as anyio made
tasks before its task handles: a task of the loop in the batch's cancel scope, its end seen
to as anyio's ``task_done`` sees to it. Its task group leaves without the loop turn that
would come straight back (``_sched._asyncio_group_class``), and ``anyio.sleep`` in a node
task goes to the node's sleeper at once (``_sched._patch_anyio_sleep``). Each must change
nothing a run shows: the graphs below (many sleeps, a child task, a node's own
``move_on_after``, a run timeout, a claim renewal, a batch that can never wake, failing
tasks beside sleeping ones, a retry, a cancelled run) run both ways and must yield the same
events, byte for byte, and end alike. Then what it saves, counted.
"""

from __future__ import annotations

import contextlib
import cProfile
import json
import pstats
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio._backends._asyncio import TaskGroup as AnyioTaskGroup

from pytest_graphflow import END, START, Graph, GraphRuntime, Retry, VirtualClock
from pytest_graphflow._time import _sched

from .test_baton import GRAPHS as BATON_GRAPHS
from .test_baton import S, _graph, _sleeper


async def _fails_late(state: S) -> dict[str, Any]:
    await anyio.sleep(1.5)
    raise RuntimeError("late")


async def _fails_at_once(state: S) -> dict[str, Any]:
    raise ValueError("at once")


def _flaky() -> Callable[..., Any]:
    calls = [0]

    async def node(state: S) -> dict[str, Any]:
        calls[0] += 1
        await anyio.sleep(0.25)
        if calls[0] % 2:
            raise RuntimeError(f"attempt {calls[0]}")
        return {"log": [f"flaky {calls[0]}"]}

    return node


def _retrying() -> Any:
    g = Graph("retrying", S)
    g.node("flaky", _flaky(), retry=Retry(attempts=3, backoff=1.0))
    g.node("other", _sleeper("other", 0.5, 3.0))
    g.node("join", lambda s: {"log": ["join"]})
    g.edge(START, ["flaky", "other"])
    g.edge(["flaky", "other"], "join")
    g.edge("join", END)
    return g.compile()


GRAPHS: dict[str, tuple[Callable[[], Any], dict[str, Any]]] = {
    **{name: ((lambda g=graph: g), opts) for name, (graph, opts) in BATON_GRAPHS.items()},
    "one-fails": (lambda: _graph("one-fails", {"a": _sleeper("a", 1.0, 2.0),
                                               "b": _fails_late, "c": _sleeper("c", 3.0)}), {}),
    "two-fail": (lambda: _graph("two-fail", {"a": _fails_at_once, "b": _fails_late,
                                             "c": _sleeper("c", 0.5)}), {}),
    "retrying": (_retrying, {}),
}


@contextlib.contextmanager
def _as_anyio() -> Iterator[None]:
    """Batches on asyncio as before: ``tg.start_soon``, anyio's own task group, and
    ``anyio.sleep`` as anyio defines it (the backend's patched sleep then reaches the
    node's sleeper)."""
    _run("lone", 0)  # the asyncio backend's makers found, the sleep hooks in
    kinds = _sched._BACKENDS["asyncio"]
    patched = anyio.sleep
    _sched._BACKENDS["asyncio"] = kinds._replace(spawn=_sched._start_soon,
                                                 task_group=AnyioTaskGroup)
    anyio.sleep = patched.__wrapped__  # type: ignore[attr-defined]
    try:
        yield
    finally:
        _sched._BACKENDS["asyncio"] = kinds
        anyio.sleep = patched


@pytest.fixture
def anyio_spawn() -> Iterator[None]:
    """:func:`_as_anyio` for one test."""
    with _as_anyio():
        yield


def _run(name: str, seed: int, backend: str = "asyncio") -> tuple[list[str], str, Any]:
    make, opts = GRAPHS[name]
    rt = GraphRuntime(clock=VirtualClock(), seed=seed, backend=backend, **opts)
    traced = rt.trace(make(), {})
    return ([e.model_dump_json() for e in traced.events], traced.result.status,
            traced.result.data)


@pytest.mark.parametrize("seed", [0, 1, 7])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_a_batch_runs_as_anyio_start_soon_ran_it(name: str, seed: int,
                                                 request: pytest.FixtureRequest) -> None:
    lean = _run(name, seed)
    kinds = _sched._BACKENDS["asyncio"]
    # The installed anyio's layout is the one the lean path knows (else it would fall back
    # to start_soon, and the ceilings below would fail).
    assert kinds.spawn is _sched._spawn_asyncio
    assert kinds.task_group is not AnyioTaskGroup
    assert getattr(anyio.sleep, "__wrapped__", None) is not None
    request.getfixturevalue("anyio_spawn")
    assert _run(name, seed) == lean
    status = lean[1]
    if name in ("timeout", "stall", "one-fails", "two-fail"):
        assert status == "failed"
    else:
        assert status == "completed"
    if name == "one-fails":
        assert "late" in "".join(lean[0])
    if name == "retrying":
        assert lean[2]["log"] == ["flaky 2", "other@0.5", "other@3.0", "join"]


@pytest.mark.parametrize("name", ["three", "one-fails", "retrying", "move-on"])
def test_trio_runs_a_batch_as_asyncio_does(name: str) -> None:
    # The patched anyio.sleep is the backends' own: trio's run yields asyncio's events.
    pytest.importorskip("trio")
    assert _run(name, 3, backend="trio") == _run(name, 3)


async def _cancelled_parts() -> tuple[list[str], str]:
    # One node finishes, one waits on a gate no one sets (holding the baton), one waits for
    # its turn; the run is cancelled once every task waits: its checkpoints keep what
    # finished (C9).
    gate = anyio.Event()

    async def stuck(state: S) -> dict[str, Any]:
        await anyio.sleep(1.0)
        await gate.wait()
        return {"log": ["stuck"]}

    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    graph = _graph("cancelled", {"a": _sleeper("a", 1.0, 2.0), "stuck": stuck,
                                 "c": _sleeper("c", 0.5)})
    handle = await rt.start(graph, {})
    results = []
    async with anyio.create_task_group() as tg:
        async def wait_result() -> None:
            results.append(await handle.result())

        tg.start_soon(wait_result)
        await anyio.wait_all_tasks_blocked()
        handle.cancel()
    history = await rt.history(handle.run_id)
    return [cp.model_dump_json() for cp in history], results[0].status


def test_a_cancelled_batch_ends_as_with_start_soon(request: pytest.FixtureRequest) -> None:
    # The batch's body (running its first task) is cancelled before its other tasks, as
    # anyio's task handles order it: a task of the group's scope itself, in a set with the
    # body's, was cancelled first one run in two, its exit handing the turn on and virtual
    # time jumping to the body's wake-up (the checkpoint stamped 3s, not 1s).
    lean = anyio.run(_cancelled_parts)
    for _ in range(9):
        assert anyio.run(_cancelled_parts) == lean
    assert lean[1] == "cancelled"
    assert '"c@0.5"' in lean[0][-1], lean[0][-1]  # (the gate holds the baton: a waits)
    request.getfixturevalue("anyio_spawn")
    assert anyio.run(_cancelled_parts) == lean


def test_anyio_sleep_outside_a_node_is_anyio_s() -> None:
    _run("lone", 0)  # the hooks in
    assert anyio.sleep is not anyio.sleep.__wrapped__  # type: ignore[attr-defined]

    async def main() -> float:
        loop_time = anyio.current_time()
        await anyio.sleep(0.01)
        return anyio.current_time() - loop_time

    assert anyio.run(main) >= 0.01
    with pytest.raises(ValueError, match="non-negative"):  # anyio's own check
        anyio.run(anyio.sleep, -1)


# -------------------------------------------------------------------- counted


def _fan(width: int) -> Any:
    return _graph(f"fan-{width}", {f"a{i}": _sleeper(f"a{i}", 1.0 + i / 8)
                                   for i in range(width)})


def _calls(graph: Any) -> float:
    rt = GraphRuntime(clock=VirtualClock(patch_wall_clock=False), seed=0)
    assert rt.invoke(graph, {}).status == "completed"  # warm
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(3):
        rt.invoke(graph, {})
    profile.disable()
    return pstats.Stats(profile).total_calls / 3  # type: ignore[attr-defined, no-any-return]


def _per_task() -> float:
    return (_calls(_fan(9)) - _calls(_fan(3))) / 6


_ALONE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from runtime.test_spawn import _as_anyio, _calls, _fan, _per_task
counts = {"lone": _calls(_fan(1)), "task": _per_task()}
with _as_anyio():
    counts |= {"lone_anyio": _calls(_fan(1)), "task_anyio": _per_task()}
print(json.dumps(counts))
"""


@pytest.fixture(scope="module")
def alone() -> dict[str, float]:
    """The counts below measured in a process of their own, both ways: in a worker that ran
    other tests first, tasks and hooks those tests left on the loop's side move the count
    by tens of calls (478 once against 405 alone)."""
    tests = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", _ALONE, str(tests)], capture_output=True,
                         text=True, check=True, timeout=120)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_a_batch_task_costs_few_calls(alone: dict[str, float]) -> None:
    # Each task past the first of a batch of async nodes, each sleeping once: its task,
    # its turns, its sleep, its node and its events. 275 calls a task with anyio's
    # start_soon (a task handle, a cancel scope and an event each, sniffio asked for both)
    # and anyio.sleep's backend look-up; 217 without (the task's own cancel scope stays).
    assert alone["task"] <= 235, alone
    assert alone["task"] <= alone["task_anyio"] - 45, alone


def test_a_lone_async_node_takes_no_turn_to_leave_its_batch(alone: dict[str, float]) -> None:
    # One async node, alone in its batch, run in the batch's own body: nothing else is
    # ready or due when it ends, so its group leaves without a turn of the loop. 483 calls
    # a run before (anyio's exit takes a shielded checkpoint: a cancel scope, a sleep, a
    # turn; anyio.sleep asks sniffio); 405 now.
    assert alone["lone"] <= 460, alone
    assert alone["lone"] <= alone["lone_anyio"] - 60, alone
