"""Planted store bugs, each with its fixed twin: copies of the user's ``DictStore`` (written
from docs/stores.md) that change one method. The buggy store of a pair breaks one rule of
the documented contract; its twin does the same thing correctly and must pass conformance.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import anyio
from graphflow_dict_store import DictStore

from pytest_graphflow import Checkpoint


@dataclass(frozen=True)
class Planted:
    """A planted bug: the buggy store, its fixed twin, the method and rule the conformance
    report must name, and the most store calls its shrunk report may list."""

    buggy: type[DictStore]
    fixed: type[DictStore]
    method: str
    rule: str
    max_calls: int


class KeepsCallersObject(DictStore):
    """Bug: ``save`` keeps the caller's object; mutating it afterwards changes the store."""

    async def save(self, checkpoint: Checkpoint) -> None:
        self._held[checkpoint.id] = (next(self._saves), checkpoint)


class KeepsACopy(DictStore):
    """Twin: ``save`` keeps a deep copy."""

    async def save(self, checkpoint: Checkpoint) -> None:
        self._held[checkpoint.id] = (next(self._saves), checkpoint.model_copy(deep=True))


class LatestById(DictStore):
    """Bug: ``latest`` breaks timestamp ties by checkpoint id instead of save order."""

    async def latest(self, run_id: str) -> Checkpoint | None:
        mine = [cp for _, cp in self._held.values() if cp.run_id == run_id]
        return max(mine, key=lambda cp: (cp.timestamp, cp.id)).model_copy(deep=True) \
            if mine else None


class LatestBySaveOrder(DictStore):
    """Twin: ``latest`` breaks timestamp ties by save order."""

    async def latest(self, run_id: str) -> Checkpoint | None:
        mine = [(cp.timestamp, n, cp) for n, cp in self._held.values() if cp.run_id == run_id]
        return max(mine, key=lambda row: row[:2])[2].model_copy(deep=True) if mine else None


class ListIgnoresThread(DictStore):
    """Bug: ``list`` drops the ``thread_id`` filter."""

    async def list(
        self, run_id: str | None = None, *, thread_id: str | None = None
    ) -> list[Checkpoint]:
        return await super().list(run_id)


class ListFiltersThread(DictStore):
    """Twin: ``list`` filters by run and thread, each when given."""

    async def list(
        self, run_id: str | None = None, *, thread_id: str | None = None
    ) -> list[Checkpoint]:
        return await super().list(run_id, thread_id=thread_id)


class DeleteLeavesReadable(DictStore):
    """Bug: ``delete`` hides the checkpoint from listings but ``get`` still finds it."""

    def __init__(self) -> None:
        super().__init__()
        self._gone: set[str] = set()

    async def list(
        self, run_id: str | None = None, *, thread_id: str | None = None
    ) -> list[Checkpoint]:
        return [cp for cp in await super().list(run_id, thread_id=thread_id)
                if cp.id not in self._gone]

    async def save(self, checkpoint: Checkpoint) -> None:
        self._gone.discard(checkpoint.id)
        await super().save(checkpoint)

    async def delete(self, checkpoint_id: str) -> bool:
        existed = checkpoint_id in self._held and checkpoint_id not in self._gone
        self._gone.add(checkpoint_id)
        return existed


class DeleteForgets(DeleteLeavesReadable):
    """Twin: ``delete`` hides the checkpoint from ``get`` as well."""

    async def get(self, checkpoint_id: str) -> Checkpoint | None:
        return None if checkpoint_id in self._gone else await super().get(checkpoint_id)


class ForkLosesParent(DictStore):
    """Bug: ``fork`` does not link the clone to its source (``parent_id``)."""

    async def fork(self, checkpoint_id: str, patch_state: Any = None, *,
                   thread_id: str | None = None) -> str:
        run = await super().fork(checkpoint_id, patch_state, thread_id=thread_id)
        forked = (await self.list(run))[0]
        await self.save(forked.model_copy(update={"parent_id": None}))
        return run


