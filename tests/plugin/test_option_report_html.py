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
    result.stdout.fnmatch_lines([f"graphflow: 1 HTML page(s) of failing tests in {folder}"])


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
    graph_project.makepyfile(test_html_explore_page=EXPLORE_TESTS)
    result = run("-n", "2", "--graphflow-report=html:out/pages", "test_html_explore_page.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["created: 2/2 workers"])
    written = sorted((graph_project.path / "out" / "pages").iterdir())
    assert [p.name for p in written] == [
        "test_html_explore_page.py_test_leaky_graph_is_schedule_independent.html"]
    assert pages_named(result) == written  # the controller prints the workers' sections
    result.stdout.fnmatch_lines(["graphflow: 1 HTML page(s) of failing tests in */out/pages"])
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


CHECKER_TESTS = dedent("""
    import pytest
    from pydantic import BaseModel
    from pytest_graphflow import (END, START, Graph, History, Resume, VirtualClock,
                                  assert_replays, interrupt)
    from pytest_graphflow.invariants import (check_crash_recovery, check_determinism,
                                             check_interrupt_resume_equivalence)
    from pytest_graphflow.testing import RecordingRuntime

    class S(BaseModel):
        n: int = 0
        answer: str = ""

    COUNT = [0]  # module-level: leaks from run to run

    def leaky():
        def bump(s):
            COUNT[0] += 1
            return {"n": COUNT[0]}

        g = Graph("leaky", S)
        g.node("bump", bump)
        g.edge(START, "bump").edge("bump", END)
        return g.compile()

    def asking():
        calls = [0]

        def ask(s):
            calls[0] += 1  # counts the node's runs: a resume runs it again from the top
            return {"n": calls[0], "answer": str(interrupt("ok?", id="ok"))}

        g = Graph("asking", S)
        g.node("ask", ask, effect="human")
        g.edge(START, "ask").edge("ask", END)
        return g.compile()

    def charging():
        charges = [0]  # the outside world: survives the crash

        def charge(s):
            charges[0] += 1
            return {"n": charges[0]}

        g = Graph("charging", S)
        g.node("charge", charge, effect="external")
        g.edge(START, "charge").edge("charge", END)
        return g.compile()

    def test_determinism():
        assert check_determinism(leaky, {}) == []

    def test_equivalence():
        assert check_interrupt_resume_equivalence(asking, {}, {"ask:ok": "yes"}) == []

    def test_crash_recovery():
        assert check_crash_recovery(charging, {}) == []

    def test_replay():
        runtime = RecordingRuntime(clock=VirtualClock(), seed=1)
        runtime.invoke(leaky(), {})
        history = History.from_legs(runtime.recordings, [])
        assert_replays(history, leaky())
""")


@pytest.mark.parametrize(("test", "tool", "labels"), [
    ("test_determinism", "check_determinism", ("first run (asyncio)", "a repeated run")),
    ("test_equivalence", "check_interrupt_resume_equivalence",
     ("answering at once", "pausing and resuming")),
    ("test_crash_recovery", "check_crash_recovery",
     ("the run without the crash", "after ")),
    ("test_replay", "assert_replays", ("recorded", "replayed now")),
], ids=["determinism", "equivalence", "crash-recovery", "replay"])
def test_every_checker_that_compares_two_runs_puts_them_side_by_side(
        graph_project: pytest.Pytester, run: Run, test: str, tool: str,
        labels: tuple[str, str]) -> None:
    graph_project.makepyfile(test_html_checker_pages=CHECKER_TESTS)
    result = run("--graphflow-report=html:pages", f"test_html_checker_pages.py::{test}")
    result.assert_outcomes(failed=1)
    [page_path] = pages_named(result)
    page = page_path.read_text(encoding="utf-8")
    assert f'<div class="verdict">{tool}: ' in page
    first_pair = page.split('<section id="pair0"', 1)[1].split("</section>", 1)[0]
    sides = re.findall(r'<div class="run-side" data-side="\d"><h3>([^<]*)', first_pair)
    assert len(sides) == 2
    assert sides[0].startswith(labels[0])
    assert sides[1].startswith(labels[1])
    marked = re.findall(r'<tr class="first-diff" id="pair0-first-(\d)">', page)
    assert marked == ["0", "1"]


SCRIPT_TEST = dedent("""
    from pydantic import BaseModel
    from pytest_graphflow import END, START, Graph

    class S(BaseModel):
        note: str = ""

    def test_note(graph_runtime):
        g = Graph("notes", S)
        g.node("write", lambda s: {"note": "</td><script>alert(1)</script>"})
        g.edge(START, "write").edge("write", END)
        trace = graph_runtime.trace(g.compile(), {"note": "<b onclick=alert(2)>hi</b>"})
        assert trace.state.note == ""
""")


def test_a_test_s_state_with_markup_is_shown_as_text(graph_project: pytest.Pytester,
                                                      run: Run) -> None:
    graph_project.makepyfile(test_notes=SCRIPT_TEST)
    result = run("--graphflow-report=html:pages", "test_notes.py")
    result.assert_outcomes(failed=1)
    [path] = pages_named(result)
    page = path.read_text(encoding="utf-8")
    assert page.count("<script") == 1  # the page's own
    assert "<b onclick" not in page
    assert "&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
