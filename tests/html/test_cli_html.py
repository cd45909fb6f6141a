"""``graphflow html`` (issue 28): "one self-contained HTML file per run ... from any store
(`graphflow html STORE RUN_ID -o run.html`) and from a history file."
"""

from __future__ import annotations

from pathlib import Path

import pytest
from graphflow_html_graph import record

from pytest_graphflow._cli._main import main

GRAPH = "graphflow_html_graph:build"


@pytest.fixture
def store_run(tmp_path: Path) -> tuple[Path, str]:
    history, _ = record(store_path=tmp_path / "runs.db")
    return tmp_path / "runs.db", history.run_id


def test_a_run_of_a_store_file_becomes_a_page(store_run: tuple[Path, str], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path, run_id = store_run
    out = tmp_path / "run.html"
    assert main(["html", str(path), run_id, "-o", str(out), "--graph", GRAPH]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {out}: run {run_id} (")
    page = out.read_text(encoding="utf-8")
    assert f"run {run_id} of graph shop" in page
    assert page.count('<g class="lane ') == 6
    assert '<tr class="diff-row changed"><td class="v">approved</td>' in page
    saved = page.count('data-type="checkpoint_saved"')
    assert saved >= 5
    assert page.count('<tr class="checkpoint">') == saved
    assert '<g class="node terminal ran" data-node="__end__">' in page


def test_a_history_file_becomes_a_page(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    history, _ = record(answer=None)
    source = history.save(tmp_path / "paused.history.json")
    out = tmp_path / "paused.html"
    assert main(["html", str(source), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "(without the graph: pass --graph MODULE:GRAPH to draw every node)" in said
    page = out.read_text(encoding="utf-8")
    assert '<span class="status interrupted">' in page
    assert '<g class="node ran halt" data-node="review">' in page
    assert "(not answered)" in page


def test_a_history_s_recorded_graph_is_drawn_when_it_imports(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history, _ = record()
    source = history.model_copy(update={"graph_ref": GRAPH}).save(tmp_path / "h.history.json")
    out = tmp_path / "h.html"
    assert main(["html", str(source), "-o", str(out)]) == 0
    assert "without the graph" not in capsys.readouterr().out
    assert "The graph was not given" not in out.read_text(encoding="utf-8")


def _not_a_history(tmp_path: Path, store: Path, run_id: str) -> list[str]:
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    return [str(tmp_path / "notes.json"), "-o", str(tmp_path / "o.html")]


def _unknown_run(tmp_path: Path, store: Path, run_id: str) -> list[str]:
    return [str(store), "run-nope", "-o", str(tmp_path / "o.html")]


def _store_without_run_id(tmp_path: Path, store: Path, run_id: str) -> list[str]:
    return [str(store), "-o", str(tmp_path / "o.html")]


def _onto_the_store(tmp_path: Path, store: Path, run_id: str) -> list[str]:
    return [str(store), run_id, "-o", str(store), "--force"]


def _onto_an_existing_file(tmp_path: Path, store: Path, run_id: str) -> list[str]:
    (tmp_path / "kept.html").write_text("kept\n")
    return [str(store), run_id, "-o", str(tmp_path / "kept.html")]


def _bad_graph(tmp_path: Path, store: Path, run_id: str) -> list[str]:
    return [str(store), run_id, "-o", str(tmp_path / "o.html"), "--graph", "nowhere"]


@pytest.mark.parametrize(("make", "text"), [
    (_not_a_history, "is not a graphflow history"),
    (_unknown_run, "no run 'run-nope' in"),
    (_store_without_run_id, "or a store file with a RUN_ID"),
    (_onto_the_store, "is the store file"),
    (_onto_an_existing_file, "already exists; pass another path, or --force"),
    (_bad_graph, "is not MODULE:GRAPH"),
], ids=["not-a-history", "unknown-run", "store-without-run-id", "onto-the-store",
        "onto-an-existing-file", "bad-graph"])
def test_problems_are_one_line_and_write_nothing(store_run: tuple[Path, str], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 make: object, text: str) -> None:
    store, run_id = store_run
    argv = make(tmp_path, store, run_id)  # type: ignore[operator]
    before = {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert main(["html", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("graphflow: error: ")
    assert err.count("\n") == 1
    assert text in err
    assert {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
