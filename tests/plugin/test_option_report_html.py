"""``--graphflow-report=html:DIR`` (issue 28): "writes a page for every failing test that ran
a graph; the terminal report prints its path. For a divergence (determinism, explore,
equivalence, replay, crash recovery) the page puts the two runs side by side and marks the
first differing event. Works under xdist."
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from graphflow_plugin_helpers import Run, dedent

FAN_TESTS = dedent("""
    from gf_graphs import fan

    def test_wrong_count(graph_runtime):
        trace = graph_runtime.trace(fan(), {"n": 1})
        assert trace.result.data["n"] == 99

    def test_right_count(graph_runtime):
        trace = graph_runtime.trace(fan(), {"n": 1})
        assert trace.result.data["n"] == 2

    def test_fails_without_a_graph():
        assert 1 == 2
""")

PAGE_LINE = re.compile(r"^html page: (\S+)$", re.MULTILINE)


def pages_named(result: pytest.RunResult) -> list[Path]:
    return [Path(p) for p in PAGE_LINE.findall(result.stdout.str())]


def test_a_failing_test_that_ran_a_graph_gets_a_page_and_its_report_names_it(
        graph_project: pytest.Pytester, run: Run) -> None:
    graph_project.makepyfile(test_fan=FAN_TESTS)
    result = run("--graphflow-report=html:pages", "test_fan.py")
    result.assert_outcomes(passed=1, failed=2)
    folder = graph_project.path / "pages"
    written = sorted(folder.iterdir())
    assert [p.name for p in written] == ["test_fan.py_test_wrong_count.html"]
    assert pages_named(result) == written  # the report prints the page's path
    page = written[0].read_text(encoding="utf-8")
    assert "<h1>test_fan.py::test_wrong_count</h1>" in page
    assert 'class="lane done" data-task=' in page  # the timeline's lanes
    assert page.count('<g class="lane ') == 4  # plan, a, b, join
    assert 'data-node="join"' in page
    assert 'class="diff-row added"' in page
    assert "Content-Security-Policy" in page
    assert "default-src 'none'" in page
    result.stdout.fnmatch_lines(["seed: *", "reproduce: pytest test_fan.py::test_wrong_count*"])


def test_without_the_option_no_page_is_written(graph_project: pytest.Pytester,
                                               run: Run) -> None:
    graph_project.makepyfile(test_fan=FAN_TESTS)
    result = run("--graphflow-report=short", "test_fan.py")
    result.assert_outcomes(passed=1, failed=2)
    assert pages_named(result) == []
    assert not (graph_project.path / "pages").exists()


EXPLORE_TESTS = dedent("""
    import anyio
    from pydantic import BaseModel
    from pytest_graphflow import END, START, Graph, explore

    class S(BaseModel):
        seen: int = 0

    def leaky():
        order = []  # shared by the two parallel nodes: b reads what a left there

        async def a(s):
            order.append("a")
            return None

        async def b(s):
            return {"seen": len(order)}

        g = Graph("leaky", S)
        g.node("a", a).node("b", b)
        g.edge(START, ["a", "b"]).edge(["a", "b"], END)
        return g.compile()

    def tidy():
        async def a(s):
            return None

        async def b(s):
            return {"seen": 1}

        g = Graph("tidy", S)
        g.node("a", a).node("b", b)
        g.edge(START, ["a", "b"]).edge(["a", "b"], END)
        return g.compile()

    def test_leaky_graph_is_schedule_independent():
        explore(leaky, seeds=range(20), schedules=20).assert_ok()

    def test_tidy_graph_is_schedule_independent():
        explore(tidy, seeds=range(20), schedules=20).assert_ok()
""")


def test_a_failing_explore_under_xdist_gets_one_page_with_both_runs_and_the_first_difference(
        graph_project: pytest.Pytester, run: Run) -> None:
    pytest.importorskip("xdist")
    graph_project.makepyfile(test_explore=EXPLORE_TESTS)
    result = run("-n", "2", "--graphflow-report=html:out/pages", "test_explore.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["created: 2/2 workers"])
    written = sorted((graph_project.path / "out" / "pages").iterdir())
    assert [p.name for p in written] == [
        "test_explore.py_test_leaky_graph_is_schedule_independent.html"]
    assert pages_named(result) == written
    page = written[0].read_text(encoding="utf-8")
    assert page.count('class="run-side"') == 2  # both runs, side by side
    assert "seed 0 (baseline)" in page
    assert "explore: seed " in page
    marked = re.findall(r'<tr class="first-diff" id="pair0-first-(\d)"><td>(\d+)</td>', page)
    assert [side for side, _ in marked] == ["0", "1"]  # marked in both columns
    assert marked[0][1] == marked[1][1]  # the same event


@pytest.mark.parametrize("value", ["html:", "html:  ", "htm:pages", "fully", ""],
                         ids=["no-folder", "blank-folder", "misspelt-html", "unknown-mode",
                              "empty"])
def test_a_bad_report_value_is_a_usage_error_naming_the_modes(
        graph_project: pytest.Pytester, run: Run, value: str) -> None:
    graph_project.makepyfile(test_fan=FAN_TESTS)
    result = run(f"--graphflow-report={value}", "test_fan.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*use 'short', 'full' or 'html:DIR'*"])
