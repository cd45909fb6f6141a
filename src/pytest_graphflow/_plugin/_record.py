"""``--graphflow-record=DIR``: every run of a test written as a history file.

Each run a test's graph runtimes performed (fixture and factory alike) becomes
``DIR/<test id>/<run id>.history.json`` when the test ends, before its fixtures close their
stores. Replay them later with ``--graphflow-replay=DIR`` or ``assert_replays``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .._engine._results import RunLeg

__all__ = ["record_dir", "write_histories"]


def record_dir(config: pytest.Config) -> Path | None:
    """The folder histories are recorded into, or ``None`` (the option, else the ini key)."""
    value = config.getoption("graphflow_record", None) or config.getini("graphflow_record")
    if not value:
        return None
    path = Path(str(value))
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


def _safe(nodeid: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_")[:150] or "test"


def write_histories(item: pytest.Item, legs: list[RunLeg], folder: Path,
                    policy: str | None) -> list[Path]:
    """Write one history per run of ``legs`` (runs whose first leg is missing are skipped)."""
    import anyio

    from .._graph._refs import find_graph_ref
    from .._replay._history import SUFFIX, History

    runs: dict[str, list[RunLeg]] = {}
    for leg in legs:
        runs.setdefault(leg.run_id, []).append(leg)
    written: list[Path] = []
    for run_id, run_legs in runs.items():
        if run_legs[0].resumed or run_legs[0].initial_state is None:
            continue
        store: Any = run_legs[-1].store
        try:
            checkpoints = anyio.run(store.list, run_id) if store is not None else []
        except Exception:  # a store a fault plan broke: keep the events at least
            checkpoints = []
        history = History.from_legs(
            run_legs, checkpoints, checkpoint_policy=policy,
            graph_ref=find_graph_ref(run_legs[0].graph), source=item.nodeid)
        written.append(history.save(folder / _safe(item.nodeid) / f"{run_id}{SUFFIX}"))
    return written
