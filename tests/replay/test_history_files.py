"""History files of another format version, or not histories at all: a clear error naming
the file and what to do, never a crash."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from graphflow_replay_graph import Payments, build, record
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    HISTORY_FORMAT_VERSION,
    START,
    Graph,
    GraphRuntime,
    InvalidHistory,
    SQLiteCheckpointStore,
    UnsupportedFormat,
    VirtualClock,
    assert_replays,
    check_upgrade,
    export_history,
    load_history,
)
from pytest_graphflow._records._json import MAX_DEPTH


@pytest.fixture(scope="module")
def good() -> dict[str, Any]:
    return json.loads(record(build(Payments())).dumps())


def _with(data: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = dict(data)
    for key, value in changes.items():
        if value is ...:
            out.pop(key)
        else:
            out[key] = value
    return out


CASES = [
    ("older-version", lambda d: _with(d, format_version=0), UnsupportedFormat,
     "has format_version 0; this build reads 1: it was written by an older pytest-graphflow"),
    ("newer-version", lambda d: _with(d, format_version=HISTORY_FORMAT_VERSION + 1),
     UnsupportedFormat, "has format_version 2; this build reads 1: it was written by a newer "
     "pytest-graphflow: upgrade to read it"),
    ("no-version", lambda d: _with(d, format_version=...), UnsupportedFormat,
     "has format_version None"),
    ("not-a-history", lambda d: {"events": []}, InvalidHistory,
     "is not a graphflow history (it needs \"format\": \"graphflow-history\")"),
    ("a-list", lambda d: [1, 2], InvalidHistory, "is not a graphflow history"),
    ("field-missing", lambda d: _with(d, run_id=...), InvalidHistory,
     "is malformed: run_id: Field required"),
    ("unknown-field", lambda d: _with(d, colour="red"), InvalidHistory,
     "is malformed: colour: Extra inputs are not permitted"),
    ("old-checkpoint-format", lambda d: _with(
        d, checkpoints=[{**d["checkpoints"][0], "format_version": 7}]), UnsupportedFormat,
     "has format_version 7; this build reads 1"),
    ("broken-event", lambda d: _with(d, events=[{"type": "run_start", "seq": "x"}]),
     InvalidHistory, "event 0 is not a graphflow event"),
]


@pytest.mark.parametrize(("mutate", "error", "text"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_history_files_give_a_clear_error(
    good: dict[str, Any], tmp_path: Path, mutate: Any, error: type[Exception], text: str
) -> None:
    path = tmp_path / "bad.history.json"
    path.write_text(json.dumps(mutate(good)))
    with pytest.raises(error) as caught:
        assert_replays(path, build(Payments()))
    assert text in str(caught.value)
    assert str(path) in str(caught.value)  # names the file
    with pytest.raises(error, match="history file"):
        check_upgrade(path, build(Payments()))


def _nested_inside(good: dict[str, Any], levels: int) -> bytes:
    text = json.dumps({**good, "initial_state": {"data": "@"}})
    return text.replace('"@"', "[" * levels + "]" * levels).encode()


UNREADABLE = [
    ("truncated", lambda good: b"{not json", "is not JSON"),
    ("empty", lambda good: b"", "is not JSON"),
    ("not-utf-8", lambda good: b"\xff\xfe{\x00}", "is not UTF-8 text (byte 0xff at offset 0)"),
    ("latin-1", lambda good: json.dumps({**good, "source": "caf\u00e9"},
                                        ensure_ascii=False).encode("latin-1"),
     "is not UTF-8 text (byte 0xe9 at offset"),
    ("nested-100000-levels", lambda good: b"[" * 100_000 + b"]" * 100_000,
     "nests too deeply to be a history"),
    ("nested-5000-levels-inside", lambda good: _nested_inside(good, 5000),
     "nests too deeply to be a history"),
]


@pytest.mark.parametrize(("content", "text"), [c[1:] for c in UNREADABLE],
                         ids=[c[0] for c in UNREADABLE])
def test_unreadable_files_give_a_clear_error(
    good: dict[str, Any], tmp_path: Path, content: Any, text: str
) -> None:
    path = tmp_path / "x.history.json"
    path.write_bytes(content(good))
    for read in (load_history, lambda p: assert_replays(p, build(Payments())),
                 lambda p: check_upgrade(p, build(Payments()))):
        with pytest.raises(InvalidHistory) as caught:
            read(path)
        assert text in str(caught.value)
        assert f"history file {path}" in str(caught.value)


@pytest.fixture
def raised_recursion_limit() -> Iterator[int]:
    """A process that raised its recursion limit (as some libraries and users do): the JSON
    reader then parses far deeper than its default limit lets it."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(50_000)
    try:
        yield 50_000
    finally:
        sys.setrecursionlimit(before)


@pytest.mark.parametrize("levels", [120, 5000])
def test_too_deep_files_are_refused_whatever_the_recursion_limit(
    good: dict[str, Any], tmp_path: Path, raised_recursion_limit: int, levels: int
) -> None:
    # Parsed fine under the raised limit, the file is still no history: the same error as
    # under the default limit, from every reader (it once loaded, order-dependently).
    path = tmp_path / "deep.history.json"
    path.write_bytes(_nested_inside(good, levels))
    for read in (load_history, lambda p: assert_replays(p, build(Payments())),
                 lambda p: check_upgrade(p, build(Payments()))):
        with pytest.raises(InvalidHistory, match="nests too deeply to be a history"):
            read(path)


class Deep(BaseModel):
    x: Any = None
    y: Any = None


def _nest(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


def test_the_deepest_values_a_run_takes_record_a_history_that_loads(tmp_path: Path) -> None:
    # A state value nesting the runtime's limit (MAX_DEPTH, 100 levels) is a run's right:
    # its history sits a few levels deeper and must load (the refusal above spares it).
    g = Graph("deep", Deep)
    g.node("a", lambda s: {"y": {"k": _nest(MAX_DEPTH - 1)}})
    g.edge(START, "a")
    g.edge("a", END)
    graph = g.compile()
    store = SQLiteCheckpointStore(tmp_path / "deep.db")
    result = GraphRuntime(clock=VirtualClock(), seed=3, store=store).invoke(
        graph, {"x": _nest(MAX_DEPTH)})
    assert result.status == "completed"
    history = anyio.run(lambda: export_history(store, result.run_id, seed=3))
    path = history.save(tmp_path / "deep.history.json")
    loaded = load_history(path)
    assert loaded.dumps() == history.dumps()
    assert loaded.parsed_checkpoints()[-1].state["y"] == {"k": _nest(MAX_DEPTH - 1)}


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidHistory, match="cannot read it"):
        load_history(tmp_path / "nope.history.json")
