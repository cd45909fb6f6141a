"""``--graphflow-processes=N``: every run of a test re-run in N fresh interpreters.

After a test that used the graph fixtures passes, each run it performed is replayed (the
recorded history: same seed, input, answers and clock; external nodes played back) in N worker
interpreters with ``PYTHONHASHSEED`` 1..N, and every event must be the same bytes as in the
test. An order that depends on ``hash()`` of strings (a ``set`` of strings, say) passes inside
one process and fails here.

A replay runs the graph object the test ran, found under the ``"module:attr"`` that holds it
(not another graph with the same id and revision), and in a fresh state: each replay is a
child forked from a worker that has imported only pytest-graphflow, so the graph's module is
imported afresh and a module-level fake its nodes mutate starts as the module makes it, never
as an earlier replay left it. Runs whose graph no imported module holds cannot be rebuilt in
another process; they are counted as skipped in the terminal summary. Under xdist each worker
hands its counts to the controller, which prints the summary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from .._engine._results import RunLeg

__all__ = ["COUNTS", "REASONS", "add_worker_counts", "check_runs", "hand_counts_over",
           "processes_of", "skip_lines"]

COUNTS: Final = pytest.StashKey[dict[str, int]]()
REASONS: Final = pytest.StashKey[dict[str, int]]()
"""Why runs were skipped: each reason, with how many runs it kept from a replay."""
WORKEROUTPUT_KEY: Final = "graphflow_processes"
REASONS_KEY: Final = "graphflow_processes_skipped"
NATIVE_SKIP: Final = "a run whose graph is not held by an importable module (built inside the test)"


def hand_counts_over(config: pytest.Config) -> None:
    """On an xdist worker, put the counts in ``workeroutput`` for the controller."""
    output: dict[str, Any] | None = getattr(config, "workeroutput", None)
    counts = config.stash.get(COUNTS, None)
    if output is not None and counts is not None:
        output[WORKEROUTPUT_KEY] = dict(counts)
        reasons: dict[str, int] = config.stash.get(REASONS, {})
        output[REASONS_KEY] = dict(reasons)


def add_worker_counts(config: pytest.Config, workeroutput: dict[str, Any] | None) -> None:
    """On the xdist controller, add the counts a worker handed over."""
    counts = (workeroutput or {}).get(WORKEROUTPUT_KEY)
    if not isinstance(counts, dict):
        return
    total = config.stash.setdefault(COUNTS, {"checked": 0, "skipped": 0})
    for key in total:
        total[key] += int(counts.get(key, 0))
    reasons = (workeroutput or {}).get(REASONS_KEY)
    if isinstance(reasons, dict):
        for why, n in reasons.items():
            _skipped(config, str(why), int(n))


def _skipped(config: pytest.Config, why: str, n: int = 1) -> None:
    """Count ``n`` runs skipped for ``why``."""
    reasons = config.stash.setdefault(REASONS, {})
    reasons[why] = reasons.get(why, 0) + n


def skip_lines(config: pytest.Config) -> list[str]:
    """The terminal summary's lines saying why runs were not replayed, most frequent first."""
    reasons: dict[str, int] = config.stash.get(REASONS, {})
    return [f"graphflow:   {n} skipped: {why}" for why, n in
            sorted(reasons.items(), key=lambda item: (-item[1], item[0]))]


def processes_of(config: pytest.Config) -> int:
    """N from ``--graphflow-processes`` or the ``graphflow_processes`` ini key (0: off).

    Raises:
        pytest.UsageError: for a value that is not an integer >= 2.
    """
    value = config.getoption("graphflow_processes", None) or config.getini("graphflow_processes")
    if not value:
        return 0
    try:
        n = int(str(value))
    except ValueError:
        n = -1
    if n < 2:
        raise pytest.UsageError(f"--graphflow-processes={value}: give the number of fresh "
                                "interpreters to compare, an integer >= 2")
    return n


