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
        "graphflow: 1 run(s) replayed in fresh interpreters, 1 skipped, because:",
        "graphflow:   1 skipped: a run whose graph is not held by an importable module "
        "(built inside the test)",
    ])


def test_the_fixed_twin_passes(pytester: pytest.Pytester, run: Run) -> None:
    _project(pytester, "xp_tags_ordered", "sorted")
    result = run("--graphflow-processes=2")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["graphflow: 1 run(s) replayed in fresh interpreters, 1 "
                                 "skipped*"])


def test_verbose_shows_the_replays_as_a_phase(pytester: pytest.Pytester, run: Run) -> None:
    """Progress (issue 28): the cross-process replays are long work, a phase line under -v."""
    _project(pytester, "xp_tags_progress", "sorted")
    result = run("--graphflow-processes=2", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*graphflow: --graphflow-processes: runs replayed done (1/1): 1 in 2 fresh "
        "interpreters, 0 skipped",
        "*graphflow: --graphflow-processes: runs replayed done (1/1): 0 in 2 fresh "
        "interpreters, 1 skipped",  # the graph built in the test
    ])


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


# Two module-level graphs built by one builder share their id and revision; the node of each
# sends through a module-level fake that the suite empties before every test.
MAIL_APP = '''
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph


class Outbox:
    def __init__(self):
        self.sent = []


OUTBOX = Outbox()


class Mail(BaseModel):
    to: str = ""
    sent: int = 0


def build(copies):
    def send(state):
        OUTBOX.sent.extend([state.to] * copies)
        return {"sent": len(OUTBOX.sent)}

    g = Graph("mail", Mail)
    g.node("send", send)
    g.edge(START, "send").edge("send", END)
    return g.compile()


ONE = build(1)
TWO = build(2)
'''

MAIL_TESTS = dedent('''
    import pytest
    from {module} import ONE, OUTBOX, TWO

    @pytest.fixture(autouse=True)
    def empty_outbox():
        OUTBOX.sent.clear()

    @pytest.mark.parametrize("to", ["ann", "bob", "cy"])
    def test_one_copy(graph_runtime, to):
        assert graph_runtime.trace(ONE, {{"to": to}}).state.sent == 1

    @pytest.mark.parametrize("to", ["ann", "bob", "cy"])
    def test_two_copies(graph_runtime, to):
        assert graph_runtime.trace(TWO, {{"to": to}}).state.sent == 2
''')


def _mail_project(pytester: pytest.Pytester, module: str) -> None:
    pytester.makepyfile(**{module: MAIL_APP, "test_mail": MAIL_TESTS.format(module=module)})
    pytester.syspathinsert()


def test_replays_run_the_graph_the_test_ran_in_a_fresh_state(pytester: pytest.Pytester,
                                                             run: Run) -> None:
    """Each replay runs the very graph object the test ran (not another module-level graph
    with the same id and revision), with its module imported afresh (the fake starts empty, as
    the suite's fixture makes it in the test)."""
    _mail_project(pytester, "xp_mail_twins")
    run().assert_outcomes(passed=6)  # the suite passes
    result = run("--graphflow-processes=2")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["graphflow: 6 run(s) replayed in fresh interpreters, 0 "
                                 "skipped*"])
    # Twice in a row: workers outlive a session, and must not carry the fake's state along.
    run("--graphflow-processes=2").assert_outcomes(passed=6)


def test_the_summary_reaches_the_terminal_under_xdist(pytester: pytest.Pytester,
                                                      run: Run) -> None:
    pytest.importorskip("xdist")
    _project(pytester, "xp_tags_xdist", "sorted")
    result = run("-n", "2", "--graphflow-processes=2")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "graphflow: 1 run(s) replayed in fresh interpreters, 1 skipped, because:",
        "graphflow:   1 skipped: a run whose graph is not held by an importable module "
        "(built inside the test)"])
