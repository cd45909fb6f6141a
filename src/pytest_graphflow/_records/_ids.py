"""Identifier types and deterministic id generation (SPEC §5: ``run-…``, ``cp-…``, ``task-…``)."""

from __future__ import annotations

import hashlib
import random
from typing import Any, NewType

__all__ = ["CheckpointID", "IdSource", "RunID", "TaskID", "ThreadID"]

RunID = NewType("RunID", str)
CheckpointID = NewType("CheckpointID", str)
TaskID = NewType("TaskID", str)
ThreadID = NewType("ThreadID", str)


_states: dict[int, tuple[Any, ...] | None] = {}
"""Each seed an ``IdSource`` was made for: ``None`` the first time, then the state its
generator starts in (the second time: a seed seen once, as each test's own seed mostly is,
pays no state copy — ``getstate()`` is 15 µs, twice the seeding)."""


def _seeded(seed: int) -> random.Random:
    """A generator in the state of ``random.Random(f"graphflow-ids:{seed}")`` as it starts."""
    state = _states.get(seed)
    if state is None:
        rng = random.Random(f"graphflow-ids:{seed}")
        if len(_states) >= 256:  # bounded, as the lru_cache it replaces was
            _states.clear()
        _states[seed] = rng.getstate() if seed in _states else None
        return rng
    rng = random.Random.__new__(random.Random)
    rng.setstate(state)
    return rng


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
            # seed string again for a seed seen before (32 µs, a tenth of a one-node run).
            self._rng = _seeded(seed)

    def run_hex(self) -> str:
        """A fresh 12-hex-digit token for a run (and its default thread)."""
        return f"{self._rng.getrandbits(48):012x}"


def derived_hex(*parts: object) -> str:
    """A stable 12-hex-digit token derived from ``parts`` (used for forks)."""
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:12]
