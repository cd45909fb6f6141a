"""``invoke`` takes a hot path that builds no events; ``trace`` builds them. Both must leave
exactly the same run behind: result, and every checkpoint the store holds (ids, steps,
statuses, states, tasks and the ``next_seq`` that numbers the events of a resumed leg).
Also over the SQLite store, which takes the general path even for ``invoke``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_graphflow import (
    GraphRuntime,
    InMemoryCheckpointStore,
    Resume,
    SQLiteCheckpointStore,
    VirtualClock,
)
from pytest_graphflow.strategies import GraphSpec, graph_inputs, graphs


def _checkpoints(store: Any) -> list[dict[str, Any]]:
    import anyio

    async def read() -> list[dict[str, Any]]:
        return [cp.model_dump(mode="json") for cp in await store.list()]

    return anyio.run(read)


def _run(spec: GraphSpec, inp: dict[str, Any], seed: int, *, traced: bool,
         store: Any) -> tuple[list[Any], list[dict[str, Any]]]:
    graph = spec.compile()
    runtime = GraphRuntime(store=store, clock=VirtualClock(patch_wall_clock=False), seed=seed)
    run = runtime.trace if traced else runtime.invoke
    result = run(graph, inp)
    results = []
    for _ in range(3):  # answer pending interrupts, resume failures: follow the run's legs
        r = result.result if traced else result
        results.append((r.status, r.data, r.step, r.checkpoint_id, sorted(r.interrupts)))
        if r.status == "interrupted":
            answers = {key: "yes" for key in r.interrupts}
            resume = runtime.resume_trace if traced else runtime.resume
            result = resume(r.run_id, Resume(answers=answers))
        elif r.status == "failed":
            resume = runtime.resume_trace if traced else runtime.resume
            result = resume(r.run_id)
        else:
            break
    return results, _checkpoints(store)


@settings(max_examples=40)
@given(spec=graphs(), data=st.data(), seed=st.integers(0, 2**16))
def test_invoke_leaves_the_same_run_as_trace(spec: GraphSpec, data: st.DataObject,
                                             seed: int) -> None:
    inp = data.draw(graph_inputs(spec), label="input")
    fast = _run(spec, inp, seed, traced=False, store=InMemoryCheckpointStore())
    full = _run(spec, inp, seed, traced=True, store=InMemoryCheckpointStore())
    assert fast == full, spec


@settings(max_examples=15)
@given(spec=graphs(max_nodes=4), data=st.data(), seed=st.integers(0, 2**16))
def test_invoke_over_sqlite_leaves_the_same_run_as_in_memory(
    spec: GraphSpec, data: st.DataObject, seed: int
) -> None:
    inp = data.draw(graph_inputs(spec), label="input")
    memory = _run(spec, inp, seed, traced=False, store=InMemoryCheckpointStore())
    sqlite = _run(spec, inp, seed, traced=False, store=SQLiteCheckpointStore(":memory:"))
    assert memory == sqlite, spec
