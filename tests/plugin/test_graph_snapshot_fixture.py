"""The ``graph_snapshot`` fixture: syrupy's ``snapshot`` storing a real run's events as text,
stable from session to session because the runtime is deterministic."""

from __future__ import annotations

import sys

import pytest
from graphflow_plugin_helpers import Run, dedent

TEST_FILE = dedent("""
    import pytest
    from gf_graphs import fan

    @pytest.mark.graphflow(seed=3)
    def test_events(graph_runtime, graph_snapshot):
        assert graph_runtime.trace(fan(), {{"n": {n}}}).events == graph_snapshot
""")


@pytest.fixture
def project(graph_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # the test file changes between runs
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)  # the inner session is not an xdist worker
    return graph_project


def test_snapshot_of_a_run_is_created_then_matches(project: pytest.Pytester, run: Run) -> None:
    project.makepyfile(test_flow=TEST_FILE.format(n=1))
    run("--snapshot-update").assert_outcomes(passed=1)
    stored = project.path / "__snapshots__" / "test_flow" / "test_events.events.txt"
    text = stored.read_text(encoding="utf-8")
    assert "run_start graph_id=fan" in text
    assert "run_end" in text
    # Another session, another random session seed: the marker's seed keeps the bytes.
    run().assert_outcomes(passed=1)
    assert stored.read_text(encoding="utf-8") == text


def test_a_changed_run_fails_the_snapshot(project: pytest.Pytester, run: Run) -> None:
    """Twin: a different input gives a different stream, and the diff shows it."""
    project.makepyfile(test_flow=TEST_FILE.format(n=1))
    run("--snapshot-update").assert_outcomes(passed=1)
    project.makepyfile(test_flow=TEST_FILE.format(n=5))
    changed = run()
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(["*node_end a*patch=*6*", "*1 snapshot failed*"])