def check_runs(item: pytest.Item, legs: list[RunLeg], n: int) -> None:
    """Replay every run of ``legs`` in ``n`` workers; fail the test at the first divergence."""
    import anyio

    from .._graph._refs import find_graph_ref
    from .._properties._progress import Progress, report_progress
    from .._properties.runs._pool import pool, request_all
    from .._replay._history import History

    counts = item.config.stash.setdefault(COUNTS, {"checked": 0, "skipped": 0})
    runs: dict[str, list[RunLeg]] = {}
    for leg in legs:
        runs.setdefault(leg.run_id, []).append(leg)
    workers = pool(range(1, n + 1), tag="fresh")
    harnesses: dict[int, Any] = {}
    for leg in legs:
        harness = getattr(leg.graph, "harness", None)
        if harness is not None:
            harnesses.setdefault(id(harness), harness)
    runs = {run_id: run_legs for run_id, run_legs in runs.items()
            if getattr(run_legs[0].graph, "harness", None) is None}
    from .._langgraph._replay import groups

    for group in groups(harnesses.values()):
        _check_harness(item, group, workers, counts)
    tool, skipped = "--graphflow-processes", 0
    for done, (run_id, run_legs) in enumerate(runs.items(), start=1):
        report_progress(None, Progress(tool, "runs replayed", done - 1, len(runs),
                                       detail=f"run {run_id}"))
        first = run_legs[0]
        ref = None if first.resumed or first.initial_state is None else \
            find_graph_ref(first.graph)
        if ref is None:
            counts["skipped"] += 1
            skipped += 1
            _skipped(item.config, "a run whose first leg this test did not record (it "
                     "resumed a run of an earlier test's store)" if first.resumed
                     else NATIVE_SKIP)
            continue
        store: Any = run_legs[-1].store
        checkpoints = anyio.run(store.list, run_id) if store is not None else []
        history = History.from_legs(run_legs, checkpoints, graph_ref=ref, source=item.nodeid)
        request = {"op": "fresh_call", "fn": "pytest_graphflow._replay._replayer:replay_report",
                   "kwargs": {"history": history.model_dump(mode="json"), "graph": ref}}
        answers = request_all(workers, [request] * n)
        counts["checked"] += 1
        for hashseed, answer in enumerate(answers, start=1):
            if answer["value"] is not None:
                raise AssertionError(
                    f"--graphflow-processes: run {run_id} of this test took another path in a "
                    f"fresh interpreter with PYTHONHASHSEED={hashseed} (look for the order of "
                    "a set or dict of strings, hash() or id(); or for state outside the graph "
                    "that its nodes read and an earlier test left changed: the replay imports "
                    "the graph's module afresh):\n" + answer["value"])
    report_progress(None, Progress(
        tool, "runs replayed", len(runs), len(runs), finished=True,
        detail=f"{len(runs) - skipped} in {n} fresh interpreters, {skipped} skipped"))


def _check_harness(item: pytest.Item, group: list[Any], workers: Any,
                   counts: dict[str, int]) -> None:
    """Replay a group of LangGraph harnesses (those sharing a saver) in the workers; fail the
    test where they differ."""
    from .._langgraph._replay import recipe
    from .._properties.runs._pool import request_all

    packed, why = recipe(group)
    if packed is None:
        counts["skipped"] += len(group)
        _skipped(item.config, f"a LangGraph harness: {why}", len(group))
        return
    expected = [[e.model_dump_json() for e in h.events] for h in group]
    request = {"op": "fresh_call", "fn": "pytest_graphflow._langgraph._replay:replay_recipe",
               "kwargs": {"recipe": packed, "expected": expected}}
    answers = request_all(workers, [request] * len(workers))
    cannot = next((a["value"] for a in answers if isinstance(a["value"], dict)), None)
    if cannot is not None:  # the fresh interpreter could not make the harness
        counts["skipped"] += len(group)
        _skipped(item.config, f"a LangGraph harness: {cannot['skipped']}", len(group))
        return
    counts["checked"] += len(group)
    threads = ", ".join(repr(h.thread_id) for h in group)
    for hashseed, answer in enumerate(answers, start=1):
        if answer["value"] is not None:
            raise AssertionError(
                f"--graphflow-processes: the LangGraph harness on thread {threads} "
                f"of this test took another path in a fresh interpreter with "
                f"PYTHONHASHSEED={hashseed} (look for the order of a set or dict of strings, "
                "hash() or id() in node code; or for state outside the graph that its nodes "
                "read: the replay imports the graph's module afresh):\n" + answer["value"])