class ForkKeepsParent(DictStore):
    """Twin: the same rewrite of the clone, keeping its link."""

    async def fork(self, checkpoint_id: str, patch_state: Any = None, *,
                   thread_id: str | None = None) -> str:
        run = await super().fork(checkpoint_id, patch_state, thread_id=thread_id)
        forked = (await self.list(run))[0]
        await self.save(forked.model_copy(update={"parent_id": checkpoint_id}))
        return run


class LoadFromFirstVersion(DictStore):
    """Bug: ``load`` answers from a cache of each id's first version (stale after an
    overwrite)."""

    def __init__(self) -> None:
        super().__init__()
        self._first: dict[str, Checkpoint] = {}

    async def save(self, checkpoint: Checkpoint) -> None:
        self._first.setdefault(checkpoint.id, checkpoint.model_copy(deep=True))
        await super().save(checkpoint)

    async def load(self, run_id: str, node_id: str | None = None) -> Checkpoint | None:
        found = await super().load(run_id, node_id)
        return None if found is None else self._first[found.id].model_copy(deep=True)


class LoadFromLastVersion(LoadFromFirstVersion):
    """Twin: the cache keeps each id's last version."""

    async def save(self, checkpoint: Checkpoint) -> None:
        self._first[checkpoint.id] = checkpoint.model_copy(deep=True)
        await DictStore.save(self, checkpoint)


class GetUnknownRaises(DictStore):
    """Bug: ``get`` of an unknown id raises ``KeyError`` instead of returning ``None``."""

    async def get(self, checkpoint_id: str) -> Checkpoint | None:
        return self._held[checkpoint_id][1].model_copy(deep=True)


class GetUnknownIsNone(DictStore):
    """Twin: ``get`` of an unknown id is ``None``."""

    async def get(self, checkpoint_id: str) -> Checkpoint | None:
        if checkpoint_id not in self._held:
            return None
        return self._held[checkpoint_id][1].model_copy(deep=True)


class OverwriteKeepsSaveOrder(DictStore):
    """Bug: saving an id again keeps its first save number, so it does not count as saved
    last."""

    async def save(self, checkpoint: Checkpoint) -> None:
        n = self._held[checkpoint.id][0] if checkpoint.id in self._held else next(self._saves)
        self._held[checkpoint.id] = (n, checkpoint.model_copy(deep=True))


class OverwriteSavesLast(DictStore):
    """Twin: every save, an overwrite too, takes the next save number."""

    async def save(self, checkpoint: Checkpoint) -> None:
        n = next(self._saves)
        self._held[checkpoint.id] = (n, checkpoint.model_copy(deep=True))


class LoadIgnoresNodeIds(DictStore):
    """Bug: ``load(run, node)`` matches ``node_id`` only, not ``node_ids``."""

    async def load(self, run_id: str, node_id: str | None = None) -> Checkpoint | None:
        listed = [cp for cp in await self.list(run_id) if node_id in (None, cp.node_id)]
        return listed[-1] if listed else None


class LoadMatchesEither(DictStore):
    """Twin: ``load(run, node)`` matches ``node_id`` or ``node_ids``."""

    async def load(self, run_id: str, node_id: str | None = None) -> Checkpoint | None:
        listed = [cp for cp in await self.list(run_id)
                  if node_id in (None, cp.node_id) or node_id in cp.node_ids]
        return listed[-1] if listed else None


class DeleteAlwaysTrue(DictStore):
    """Bug: ``delete`` returns ``True`` whether or not the id existed."""

    async def delete(self, checkpoint_id: str) -> bool:
        self._held.pop(checkpoint_id, None)
        return True


class DeleteSaysWhether(DictStore):
    """Twin: ``delete`` returns whether the id existed."""

    async def delete(self, checkpoint_id: str) -> bool:
        return self._held.pop(checkpoint_id, None) is not None


