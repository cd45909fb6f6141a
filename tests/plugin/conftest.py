"""Fixtures of the plugin tests: inner pytest sessions (``pytester``) with a small graph.

Every inner session runs with ``-p no:randomly -p no:cacheprovider`` (a reordering plugin or
a cache from an earlier run must not change what a test sees) and in-process unless the
test needs a fresh interpreter (entry-point loading, xdist workers).
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil

import pytest
from graphflow_plugin_helpers import ANYIO_CONFTEST, GRAPHS, INNER_ARGS, Run

import pytest_graphflow


def _import_everything() -> None:
    """Import every module of the package in this (outer) process first.

    ``pytester``'s in-process sessions drop from ``sys.modules`` whatever they imported, and
    the package imports its parts lazily: a module first imported inside an inner session
    (say ``_graph._builder``) would be imported again by the next one, and its classes would
    no longer be the ones the plugin of the outer process holds (``isinstance`` fails), so a
    test's result would depend on which tests ran before it.
    """
    for info in pkgutil.walk_packages(pytest_graphflow.__path__, "pytest_graphflow."):
        with contextlib.suppress(ImportError):  # an optional extra that is not installed
            importlib.import_module(info.name)


_import_everything()


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
