"""The store a runtime makes when it is given none (the engine never names a backend)."""

from __future__ import annotations

from ._memory import InMemoryCheckpointStore
from ._protocol import CheckpointStore

__all__ = ["default_store"]


def default_store() -> CheckpointStore:
    """A new :class:`InMemoryCheckpointStore`: the store of a runtime given none."""
    return InMemoryCheckpointStore()
