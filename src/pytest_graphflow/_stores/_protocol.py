"""The ``CheckpointStore`` protocol every backend implements (seed 003)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from .._records._checkpoint import Checkpoint

__all__ = ["CheckpointStore"]


@runtime_checkable
class CheckpointStore(Protocol):
    """An async store of checkpoints.

    "Latest" means the latest ``timestamp``; of checkpoints with the same timestamp, the one
    saved last. Implementations return copies: mutating what ``get`` returned changes nothing
    in the store.
    """

    async def save(self, checkpoint: Checkpoint) -> None:
        """Persist ``checkpoint``; one with the same id is overwritten."""

    async def get(self, checkpoint_id: str) -> Checkpoint | None:
        """The checkpoint with this id, or ``None``."""

    async def load(self, run_id: str, node_id: str | None = None) -> Checkpoint | None:
        """The most recent checkpoint of ``run_id`` (for ``node_id`` when given), or ``None``."""

    async def latest(self, run_id: str) -> Checkpoint | None:
        """The most recent checkpoint of ``run_id``, or ``None``."""

    async def list(
        self, run_id: str | None = None, *, thread_id: str | None = None
    ) -> list[Checkpoint]:
        """Checkpoints of a run (or thread, or all), oldest first (timestamp, then save order)."""

    async def delete(self, checkpoint_id: str) -> bool:
        """Delete one checkpoint; ``True`` if it existed."""

    async def fork(
        self,
        checkpoint_id: str,
        patch_state: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
    ) -> str:
        """Clone a checkpoint into a new run (fresh run, thread and checkpoint ids, state
        patched by ``patch_state``), persist it and return the new run id.

        ``thread_id`` names the new thread (default: a fresh id); it must not exist yet.

        Raises:
            CheckpointNotFound: when ``checkpoint_id`` does not exist.
            ForkTargetExists: when the store already holds a checkpoint of ``thread_id``.
        """
