"""A harness made by ``graph_runtime.langgraph(app)`` goes, with its saver and its events, as
soon as nothing holds it, freed by reference counting alone (issue 29, the bridge row).

The runtime records each leg the harness runs, and the harness reaches those recordings
through its ``on_leg``; a recorded leg held its harness strongly (for
``--graphflow-processes``), so every bridge run left the harness, its saver and its events as
cyclic garbage (~110 objects a run of the benchmark's agent, a collection every other run).
A leg holds its harness weakly now (the plugin keeps the harnesses ``--graphflow-processes``
replays).
"""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest
from graphs import fan_out

from pytest_graphflow.testing import make_graph_runtime


def _app() -> Any:
    """The app, compiled once and run twice (LangGraph's first runs of an app make its own
    caches), as a module-level app of a test suite is."""
    compiled = fan_out().compile()
    for _ in range(2):
        make_graph_runtime(seed=0).langgraph(compiled).trace({"log": []})
    return compiled


def harness_goes(app: Any) -> None:
    """A bridge run's harness, saver and events go by reference counting alone."""
    gc.collect()
    gc.disable()
    try:
        runtime = make_graph_runtime(seed=3)
        harness = runtime.langgraph(app)
        trace = harness.trace({"log": []})
        leg = runtime.last_recording
        assert leg is not None
        assert leg.graph.harness is harness  # the leg names its harness
        gone = weakref.ref(harness)
        saver = weakref.ref(harness.saver)
        del harness
        assert gone() is None
        assert leg.graph.harness is None
        assert [e.type for e in leg.events] == [e.type for e in trace.events]  # record kept
        del runtime, leg, trace
        assert saver() is None
        assert gc.collect() == 0
    finally:
        gc.enable()


def one_line_goes(app: Any) -> None:
    """``make_graph_runtime(...).langgraph(app).trace(...)`` leaves no cyclic garbage."""
    gc.collect()
    gc.disable()
    try:
        make_graph_runtime(seed=3).langgraph(app).trace({"log": []})
        assert gc.collect() == 0
    finally:
        gc.enable()


_ALONE = """
import sys
sys.path[:0] = sys.argv[1:3]
import test_bridge_lifetime as t
t.{check}(t._app())
print("held")
"""


@pytest.mark.parametrize("check", ["harness_goes", "one_line_goes"])
def test_a_bridge_run_leaves_no_cyclic_garbage(check: str) -> None:
    # In a process of its own: a collection counts every thread's garbage, and a worker's
    # earlier tests leave threads (pools, savers) that make some while this one runs.
    here = Path(__file__).resolve().parent
    done = subprocess.run(
        [sys.executable, "-c", _ALONE.format(check=check), str(here), str(here.parent)],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "held", done.stdout
