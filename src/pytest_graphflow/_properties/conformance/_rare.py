"""Targeted draws of the store conformance machine: the shapes uniform draws rarely reach.

With runs, timestamps and ids drawn independently, "a checkpoint saved again where another
one ties with it" needs three steps to line up (a save, a second save in the same run at the
same timestamp, an overwrite of the first that keeps its run and timestamp), and a store whose
overwrite keeps the checkpoint's old place in save order passes most programs. So half of
the ``save_new`` steps put the new checkpoint *beside* an existing one (its run and
timestamp), and half of the ``overwrite`` steps keep the checkpoint *in place* (its run and
timestamp) and then check the run's listing. These are options of the existing rules, not
rules of their own, so saves (the costly steps) keep their share of a program and a budget
of 30 programs (``graphflow-ci``) costs what it did (issue 14; measured in
``benchmarks/ci_profile_hit_rate.py``).
"""

from __future__ import annotations

from hypothesis import strategies as st

from ..._records._checkpoint import Checkpoint
from ._checks import ConformanceChecks
from ._draws import BASE_TIME, ORDER_RULE

__all__ = ["BESIDE", "IN_PLACE", "RareShapes"]

BESIDE = st.none() | st.integers(0, 7)
"""``save_new(beside=k)``: beside the checkpoint saved k-th last (0: the last; modulo the
number held), or ``None``: wherever the run and tick drawn say."""

IN_PLACE = st.booleans()
"""``overwrite(in_place=True)``: keep the overwritten checkpoint's run and timestamp."""


def _tick(cp: Checkpoint) -> int:
    return int((cp.timestamp - BASE_TIME).total_seconds())


class RareShapes(ConformanceChecks):
    """Where a targeted save goes, and the listing check after an overwrite in place."""

    def _beside(self, k: int | None) -> tuple[str, int] | None:
        """The run and tick of the checkpoint saved k-th last (``None``: as drawn)."""
        if k is None or not self.model:
            return None
        recent = sorted(self.model, key=self.saved_at.__getitem__, reverse=True)
        cp = self.model[recent[k % len(recent)]]
        return cp.run_id, _tick(cp)

    def _in_place(self, cid: str) -> tuple[str, int] | None:
        """The run and tick ``cid`` holds now (``None`` if it is gone)."""
        cp = self.model.get(cid)
        return None if cp is None else (cp.run_id, _tick(cp))

    async def _check_listing(self, run_id: str) -> None:
        """The run's listing after an overwrite in place: it counts as saved last, so it
        comes after every checkpoint it ties with."""
        got = [getattr(c, "id", c) for c in await self.api.list(run_id)]
        expected = self._ordered(self._ids_of_run(run_id))
        if got != expected:
            self._broke(f"list({run_id!r})",
                        f"{ORDER_RULE} (an overwritten checkpoint counts as saved last)",
                        f"expected {self._describe(expected)}; got {got}")
