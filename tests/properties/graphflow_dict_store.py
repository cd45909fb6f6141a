"""A user's checkpoint store, written only from docs/stores.md ("Writing a store"): a dict
of checkpoints and a save counter, nothing imported from pytest-graphflow but public names.
The same code is the page's example; tests/properties/test_store_conformance.py runs it and
plants bugs in copies of it.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from typing import Any

from pytest_graphflow import Checkpoint, CheckpointNotFound, ForkTargetExists


class DictStore:
    """A complete checkpoint store: a dict of checkpoints and a save counter."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[int, Checkpoint]] = {}  # id -> (save number, checkpoint)
        self._saves = itertools.count()

    async def save(self, checkpoint: Checkpoint) -> None:
        """Keep a copy; saving an id again replaces it and makes it the last saved."""
        self._held[checkpoint.id] = (next(self._saves), checkpoint.model_copy(deep=True))

    async def get(self, checkpoint_id: str) -> Checkpoint | None:
        """A copy of the checkpoint with this id, or ``None``."""
        found = self._held.get(checkpoint_id)
        return None if found is None else found[1].model_copy(deep=True)

    async def list(
        self, run_id: str | None = None, *, thread_id: str | None = None
    ) -> list[Checkpoint]:
        """Copies of the matching checkpoints, by timestamp, then save order."""
        rows = sorted(
            (cp.timestamp, n, cp) for n, cp in self._held.values()
            if run_id in (None, cp.run_id) and thread_id in (None, cp.thread_id)
        )
        return [cp.model_copy(deep=True) for _, _, cp in rows]

    async def latest(self, run_id: str) -> Checkpoint | None:
        """The run's last checkpoint in that order, or ``None``."""
        listed = await self.list(run_id)
        return listed[-1] if listed else None

    async def load(self, run_id: str, node_id: str | None = None) -> Checkpoint | None:
        """``latest``; with ``node_id``, the latest whose ``node_id`` or ``node_ids`` name it."""
        listed = [cp for cp in await self.list(run_id)
                  if node_id is None or node_id == cp.node_id or node_id in cp.node_ids]
        return listed[-1] if listed else None

    async def delete(self, checkpoint_id: str) -> bool:
        """Forget the checkpoint; whether it existed."""
        return self._held.pop(checkpoint_id, None) is not None

    async def fork(
        self,
        checkpoint_id: str,
        patch_state: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
    ) -> str:
        """Copy a checkpoint into a new run on a new thread, patch its state, save it and
        return the new run id."""
        source = await self.get(checkpoint_id)
        if source is None:
            raise CheckpointNotFound(f"cannot fork {checkpoint_id!r}: no such checkpoint")
        runs = {cp.run_id for _, cp in self._held.values()}
        threads = {cp.thread_id for _, cp in self._held.values()}
        if thread_id in threads:
            raise ForkTargetExists(f"cannot fork into thread {thread_id!r}: it exists; "
                                   "pass a new thread id")
        for n in itertools.count(1):
            run, new_id = f"run-{checkpoint_id}-f{n}", f"{checkpoint_id}-f{n}"
            thread = thread_id or f"thread-{checkpoint_id}-f{n}"
            if run not in runs and new_id not in self._held and (
                    thread_id is not None or thread not in threads):
                break
        state = {**source.state, **copy.deepcopy(dict(patch_state or {}))}
        await self.save(source.model_copy(update={
            "id": new_id, "run_id": run, "thread_id": thread, "parent_id": source.id,
            "state": state, "metadata": {**source.metadata, "forked_from": source.id},
        }))
        return run
