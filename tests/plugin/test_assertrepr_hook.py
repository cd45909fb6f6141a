"""``pytest_assertrepr_compare``: ``==`` between event sequences explains where they part."""

from __future__ import annotations

import pytest
from graphflow_plugin_helpers import Run, dedent

COMPARE = dedent("""
    from gf_graphs import fan

    def test_differ(graph_runtime_factory):
        left = graph_runtime_factory(seed=1).trace(fan(), {"n": 1})
        right = graph_runtime_factory(seed=1).trace(fan(), {"n": 2})
        assert left.events == right.events

    def test_same(graph_runtime_factory):
        left = graph_runtime_factory(seed=1).trace(fan(), {"n": 1})
        right = graph_runtime_factory(seed=1).trace(fan(), {"n": 1})
        assert left.events == right.events

    def test_not_events():
        assert [1, 2] == [1, 3]
""")


def test_event_sequences_get_a_divergence_report(graph_project: pytest.Pytester,
                                                 run: Run) -> None:
    graph_project.makepyfile(test_compare=COMPARE)
    result = run("test_compare.py")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([
        "E       AssertionError: assert event sequences differ at position 8 (left has 19 "
        "events, right has 19)",
        "E           left:  #8 node_end a patch={'log': ['a'], 'n': 2}",
        "E           right: #8 node_end a patch={'log': ['a'], 'n': 3}",
        "*window (positions 5..11):",
    ])
    # Other comparisons keep pytest's own explanation (the twin of the above).
    result.stdout.fnmatch_lines(["E       assert [1, 2] == [1, 3]", "*At index 1 diff: 2 != 3*"])
