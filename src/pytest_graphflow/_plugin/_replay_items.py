"""``--graphflow-replay=DIR``: every history file under a folder runs as a test.

Each ``*.history.json`` file becomes one test item that replays the recorded run against the
current code (:func:`assert_replays`). The graph comes from the history's ``graph_ref``
(``"module:attr"``), or from the ``graphflow_replay_graphs`` ini key (lines of
``graph_id = module:attr``), which wins.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["HistoryFile", "HistoryItem", "graph_refs", "replay_dir"]


def replay_dir(config: pytest.Config) -> Path | None:
    """The folder of histories to replay, or ``None``."""
    value = config.getoption("graphflow_replay", None)
    if not value:
        return None
    path = Path(str(value))
    path = path if path.is_absolute() else Path(config.invocation_params.dir) / path
    if not path.is_dir():
        raise pytest.UsageError(f"--graphflow-replay={value}: {path} is not a folder; record "
                                "histories with --graphflow-record=DIR first")
    return path


def graph_refs(config: pytest.Config) -> dict[str, str]:
    """``graph_id -> "module:attr"`` from the ``graphflow_replay_graphs`` ini key."""
    out: dict[str, str] = {}
    for line in config.getini("graphflow_replay_graphs"):
        graph_id, sep, ref = str(line).partition("=")
        if not sep or not graph_id.strip() or not ref.strip():
            raise pytest.UsageError(f"graphflow_replay_graphs: {line!r} is not "
                                    "'graph_id = module:attr'")
        out[graph_id.strip()] = ref.strip()
    return out


class HistoryFile(pytest.File):
    """A history file: one replay test."""

    def collect(self) -> Iterator[pytest.Item]:
        yield HistoryItem.from_parent(self, name=self.path.name.removesuffix(".history.json"))


class HistoryItem(pytest.Item):
    """Replays one history file against the current code."""

    def runtest(self) -> None:
        from .._graph._refs import resolve_graph
        from .._replay._history import load_history
        from .._replay._replayer import assert_replays
        from ..errors import InvalidArgument

        history = load_history(self.path)
        ref = graph_refs(self.config).get(history.graph_id) or history.graph_ref
        if ref is None:
            raise InvalidArgument(
                f"history {self.path.name} (graph {history.graph_id!r}) does not say where its "
                "graph is: name it in the ini key graphflow_replay_graphs, a line "
                f"'{history.graph_id} = module:attr'")
        assert_replays(history, resolve_graph(ref))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        from ..errors import GraphflowError

        if isinstance(excinfo.value, GraphflowError):
            return f"{self.path}:\n{excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"replay {self.name}"
