"""Targeted rules of the store conformance machine: the shapes uniform draws rarely reach.

With runs, timestamps and ids drawn independently, "a checkpoint saved again where another
one ties with it" needs three steps to line up (a save, a second save in the same run at the
same timestamp, an overwrite of the first that keeps its run and timestamp), and a store whose
overwrite keeps the checkpoint's old place in save order passes every program that lacks them.
These rules build the tie from what the store already holds, so a budget of 30 programs
(``graphflow-ci``) meets it every time instead of most of the time (issue 14; measured in
``benchmarks/ci_profile_hit_rate.py``).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, multiple, precondition, rule

from .._records._checkpoint import Checkpoint
from ._conformance_checks import ConformanceChecks
from ._conformance_draws import BASE_TIME, NODES, ORDER_RULE, _extras, _node_ids, _states

__all__ = ["RareShapes"]

_checkpoints = Bundle("checkpoints")  # the machine's bundle (bundles are known by name)


def _has_checkpoints(machine: ConformanceChecks) -> bool:
    return bool(machine.model)


def _tick(cp: Checkpoint) -> int:
    return int((cp.timestamp - BASE_TIME).total_seconds())


class RareShapes(ConformanceChecks):
    """Rules that make ties in save order: a new checkpoint beside an existing one (same run,
    same timestamp), and an overwrite that keeps its run and timestamp, then the run's
    listing. Every other field is drawn as in ``save_new``."""

    @precondition(_has_checkpoints)
    @rule(
        target=_checkpoints, cid=_checkpoints, node_id=st.none() | st.sampled_from(NODES),
        node_ids=_node_ids, step=st.integers(0, 3), state=_states, extras=_extras,
    )
    def save_beside(
        self, cid: str, node_id: str | None, node_ids: list[str], step: int,
        state: dict[str, Any], extras: dict[str, Any],
    ) -> Any:
        """Save a new checkpoint in the run of ``cid`` at its timestamp: a tie only save
        order breaks (``latest`` is the new one)."""
        old = self.model.get(cid)
        if old is None:
            return multiple()
        cp = self._build(self._fresh_id(), old.run_id, _tick(old), node_id, node_ids, step,
                         state, extras)
        self._run(self._save, cp, "new")
        return cp.id

    @precondition(_has_checkpoints)
    @rule(
        cid=_checkpoints, node_id=st.none() | st.sampled_from(NODES), node_ids=_node_ids,
        step=st.integers(0, 3), state=_states, extras=_extras,
    )
    def overwrite_in_place(
        self, cid: str, node_id: str | None, node_ids: list[str], step: int,
        state: dict[str, Any], extras: dict[str, Any],
    ) -> None:
        """Save ``cid`` again in its run at its timestamp: it now counts as saved last, so it
        wins every tie it is in (``latest``, and its place in ``list``)."""
        old = self.model.get(cid)
        if old is None:
            return
        cp = self._build(cid, old.run_id, _tick(old), node_id, node_ids, step, state, extras)
        self._run(self._overwrite_in_place, cp)

    async def _overwrite_in_place(self, cp: Checkpoint) -> None:
        await self._save(cp, "overwritten")
        call = f"list({cp.run_id!r})"
        got = [getattr(c, "id", c) for c in await self.store.list(cp.run_id)]
        expected = self._ordered(self._ids_of_run(cp.run_id))
        if got != expected:
            self._broke(call, f"{ORDER_RULE} (an overwritten checkpoint counts as saved last)",
                        f"expected {self._describe(expected)}; got {got}")
