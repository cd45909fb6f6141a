"""Fixtures of the plugin tests: inner pytest sessions (``pytester``) with a small graph.

Every inner session runs with ``-p no:randomly -p no:cacheprovider`` (a reordering plugin or
a cache from an earlier run must not change what a test sees) and in-process unless the
test needs a fresh interpreter (entry-point loading, xdist workers).
"""

from __future__ import annotations

import pytest
from graphflow_plugin_helpers import ANYIO_CONFTEST, GRAPHS, INNER_ARGS, Run


@pytest.fixture
def graph_project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester project with ``gf_graphs.py`` (importable) and an anyio conftest."""
    pytester.makepyfile(gf_graphs=GRAPHS)
    pytester.makeconftest(ANYIO_CONFTEST)
    pytester.syspathinsert()
    return pytester


@pytest.fixture
def run(pytester: pytest.Pytester) -> Run:
    """Run an inner session in-process: ``run("-q", "--graphflow-seed=3")``."""

    def go(*args: str) -> pytest.RunResult:
        return pytester.runpytest(*INNER_ARGS, *args)

    return go


@pytest.fixture
def run_subprocess(pytester: pytest.Pytester) -> Run:
    """Run an inner session in a fresh interpreter (slow: only where it matters)."""

    def go(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess(*INNER_ARGS, *args)

    return go
