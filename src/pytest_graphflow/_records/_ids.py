"""Identifier types and deterministic id generation (SPEC §5: ``run-…``, ``cp-…``, ``task-…``)."""

from __future__ import annotations

import functools
import hashlib
import random
from typing import Any, NewType

__all__ = ["CheckpointID", "IdSource", "RunID", "TaskID", "ThreadID"]

RunID = NewType("RunID", str)
CheckpointID = NewType("CheckpointID", str)
TaskID = NewType("TaskID", str)
ThreadID = NewType("ThreadID", str)


@functools.lru_cache(maxsize=256)
def _seeded_state(seed: int) -> tuple[Any, ...]:
    """The state of ``random.Random(f"graphflow-ids:{seed}")`` as it starts."""
    return random.Random(f"graphflow-ids:{seed}").getstate()


class IdSource:
    """Makes run ids from a seed and a counter, or from system randomness when seed is None.

    Checkpoint and task ids are derived from their run id and a per-run counter (see
    ``run_scoped``), so they are unique wherever the run id is.
    """

    def __init__(self, seed: int | None) -> None:
        if seed is None:
            self._rng: random.Random = random.SystemRandom()
        else:
            # The same stream as random.Random(f"graphflow-ids:{seed}"), without hashing the
            # seed string again for every runtime (32 µs, a tenth of a one-node run).
            self._rng = random.Random.__new__(random.Random)
            self._rng.setstate(_seeded_state(seed))

    def run_hex(self) -> str:
        """A fresh 12-hex-digit token for a run (and its default thread)."""
        return f"{self._rng.getrandbits(48):012x}"


def derived_hex(*parts: object) -> str:
    """A stable 12-hex-digit token derived from ``parts`` (used for forks)."""
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:12]
