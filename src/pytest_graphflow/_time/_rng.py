"""A small, fast, seeded generator for schedule decisions (internal).

``random.Random`` costs microseconds to seed, and a schedule needs a fresh, independent
stream per batch. SplitMix64 seeds in one multiplication and gives well-mixed 64-bit
outputs; it is plenty for choosing among a handful of ready tasks.
"""

from __future__ import annotations

import zlib

__all__ = ["ScheduleRng"]

_MASK = (1 << 64) - 1


class ScheduleRng:
    """SplitMix64 seeded from the runtime seed, the run and the superstep."""

    __slots__ = ("_state",)

    def __init__(self, seed: int, run_id: str, step: int) -> None:
        self._state = (seed * 0x9E3779B97F4A7C15 + zlib.crc32(run_id.encode()) * 0xBF58476D1CE4E5B9
                       + step * 0x94D049BB133111EB) & _MASK

    def _next(self) -> int:
        self._state = z = (self._state + 0x9E3779B97F4A7C15) & _MASK
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def randrange(self, n: int) -> int:
        """A number in ``range(n)`` (n >= 1)."""
        return self._next() % n

    def shuffle(self, items: list[object]) -> None:
        """Shuffle ``items`` in place (Fisher–Yates)."""
        for i in range(len(items) - 1, 0, -1):
            j = self._next() % (i + 1)
            items[i], items[j] = items[j], items[i]
