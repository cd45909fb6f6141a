"""In a fresh interpreter: installing the package is all a user does (the ``pytest11`` entry
point loads the plugin), ``pytest_graphflow.assertions`` gets assertion rewriting, and the
plugin loads no Hypothesis profile behind the user's back."""

from __future__ import annotations

import pytest
from graphflow_plugin_helpers import Run, dedent


def test_a_fresh_interpreter_loads_the_plugin_and_rewrites_assertions(
    pytester: pytest.Pytester, run_subprocess: Run
) -> None:
    pytester.makepyfile(test_user=dedent("""
        import sys

        def test_x(graph_runtime):
            assert graph_runtime.seed is not None

        def test_assertions_module_is_rewritten():
            from pytest_graphflow import assertions
            loader = type(sys.modules["pytest_graphflow.assertions"].__loader__).__name__
            assert loader == "AssertionRewritingHook"

        def test_no_graphflow_profile_is_loaded(graph_runtime_factory):
            from hypothesis import settings
            assert not settings.get_current_profile_name().startswith("graphflow")
    """))
    # Registering too late would warn "Module already imported so cannot be rewritten".
    result = run_subprocess("-W", "error::pytest.PytestAssertRewriteWarning", "test_user.py")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["graphflow: session seed *", "plugins:*graphflow-*"])
