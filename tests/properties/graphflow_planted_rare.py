"""Two planted bugs that need a rare shape to show (issue 14: "the graphflow-ci profile's
budget misses store and interrupt bugs that graphflow-dev finds").

* :class:`OverwriteKeepsItsPlace`: a store whose overwrite keeps the checkpoint's old place in
  save order. SPEC §5 / seed 003: "Latest = latest timestamp, ties broken by save order", and
  an overwritten checkpoint "then counts as saved last" (docs/stores.md). It shows only when
  an overwrite lands on a timestamp another checkpoint of the run (or listing) shares, and
  that other one was saved between the two saves of the overwritten id.
* :func:`answers_indexed_by_id`: a runtime that files a resume's answers by interrupt *id*, so
  of two pending interrupts with one id (two nodes of a batch both asking ``id="q0"``), both
  get the last one's answer. SPEC §4: ``key == f"{task_id}:{id}"`` and "one answer per pending
  interrupt". It shows only when two nodes of one batch pause with the same id at once, their
  answers differ, and the overwritten answer reaches the state.

Both are used by ``test_ci_profile_finds_rare_bugs.py`` and by
``benchmarks/ci_profile_hit_rate.py`` (the hit rate over many seeds).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pytest_graphflow import InMemoryCheckpointStore
from pytest_graphflow._graph._node import Resume
from pytest_graphflow._records._checkpoint import Checkpoint

__all__ = ["OverwriteKeepsItsPlace", "answers_indexed_by_id"]


class OverwriteKeepsItsPlace(InMemoryCheckpointStore):
    """Bug: saving an id that exists replaces the checkpoint but keeps its old save order
    (as an ``UPDATE`` that leaves an autoincrement ``rowid`` alone would)."""

    def _adopt(self, checkpoint: Checkpoint) -> None:
        old = self._by_id.get(checkpoint.id)
        order = self._orders.get(checkpoint.id)
        super()._adopt(checkpoint)
        if old is None or order is None:
            return
        self._orders[checkpoint.id] = order  # the bug
        for run_id in {old.run_id, checkpoint.run_id}:
            if self._by_run.get(run_id):
                self._latest[run_id] = self._max(run_id)


@contextmanager
def answers_indexed_by_id() -> Iterator[None]:
    """Plant the bug in ``Resume.resolve`` for the ``with`` block: answers are filed by
    interrupt id, so pending interrupts sharing an id all get the last one's answer."""
    original = Resume.resolve

    def resolve(self: Resume, pending: list[Any]) -> dict[str, Any]:
        out = original(self, pending)
        by_id = {i.id: out[i.key] for i in pending if i.key in out}  # the bug
        return {i.key: by_id[i.id] for i in pending if i.key in out}

    Resume.resolve = resolve  # type: ignore[method-assign]
    try:
        yield
    finally:
        Resume.resolve = original  # type: ignore[method-assign]
