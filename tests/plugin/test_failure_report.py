"""The ``graphflow`` section of a failing test's report: seed, reproduce command (which does
reproduce), the last run's path as Mermaid, its last events; and the JUnit property."""

from __future__ import annotations

import re
import shlex

import pytest
from graphflow_plugin_helpers import Run, dedent

from pytest_graphflow._plugin._seed import test_seed as per_test_seed

FAILING = dedent("""
    import pytest
    from gf_graphs import fan

    def test_fails(graph_runtime, graph_seed):
        trace = graph_runtime.trace(fan(), {"n": 1})
        # the run id derives from the seed: the failure message shows which seed ran
        assert trace.result.run_id == "run-expected"

    def test_passes(graph_runtime):
        assert graph_runtime.trace(fan()).status == "completed"

    def test_fails_without_graphflow():
        assert 1 == 2
""")

SECTION = re.compile(r"^-+ graphflow -+$", re.MULTILINE)


def section_of(result: pytest.RunResult) -> list[str]:
    """The lines of the (first) graphflow section in the output."""
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if SECTION.match(line))
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith(("___", "===", "---"))), len(lines))
    return lines[start + 1:end]


def test_a_failing_test_reports_seed_command_path_and_events(graph_project: pytest.Pytester,
                                                             run: Run) -> None:
    graph_project.makepyfile(test_flow=FAILING)
    result = run("--graphflow-seed=77", "--graphflow-report=full", "test_flow.py")
    result.assert_outcomes(passed=1, failed=2)
    seed = per_test_seed(77, "test_flow.py::test_fails")
    assert len(SECTION.findall(result.stdout.str())) == 1  # not for the other failure
    result.stdout.fnmatch_lines([
        "*- graphflow -*",
        f"seed: {seed} (session seed 77 + crc32 of the node id, modulo 2**32)",
        "reproduce: pytest test_flow.py::test_fails --graphflow-seed=77",
        "last run: run-*, 1 leg(s)",
        "leg 1: run-* of graph 'fan': completed, * events",
        "path: START -> plan -> a -> join -> END; plan -> b -> join",
        "mermaid:",
        "  flowchart TD",
        "      START([START])",
        "      n_plan[\"plan\"]",
        "*linkStyle * stroke-width:4px",
        "*events*:",
        "*node_end join*",
        "  #* run_end completed state=*",
    ])


def test_a_passing_test_has_no_section(graph_project: pytest.Pytester, run: Run) -> None:
    """Twin: passing tests (shown with -rA) carry no graphflow section."""
    graph_project.makepyfile(test_flow=FAILING)
    result = run("-rA", "-k", "test_passes", "test_flow.py")
    result.assert_outcomes(passed=1)
    assert SECTION.search(result.stdout.str()) is None


def test_the_printed_command_reproduces_the_seed_and_the_failure(
    graph_project: pytest.Pytester, run: Run
) -> None:
    graph_project.makepyfile(test_flow=FAILING)
    first = run("test_flow.py")  # random session seed
    lines = section_of(first)
    command = next(line for line in lines if line.startswith("reproduce: "))
    argv = shlex.split(command.removeprefix("reproduce: "))
    assert argv[0] == "pytest"
    assert argv[1] == "test_flow.py::test_fails"
    again = run(*argv[1:])
    again.assert_outcomes(failed=1)
    assert section_of(again)[0] == lines[0]  # the same seed line
    failure = [line for line in first.stdout.lines if line.startswith("E ") and "run-" in line]
    assert len(failure) == 3  # AssertionError line and the two sides of the diff
    assert failure == [line for line in again.stdout.lines if line.startswith("E ")
                       and "run-" in line]


def test_a_marker_seed_is_named_as_the_origin(graph_project: pytest.Pytester, run: Run) -> None:
    graph_project.makepyfile(test_fixed=dedent("""
        import pytest

        @pytest.mark.graphflow(seed=5, store="sqlite", checkpoint_policy="never")
        def test_fixed(graph_runtime):
            assert False
    """))
    result = run("--graphflow-seed=1", "test_fixed.py")
    result.stdout.fnmatch_lines([
        "seed: 5 (fixed by @pytest.mark.graphflow(seed=5))",
        "reproduce: pytest test_fixed.py::test_fixed --graphflow-seed=1",
        "store: sqlite, checkpoint_policy: never",
        "runs: none recorded (the test failed before its runtime ran a graph)",
    ])


def test_a_run_that_raised_is_reported_with_its_error(graph_project: pytest.Pytester,
                                                      run: Run) -> None:
    graph_project.makepyfile(test_raised=dedent("""
        from gf_graphs import fan

        def test_rejected(graph_runtime, store_faults):
            store_faults.reject_save(nth=3)
            graph_runtime.trace(fan())
    """))
    result = run("--graphflow-seed=3", "--graphflow-store=sqlite", "--graphflow-report=full",
                 "test_raised.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "reproduce: pytest test_raised.py::test_rejected --graphflow-seed=3 "
        "--graphflow-store=sqlite",
        "leg 1: run-* of graph 'fan': *",
        "raised: StoreFault: *",
        "nodes completed: plan, *",
        "path: START -> plan*",
    ])


def test_the_command_is_relative_to_where_pytest_ran(
    graph_project: pytest.Pytester, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph_project.makeini("[pytest]\n")
    sub = graph_project.mkpydir("sub")
    (sub / "test_deep.py").write_text("def test_deep(graph_seed):\n    assert False\n")
    monkeypatch.chdir(sub)
    result = run("--graphflow-seed=8", "test_deep.py")
    result.stdout.fnmatch_lines(["reproduce: pytest test_deep.py::test_deep --graphflow-seed=8"])


def test_the_seed_is_a_junit_property(graph_project: pytest.Pytester, run: Run) -> None:
    graph_project.makepyfile(test_flow=FAILING)
    run("--graphflow-seed=77", "--junitxml=out.xml", "test_flow.py")
    xml = (graph_project.path / "out.xml").read_text()
    for name in ("test_fails", "test_passes"):
        seed = per_test_seed(77, f"test_flow.py::{name}")
        assert f'<property name="graphflow_seed" value="{seed}" />' in xml
    assert xml.count("graphflow_seed") == 2  # not on the test without graphflow fixtures


def test_a_run_with_another_seed_names_it(graph_project: pytest.Pytester, run: Run) -> None:
    graph_project.makepyfile(test_other=dedent("""
        from gf_graphs import fan

        def test_other_seed(graph_runtime_factory):
            graph_runtime_factory(seed=12345).trace(fan())
            assert False
    """))
    result = run("test_other.py")
    result.stdout.fnmatch_lines(["leg 1: run-* of graph 'fan' (runtime seed 12345): *"])
