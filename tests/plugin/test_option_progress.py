"""``--graphflow-progress`` (issue 28): "a line per phase under `-v`, and a live counter on a
TTY; silent under `-q` and in CI logs unless asked"; acceptance: "`-v` shows phase lines;
`-q` shows none"."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from graphflow_plugin_helpers import Run, dedent

EXPLORE_TEST = dedent("""
    from gf_graphs import fan
    from pytest_graphflow import explore

    def test_fan_agrees():
        explore(fan, {}, schedules=3).assert_ok()
""")

PHASE = "graphflow: explore: schedules done (3/3): every seed ended alike"


@pytest.fixture
def project(graph_project: pytest.Pytester) -> pytest.Pytester:
    graph_project.makepyfile(test_explore_fan=EXPLORE_TEST)
    return graph_project


def test_verbose_prints_a_line_per_phase(project: pytest.Pytester, run: Run) -> None:
    result = run("-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*{PHASE}", "*graphflow: explore: rerun done (1/1): seed 0 "
                                 "repeats"])
    assert "schedules 1/3" not in result.stdout.str()  # phases, not every run


@pytest.mark.parametrize("args", [("-q",), ()], ids=["quiet", "default-on-a-pipe"])
def test_quiet_or_a_pipe_prints_no_progress(project: pytest.Pytester, run: Run,
                                            args: tuple[str, ...]) -> None:
    result = run(*args)
    result.assert_outcomes(passed=1)
    assert "graphflow: explore" not in result.stdout.str()


def test_asked_for_lines_prints_them_even_under_quiet(project: pytest.Pytester,
                                                      run: Run) -> None:
    result = run("-q", "--graphflow-progress=lines")
    result.stdout.fnmatch_lines([f"*{PHASE}"])


def test_the_ini_key_asks_too(project: pytest.Pytester, run: Run) -> None:
    project.makeini("[pytest]\ngraphflow_progress = lines\n")
    result = run("-q")
    result.stdout.fnmatch_lines([f"*{PHASE}"])


def test_none_prints_nothing_even_under_verbose(project: pytest.Pytester, run: Run) -> None:
    result = run("-v", "--graphflow-progress=none")
    result.assert_outcomes(passed=1)
    assert "graphflow: explore" not in result.stdout.str()


def test_live_rewrites_a_counter_then_ends_its_line(project: pytest.Pytester,
                                                   run: Run) -> None:
    result = run("--graphflow-progress=live")
    result.assert_outcomes(passed=1)
    # each rewrite starts with "\r" (the output's lines are split there too)
    result.stdout.fnmatch_lines(["graphflow: explore: schedules 1/3 (seed 0) *",
                                 "graphflow: explore: schedules 2/3 (seed 1) *",
                                 "graphflow: explore: schedules 3/3 (seed 2) *",
                                 f"{PHASE} *"])


def test_a_bad_mode_is_a_usage_error(project: pytest.Pytester, run: Run) -> None:
    result = run("--graphflow-progress=loud")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*'loud' is not a progress mode; use one of auto, lines, "
                                 "live, none*"])


def _on_a_terminal(project: pytest.Pytester, **env: str) -> str:
    """An inner session (a fresh interpreter) with its output on a pseudo-terminal."""
    main, child = os.openpty()
    clean = {k: v for k, v in os.environ.items()
             if k not in ("CI", "NO_COLOR", "FORCE_COLOR", "PY_COLORS", "PYTEST_ADDOPTS")}
    try:
        subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", "-p",
                        "no:cacheprovider", "--color=no", "test_explore_fan.py"],
                       cwd=project.path, env={**clean, "TERM": "xterm", **env},
                       stdin=subprocess.DEVNULL, stdout=child, stderr=child, timeout=300,
                       check=False)
    finally:
        os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # Linux: EIO once the other end is closed and drained
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    return out.decode()


def test_auto_counts_live_on_a_terminal_but_not_in_ci(project: pytest.Pytester) -> None:
    live = _on_a_terminal(project)
    assert "\rgraphflow: explore: schedules 2/3 (seed 1)" in live
    assert f"\r{PHASE}" in live
    assert "1 passed" in live
    quiet = _on_a_terminal(project, CI="true")  # the twin: a CI log stays clean
    assert "graphflow: explore" not in quiet
    assert "1 passed" in quiet
