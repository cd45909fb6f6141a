"""The page in a real browser (issue 28): "a test opens a generated page headless, checks the
DOM (lanes, highlighted node, diff rows) and that the page makes no network request; a
screenshot is written as a test artefact." Debian's ``chromium``, over the DevTools protocol
on a pipe; skipped without it, failing under ``CI`` (which installs it, .ci/run).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from graphflow_chromium import open_page
from graphflow_html_graph import record

from pytest_graphflow._cli._main import main

PROBE = """(() => {
  const q = (s) => Array.from(document.querySelectorAll(s));
  const before = document.getElementById('shown').textContent;
  const type = document.getElementById('f-type');
  type.value = 'node_end';
  type.dispatchEvent(new Event('change'));
  const shown = document.getElementById('shown').textContent;
  const visible = q('#events tbody tr').filter((r) => !r.hidden).map((r) => r.dataset.type);
  document.querySelector('svg.graph .node[data-node="risk"]').dispatchEvent(new Event('click'));
  return {
    ready: document.body.dataset.ready,
    lanes: q('svg.timeline .lane').map((g) => g.dataset.node + ':' + g.getAttribute('class')),
    laneBox: q('svg.timeline .lane rect').map((r) => r.getBBox().width > 0),
    halted: q('svg.graph .node.halt').map((g) => g.dataset.node),
    taken: q('svg.graph .edge.taken').length,
    diffRows: q('tr.diff-row').map((r) => r.className),
    before: before, shown: shown, visible: visible,
    afterNodeClick: document.getElementById('shown').textContent,
    nodeFilter: document.getElementById('f-node').value,
  };
})()"""


def _from_sqlite(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    history, _ = record(answer=None, store_path=tmp_path / "runs.db")
    out = tmp_path / "page.html"
    assert main(["html", str(tmp_path / "runs.db"), history.run_id, "-o", str(out),
                 "--graph", "graphflow_html_graph:build"]) == 0
    return out


def _from_postgres(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """``graphflow html DSN RUN_ID --schema S``, the DSN with a password (trust auth ignores
    it): the command reads the run from PostgreSQL and never prints the password."""
    store = request.getfixturevalue("make_pg_store")()
    history, _ = record(answer=None, store=store)
    out = tmp_path / "page.html"
    dsn = f"{request.getfixturevalue('postgres_dsn')} password=hunter2-secret"
    capsys = request.getfixturevalue("capsys")
    assert main(["html", dsn, history.run_id, "-o", str(out), "--schema", store.schema,
                 "--graph", "graphflow_html_graph:build"]) == 0
    said = capsys.readouterr()
    assert "hunter2" not in said.out + said.err
    assert "password=***" not in said.out  # the page's path is named, not the store
    return out


def _from_history_file(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    history, _ = record(answer=None)
    source = history.save(tmp_path / "run.history.json")
    out = tmp_path / "page.html"
    assert main(["html", str(source), "-o", str(out), "--graph",
                 "graphflow_html_graph:build"]) == 0
    return out


@pytest.mark.parametrize("make", [_from_sqlite, _from_postgres, _from_history_file],
                         ids=["sqlite-store", "postgres-store", "history-file"])
def test_chromium_renders_the_page_with_lanes_the_paused_node_and_diffs_and_no_request(
        tmp_path: Path, request: pytest.FixtureRequest,
        make: Callable[[Path, pytest.FixtureRequest], Path]) -> None:
    page = make(tmp_path, request)
    shot = tmp_path / "page.png"
    loaded = open_page(page, probe=PROBE, screenshot=shot, profile=tmp_path / "profile")
    assert loaded.requests == [page.resolve().as_uri()]  # the file itself, nothing else
    assert loaded.failed == []
    assert loaded.messages == []  # no CSP violation, no script error
    found = loaded.probe
    assert found["ready"] == "yes"  # the page's script ran (its CSP hash matched)
    assert found["lanes"] == ["plan:lane done", "risk:lane done", "stock:lane done",
                              "review:lane paused"]
    assert all(found["laneBox"])
    assert found["halted"] == ["review"]
    assert found["taken"] == 5
    assert found["diffRows"] == ["diff-row added"] * 3
    assert found["before"] == "18"  # every event
    assert found["shown"] == "3"  # filtered to node_end: plan, risk, stock (review paused)
    assert set(found["visible"]) == {"node_end"}
    assert found["nodeFilter"] == "risk"
    assert found["afterNodeClick"] == "1"
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert shot.stat().st_size > 10_000
