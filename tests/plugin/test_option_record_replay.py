"""``--graphflow-record=DIR`` writes every run of a test as a history file;
``--graphflow-replay=DIR`` runs each history file under DIR as a test against the current code.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from graphflow_plugin_helpers import Run, dedent

from pytest_graphflow import load_history

SHOP = dedent('''
    import os

    from pydantic import BaseModel

    from pytest_graphflow import END, START, Graph, interrupt


    class Order(BaseModel):
        amount: int = 0
        receipt: str = ""


    def route(s):
        return "review" if s.amount < int(os.environ.get("SHOP_LIMIT", "1000")) else "reject"


    def review(s):
        return {"receipt": "ok" if interrupt(s.amount, id="approve") == "yes" else "no"}


    def charge(s):
        if os.environ.get("SHOP_FORBID"):
            raise AssertionError("the external node's code ran during a replay")
        return {"receipt": s.receipt + ":charged"}


    def build():
        g = Graph("shop", Order)
        g.node("plan", lambda s: None)
        g.node("review", review, effect="human")
        g.node("charge", charge, effect="external")
        g.node("reject", lambda s: {"receipt": "rejected"})
        g.edge(START, "plan")
        g.branch("plan", route, {"review": "review", "reject": "reject"})
        g.edge("review", "charge")
        g.edge("charge", END)
        g.edge("reject", END)
        return g.compile()


    GRAPH = build()
''')

TESTS = dedent('''
    from pytest_graphflow import Resume
    from shop import GRAPH

    def test_checkout(graph_runtime):
        paused = graph_runtime.trace(GRAPH, {"amount": 120})
        done = graph_runtime.resume_trace(paused.result.run_id, Resume("yes"))
        assert done.result.data["receipt"] == "ok:charged"

    def test_no_graph_runs():
        assert True
''')


@pytest.fixture
def recorded(pytester: pytest.Pytester, run: Run) -> Path:
    pytester.makepyfile(shop=SHOP, test_shop=TESTS)
    pytester.syspathinsert()
    result = run("--graphflow-record=histories", "test_shop.py")
    result.assert_outcomes(passed=2)
    return pytester.path / "histories"


def test_record_writes_one_history_per_run(recorded: Path) -> None:
    files = sorted(recorded.rglob("*.history.json"))
    assert [f.parent.name for f in files] == ["test_shop.py_test_checkout"]
    history = load_history(files[0])
    assert history.source == "test_shop.py::test_checkout"
    assert history.graph_ref == "shop:GRAPH"
    assert history.status == "completed"
    ((key, answer),) = [item for resume in history.resumes for item in resume.items()]
    assert key.endswith(":approve")
    assert answer == "yes"


def test_without_the_option_nothing_is_written(pytester: pytest.Pytester, run: Run) -> None:
    pytester.makepyfile(shop=SHOP, test_shop=TESTS)
    pytester.syspathinsert()
    run("test_shop.py").assert_outcomes(passed=2)
    assert not list(pytester.path.rglob("*.history.json"))


def test_replay_passes_while_the_code_decides_the_same(
    recorded: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_FORBID", "1")  # the external node must not run
    result = run("-v", "--graphflow-replay=histories", "histories")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*run-*.history.json::run-* PASSED*"])


def test_replay_fails_with_a_diff_once_the_code_decides_otherwise(
    recorded: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_FORBID", "1")
    monkeypatch.setenv("SHOP_LIMIT", "100")
    result = run("--graphflow-replay=histories")  # the folder is collected with the rest
    result.assert_outcomes(failed=2, passed=1)  # the replay, and test_checkout itself
    result.stdout.fnmatch_lines([
        "*diverged at event 4 of * (leg 1, step 0, node 'plan'):",
        "  recorded: #4 edge_transition plan->review",
        "  now:      #4 edge_transition plan->reject",
        "  target: 'review' != 'reject'",
    ])


def test_replay_of_a_missing_folder_is_a_usage_error(pytester: pytest.Pytester, run: Run) -> None:
    result = run("--graphflow-replay=nowhere")
    result.stderr.fnmatch_lines(["*--graphflow-replay=nowhere: * is not a folder*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


FACTORY_TESTS = dedent('''
    from pytest_graphflow import Resume
    from shop import build

    def test_checkout(graph_runtime):
        graph = build()  # no module holds this graph object, but one of the same revision
        paused = graph_runtime.trace(graph, {"amount": 120})
        graph_runtime.resume_trace(paused.result.run_id, Resume("yes"))
''')


def test_the_ini_key_names_the_graph_of_histories_without_one(
    pytester: pytest.Pytester, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(shop=SHOP.replace("GRAPH = build()", ""), test_shop=FACTORY_TESTS)
    pytester.syspathinsert()
    run("--graphflow-record=histories", "test_shop.py").assert_outcomes(passed=1)
    (path,) = (pytester.path / "histories").rglob("*.history.json")
    assert load_history(path).graph_ref is None
    monkeypatch.setenv("SHOP_FORBID", "1")

    result = run("--graphflow-replay=histories", "histories")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*does not say where its graph is: name it in the ini key "
                                 "graphflow_replay_graphs, a line 'shop = module:attr'*"])

    pytester.makeini("[pytest]\ngraphflow_replay_graphs =\n    shop = shop:build\n")
    run("--graphflow-replay=histories", "histories").assert_outcomes(passed=1)