class DeleteHangsOnMissing(DictStore):
    """Bug: ``delete`` of a missing id waits for a write that never comes (hangs)."""

    async def delete(self, checkpoint_id: str) -> bool:
        if checkpoint_id not in self._held:
            await anyio.Event().wait()
        return self._held.pop(checkpoint_id) is not None


class DeleteWaitsBriefly(DictStore):
    """Twin: ``delete`` of a missing id waits a moment (a second of loop time) and answers."""

    async def delete(self, checkpoint_id: str) -> bool:
        if checkpoint_id not in self._held:
            await anyio.sleep(1)
            return False
        return self._held.pop(checkpoint_id) is not None


class ForkSharesState(DictStore):
    """Bug: the fork's state shares the source's nested values (a shallow copy), so the
    patch given to ``fork`` later changes the stored fork."""

    async def fork(self, checkpoint_id: str, patch_state: Any = None, *,
                   thread_id: str | None = None) -> str:
        source = self._held[checkpoint_id][1] if checkpoint_id in self._held else None
        if source is None:
            return await super().fork(checkpoint_id, patch_state, thread_id=thread_id)
        n = next(_FORKS)
        run = f"run-shared-{n}"
        clone = source.model_copy(update={
            "id": f"cp-shared-{n}", "run_id": run, "thread_id": f"thread-shared-{n}",
            "parent_id": source.id, "state": {**source.state, **(patch_state or {})}})
        self._held[clone.id] = (next(self._saves), clone)  # the bug: not a deep copy
        return run


class ForkCopiesState(ForkSharesState):
    """Twin: the same fork, saving a deep copy."""

    async def fork(self, checkpoint_id: str, patch_state: Any = None, *,
                   thread_id: str | None = None) -> str:
        run = await super().fork(checkpoint_id, patch_state, thread_id=thread_id)
        for key, (n, cp) in list(self._held.items()):
            if cp.run_id == run:
                self._held[key] = (n, cp.model_copy(deep=True))
        return run


_FORKS = itertools.count(1)

PLANTED = {
    "save-keeps-callers-object": Planted(
        KeepsCallersObject, KeepsACopy, "get", "is not as it was saved last", 3),
    "latest-by-id-not-save-order": Planted(
        LatestById, LatestBySaveOrder, "latest", "of equal timestamps, the one saved last", 12),
    "list-ignores-thread-filter": Planted(
        ListIgnoresThread, ListFiltersThread, "list",
        "list returns exactly the matching checkpoints", 8),
    "delete-leaves-get-readable": Planted(
        DeleteLeavesReadable, DeleteForgets, "get", "a deleted checkpoint is gone", 8),
    "fork-drops-parent-link": Planted(
        ForkLosesParent, ForkKeepsParent, "fork", "links the clone to its source", 8),
    "load-returns-stale-version": Planted(
        LoadFromFirstVersion, LoadFromLastVersion, "load", "is not as it was saved last", 10),
    "get-unknown-id-raises": Planted(
        GetUnknownRaises, GetUnknownIsNone, "get", "it raised KeyError", 6),
    "overwrite-keeps-first-save-order": Planted(
        OverwriteKeepsSaveOrder, OverwriteSavesLast, "", "saved last", 16),
    "load-by-node-ignores-node-ids": Planted(
        LoadIgnoresNodeIds, LoadMatchesEither, "load", "whose node_id or node_ids name", 9),
    "delete-missing-returns-true": Planted(
        DeleteAlwaysTrue, DeleteSaysWhether, "delete",
        "delete returns True if the id existed, else False", 8),
    "delete-missing-hangs": Planted(
        DeleteHangsOnMissing, DeleteWaitsBriefly, "delete", "a store call returns", 8),
    "fork-shares-nested-values": Planted(
        ForkSharesState, ForkCopiesState, "get", "fork persists the new checkpoint", 10),
}
"""The planted bugs by readable id."""
