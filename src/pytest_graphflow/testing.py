"""Helpers for testing graphs outside the fixtures: fresh deterministic runtimes on demand.

``make_graph_runtime(seed=..., start=..., store=...)`` builds what the ``graph_runtime``
fixture gives a test; :class:`GraphRuntimeFactory` builds one per call, which is what a
Hypothesis ``@given`` test wants (each example gets a fresh clock, store and runtime). Inside
pytest, the ``graph_runtime_factory`` fixture is such a factory whose seed and store follow
the running test (its seed, its ``@pytest.mark.graphflow`` marker, ``--graphflow-store``)::

    from hypothesis import given, strategies as st

    @given(n=st.integers(0, 10))
    def test_counter(graph_runtime_factory, n):
        runtime = graph_runtime_factory()
        assert runtime.trace(counter, {"n": n}).state.n == n + 1

:class:`RecordingRuntime` is the runtime both hand out: a :class:`GraphRuntime` that also keeps
a :class:`RunRecording` (graph, events, path) of each run it performed.

:func:`register_profiles` registers the Hypothesis settings profiles ``graphflow-ci`` (a
2-core CI runner: 30 derandomized examples, no deadline, no example database, the
``@reproduce_failure`` blob printed, ``too_slow`` suppressed), ``graphflow-dev`` (Hypothesis'
defaults without the deadline) and ``graphflow-thorough`` (1000 examples, no deadline). It
loads none of them; a ``conftest.py`` picks one::

    import os
    from hypothesis import settings
    from pytest_graphflow.testing import register_profiles

    register_profiles()
    settings.load_profile("graphflow-ci" if os.environ.get("CI") else "graphflow-dev")
"""

from __future__ import annotations

from ._exports import show_public as _show_public
from ._plugin._runtime import (
    GraphRuntimeFactory,
    RecordingRuntime,
    RunRecording,
    make_graph_runtime,
)
from ._properties.strategies._profiles import register_profiles

__all__ = [
    "GraphRuntimeFactory",
    "RecordingRuntime",
    "RunRecording",
    "make_graph_runtime",
    "register_profiles",
]

# reprs and pickles name this module, not the private one that defines each name
_show_public(__name__, globals(), __all__)
