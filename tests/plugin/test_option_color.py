"""Colour (issue 28): "event diffs, the failure section and the CLI use colour through
pytest's terminal writer, honouring `--color=yes|no|auto` and `NO_COLOR`"; acceptance: "With
`--color=no` or `NO_COLOR=1` no escape code is printed; with `--color=yes` the diff is
coloured."
"""

from __future__ import annotations

import pytest
from graphflow_plugin_helpers import Run, dedent

FAILING = dedent("""
    from gf_graphs import fan

    def test_events_differ(graph_runtime_factory):
        left = graph_runtime_factory(seed=1).trace(fan(), {"n": 1})
        right = graph_runtime_factory(seed=1).trace(fan(), {"n": 2})
        assert left.events == right.events

    def test_wrong_count(graph_runtime):
        trace = graph_runtime.trace(fan(), {"n": 1})
        assert trace.result.data["n"] == 99
""")

ESC = "\x1b["
RED, GREEN, BOLD, RESET = f"{ESC}31m", f"{ESC}32m", f"{ESC}1m", f"{ESC}0m"


@pytest.fixture
def project(graph_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in ("NO_COLOR", "FORCE_COLOR", "PY_COLORS"):
        monkeypatch.delenv(name, raising=False)
    graph_project.makepyfile(test_colour=FAILING)
    return graph_project


def _coloured(out: str) -> None:
    """The diff's two sides and the section's leg line, each in its colour."""
    assert f"{RED}  left:  #8 node_end a patch={{'log': ['a'], 'n': 2}}{RESET}" in out
    assert f"{GREEN}  right: #8 node_end a patch={{'log': ['a'], 'n': 3}}{RESET}" in out
    assert f"{BOLD}  > #8 node_end a" in out  # the first differing row of the window
    assert f"{GREEN}leg 1: run-" in out  # a completed leg of the failing test's section
    assert f"{BOLD}reproduce: pytest test_colour.py::test_wrong_count" in out


def test_color_yes_colours_the_event_diff_and_the_section(project: pytest.Pytester,
                                                          run: Run) -> None:
    result = run("--color=yes")
    result.assert_outcomes(failed=2)
    _coloured(result.stdout.str())


def test_color_no_prints_no_escape_code(project: pytest.Pytester, run: Run) -> None:
    result = run("--color=no")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert ESC not in out
    assert "  left:  #8 node_end a patch={'log': ['a'], 'n': 2}" in out  # the same text


def test_no_color_wins_over_force_color_under_auto(project: pytest.Pytester, run: Run,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    _coloured(run().stdout.str())  # the twin: FORCE_COLOR alone colours a pipe
    monkeypatch.setenv("NO_COLOR", "1")
    result = run()
    result.assert_outcomes(failed=2)
    assert ESC not in result.stdout.str()
