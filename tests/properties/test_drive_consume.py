"""``drive`` takes a run's events a piece at a time (issue 29), as ``async for`` took them.

``_drive._consume`` advances the stream's runner itself and appends each piece's events at
once instead of taking them one ``__anext__`` at a time. For drawn graphs, run each way
(answering at once, pausing and resuming in the same runtime, in fresh runtimes), it must
give the same events byte for byte, the same run id, legs and result.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_graphflow._properties.runs import _drive as drive_module
from pytest_graphflow._properties.runs._drive import (
    Drive,
    _fresh_after,
    _on_owned_loop,
    _runtime,
    as_graph,
    drive,
)
from pytest_graphflow._properties.strategies._genspec import GraphSpec
from pytest_graphflow.strategies import graph_inputs, graphs, resume_answers


async def _reference_consume(stream: Any, d: Drive) -> None:
    """What ``drive`` did before: ``async for`` over the stream."""
    async for event in stream:
        if d.run_id is None and event.type == "run_start":
            d.run_id = event.run_id
        d.events.append(event)


def _drive_one(spec: GraphSpec, inp: Any, answers: Any, how: str) -> tuple[Any, ...]:
    graph = as_graph(spec)
    rt = _runtime(None, 0, wall=False)
    kw: dict[str, Any] = {"hook": True} if how == "hook" else {"max_legs": 1000}
    if how == "fresh":
        kw["fresh"] = _fresh_after

    async def run(r: Any) -> Drive:
        return await drive(r, graph, inp, answers, **kw)

    d: Drive = _on_owned_loop(rt, run)
    assert d.result is not None
    return ([e.model_dump_json() for e in d.events], d.run_id, d.legs, d.result.status,
            d.result.data)


@settings(max_examples=60, deadline=None)
@given(spec=graphs(max_nodes=6), data=st.data(), how=st.sampled_from(["hook", "same",
                                                                      "fresh"]))
def test_drive_takes_the_events_async_for_took(spec: GraphSpec, data: Any, how: str,
                                               reference: Any) -> None:
    inp = data.draw(graph_inputs(spec), label="input")
    answers = data.draw(resume_answers(spec), label="answers")
    lean = _drive_one(spec, inp, answers, how)
    with reference():
        assert _drive_one(spec, inp, answers, how) == lean


@pytest.fixture(scope="module")
def reference() -> Any:
    import contextlib

    @contextlib.contextmanager
    def swapped() -> Any:
        lean = drive_module._consume
        drive_module._consume = _reference_consume  # type: ignore[assignment]
        try:
            yield
        finally:
            drive_module._consume = lean

    return swapped
