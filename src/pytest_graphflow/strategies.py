"""Hypothesis strategies for graphs, their inputs, store faults, interrupt answers and schedules.

Every strategy here follows Hypothesis' conventions: a plural noun, the first argument
positional and the rest keyword-only, :class:`~pytest_graphflow.errors.InvalidArgument` for bad
arguments, and examples that shrink toward the simplest case::

    from hypothesis import given
    from pytest_graphflow.strategies import graphs, graph_inputs
    from pytest_graphflow.invariants import record_run_sync, assert_invariants

    @given(data=st.data(), spec=graphs(max_nodes=5))
    def test_runs_keep_the_invariants(data, spec):
        recording = record_run_sync(spec.compile(), data.draw(graph_inputs(spec)), seed=0)
        assert_invariants(recording)

``graphs()`` draws a :class:`GraphSpec`, a graph as data whose ``repr`` is the readable graph;
``spec.compile()`` builds the real :class:`~pytest_graphflow.CompiledGraph`. After
``import hypothesis`` (through the ``hypothesis`` entry point), ``st.from_type(GraphSpec)`` is
``graphs()``.
"""

from __future__ import annotations

from ._exports import show_public as _show_public
from ._properties.strategies._strategies import (
    Failure,
    GraphSpec,
    JoinSpec,
    PlannedFailure,
    Schedule,
    SpecNode,
    fault_plans,
    graph_inputs,
    graphs,
    resume_answers,
    schedules,
)

__all__ = [
    "Failure",
    "GraphSpec",
    "JoinSpec",
    "PlannedFailure",
    "Schedule",
    "SpecNode",
    "fault_plans",
    "graph_inputs",
    "graphs",
    "resume_answers",
    "schedules",
]

# reprs and pickles name this module, not the private one that defines each name
_show_public(__name__, globals(), __all__)
