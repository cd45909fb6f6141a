"""Node code that calls ``uuid``/``random`` itself gives the same bytes for the same seed.

A deterministic run (a seed and a ``VirtualClock``) owns its node tasks' entropy as it owns
their wall clock: ``uuid.uuid4()``, ``uuid.uuid1()``, the ``random`` module's functions and
an unseeded ``random.Random()`` draw from a stream keyed by the run and the task, so a run
again, in another process, or a task run again on resume, draws the same values; code
outside node tasks keeps real randomness.
"""

from __future__ import annotations

import random
import threading
import uuid
from typing import Any

from graphflow_entropy_graphs import approval, one_ticket, tickets

from pytest_graphflow import DEFAULT_START, GraphRuntime, RealClock, Resume, VirtualClock
from pytest_graphflow.invariants import check_determinism_across_processes


def _events(backend: str, seed: int, graph: Any = None) -> tuple[str, dict[str, Any]]:
    # the clock's start is explicit: a default start follows a freeze_time around the run
    trace = GraphRuntime(clock=VirtualClock(DEFAULT_START), seed=seed, backend=backend).trace(
        (graph or tickets()).compile())
    return trace.to_json(), trace.result.data


def test_the_same_seed_gives_the_same_bytes(anyio_backend: str) -> None:
    first, data = _events(anyio_backend, 7)
    assert first == _events(anyio_backend, 7)[0]
    assert data["ticket"].startswith("T-")
    assert len(data["ticket"]) == 14
    a, b = sorted(data["draws"])
    assert a.split(":")[1:] != b.split(":")[1:]  # two tasks, two streams
    assert uuid.UUID(a.split(":")[-1]).version == 1
    assert _events(anyio_backend, 8)[1] != data  # another seed, other values


def test_two_fresh_processes_give_the_same_bytes() -> None:
    """Seed 001's "same seed, same bytes", across interpreters with other PYTHONHASHSEEDs."""
    assert check_determinism_across_processes(
        "graphflow_entropy_graphs:tickets", {}, 3, processes=2) == []


def test_a_resumed_task_draws_what_the_uninterrupted_run_drew(anyio_backend: str) -> None:
    runtime = GraphRuntime(clock=VirtualClock(), seed=4, backend=anyio_backend)
    paused = runtime.invoke(approval().compile())
    (pending,) = paused.interrupts.values()
    done = runtime.resume(paused.run_id, Resume("yes"))
    # the task ran again from the top on resume and drew the same ticket
    assert done.data["ticket"] == pending.payload["ticket"]

    straight = GraphRuntime(clock=VirtualClock(), seed=4, backend=anyio_backend,
                            on_interrupt=lambda i: "yes").invoke(approval().compile())
    assert straight.data == done.data


def test_code_outside_node_tasks_keeps_real_randomness(anyio_backend: str) -> None:
    random.seed(11)
    expected = [random.random() for _ in range(3)]
    random.seed(11)
    _events(anyio_backend, 7)  # its nodes draw from their own streams, not the global one
    assert [random.random() for _ in range(3)] == expected

    assert uuid.uuid4() != uuid.uuid4()
    assert random.Random().random() != random.Random().random()
    seen: list[uuid.UUID] = []
    worker = threading.Thread(target=lambda: seen.extend([uuid.uuid4(), uuid.uuid4()]))
    worker.start()
    worker.join()
    assert seen[0] != seen[1]


def test_a_run_without_a_seed_or_on_real_time_draws_real_entropy(anyio_backend: str) -> None:
    for make in (lambda: GraphRuntime(clock=VirtualClock(), backend=anyio_backend),
                 lambda: GraphRuntime(clock=RealClock(), seed=7, backend=anyio_backend)):
        one = make().invoke(one_ticket().compile()).data
        two = make().invoke(one_ticket().compile()).data
        assert one["ticket"] != two["ticket"]


def test_seed_getstate_and_setstate_in_a_node_act_on_the_tasks_stream(
        anyio_backend: str) -> None:
    from pydantic import BaseModel

    from pytest_graphflow import END, START, Graph

    class Draws(BaseModel):
        values: list[float] = []

    def node(state: Draws) -> dict[str, Any]:
        random.seed(5)
        first = random.random()
        saved = random.getstate()
        second = random.random()
        random.setstate(saved)
        return {"values": [first, second, random.random(), random.gauss(0.0, 1.0)]}

    g = Graph("reseeded", Draws)
    g.node("n", node).edge(START, "n").edge("n", END)
    graph = g.compile()
    random.seed(11)
    expected = random.random()
    random.seed(11)
    one = GraphRuntime(clock=VirtualClock(), seed=1, backend=anyio_backend).invoke(graph).data
    two = GraphRuntime(clock=VirtualClock(), seed=2, backend=anyio_backend).invoke(graph).data
    assert random.random() == expected  # the global generator was neither reseeded nor moved
    _, second, again, _ = one["values"]
    assert second == again
    assert one == two  # an explicit seed decides, whatever the run's seed


def test_uuid1_stays_owned_under_and_after_the_users_time_travel(anyio_backend: str) -> None:
    import time_machine
    from freezegun import freeze_time

    expected = _events(anyio_backend, 7)
    # both set uuid's time source to None while they travel and put back the one they found
    with freeze_time("2031-05-01"):
        assert _events(anyio_backend, 7) == expected
    with time_machine.travel("2032-06-01", tick=False):
        assert _events(anyio_backend, 7) == expected
    assert _events(anyio_backend, 7) == expected
    assert uuid.uuid1() != uuid.uuid1()
