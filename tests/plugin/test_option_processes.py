"""``--graphflow-processes=N``: each run of a passing test is replayed in N fresh interpreters
(``PYTHONHASHSEED`` 1..N) and must give the same bytes; a failing case with its passing twin."""

from __future__ import annotations

import pytest
from graphflow_plugin_helpers import Run, dedent

GRAPH = '''
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph

TAGS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


class Tags(BaseModel):
    tags: list[str] = []


def build(name="tags"):
    g = Graph(name, Tags)
    g.node("collect", lambda s: {{"tags": {order}(set(TAGS))}})
    g.edge(START, "collect")
    g.edge("collect", END)
    return g.compile()


GRAPH = build()
'''

TEST = dedent('''
    from {module} import GRAPH

    def test_tags(graph_runtime):
        assert graph_runtime.trace(GRAPH).status == "completed"

    def test_graph_built_in_the_test_is_skipped(graph_runtime):
        from {module} import build
        assert graph_runtime.trace(build("local")).status == "completed"
''')


def _project(pytester: pytest.Pytester, module: str, order: str) -> None:
    # Workers live for the whole session: each case gets its own module name.
    pytester.makepyfile(**{module: GRAPH.format(order=order),
                           "test_tags": TEST.format(module=module)})
    pytester.syspathinsert()


def test_hash_order_dependence_fails_the_test(pytester: pytest.Pytester, run: Run) -> None:
    _project(pytester, "xp_tags_unordered", "list")
    result = run("--graphflow-processes=2")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines([
        "*--graphflow-processes: run run-* of this test took another path in a fresh "
        "interpreter with PYTHONHASHSEED=*",
        "*diverged at event 3 of 7 (leg 1, step 0, node 'collect'):",
        "*recorded: #3 node_end collect patch={'tags': [[]*",
        "graphflow: 1 run(s) replayed in fresh interpreters, 1 skipped (their graph is not "
        "held by an importable module)",
    ])


def test_the_fixed_twin_passes(pytester: pytest.Pytester, run: Run) -> None:
    _project(pytester, "xp_tags_ordered", "sorted")
    result = run("--graphflow-processes=2")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["graphflow: 1 run(s) replayed in fresh interpreters, 1 "
                                 "skipped*"])


def test_without_the_option_the_order_dependence_passes(pytester: pytest.Pytester,
                                                        run: Run) -> None:
    _project(pytester, "xp_tags_unordered_off", "list")
    run().assert_outcomes(passed=2)


@pytest.mark.parametrize("value", ["1", "two"])
def test_a_bad_count_is_a_usage_error(pytester: pytest.Pytester, run: Run, value: str) -> None:
    result = run(f"--graphflow-processes={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--graphflow-processes={value}: give the number of fresh "
                                 "interpreters to compare, an integer >= 2*"])
