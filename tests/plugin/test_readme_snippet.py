"""Issue 14: "the README's snippet does not run as written (undefined approval_graph, missing
imports, an unused fixture)". It is run here as a user would: pasted into a test file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from graphflow_plugin_helpers import Run

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_snippet_runs_as_written(pytester: pytest.Pytester, run: Run) -> None:
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert block is not None
    pytester.makepyfile(test_readme_approval=block.group(1))

    first = run("--snapshot-update", "test_readme_approval.py")
    first.assert_outcomes(passed=1)
    again = run("test_readme_approval.py")
    again.assert_outcomes(passed=1)


def test_the_ci_script_and_the_readme_agree_on_the_install_and_the_command() -> None:
    ci = (README.parent / ".ci" / "run").read_text()
    first_two = README.read_text().splitlines()[:2]
    assert '-e ".[test]"' in ci
    assert all('-e ".[test]"' in line for line in first_two)
    assert "pytest -n 2" in ci
    assert first_two[1].endswith("pytest -n 2`")
