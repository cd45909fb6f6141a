"""Small, fast, seeded generators: schedule decisions and node tasks' owned entropy (internal).

``random.Random`` costs microseconds to seed (15 µs: its 2.5 KB state is first filled from
``os.urandom``), and a schedule needs a fresh, independent stream per batch, as a node task
that draws needs one per task. SplitMix64 seeds in one multiplication and gives well-mixed
64-bit outputs; it is plenty for choosing among a handful of ready tasks and for the ids and
numbers node code draws.
"""

from __future__ import annotations

import hashlib
import operator
import random as _random
import sys
import zlib
from array import array
from typing import Any

__all__ = ["EntropyStream", "ScheduleRng"]

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
        """Shuffle ``items`` in place (Fisher–Yates), drawing as :meth:`_next` does (inline:
        a batch of N tasks shuffles N of them). Over :data:`_WIDE` items, the draws are
        made all at once (:func:`_draws`), the same numbers."""
        n = len(items)
        if n > _WIDE:
            m = n - 1
            for i, j in zip(range(m, 0, -1), map(_mod, _draws(self._state, m),
                                                 range(n, 1, -1)), strict=True):
                items[i], items[j] = items[j], items[i]
            self._state = (self._state + m * _GAMMA) & _MASK
            return
        state = self._state
        for i in range(n - 1, 0, -1):
            state = z = (state + 0x9E3779B97F4A7C15) & _MASK
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
            j = (z ^ (z >> 31)) % (i + 1)
            items[i], items[j] = items[j], items[i]
        self._state = state


_GAMMA = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_mod = operator.mod

_WIDE = 12 if array("Q").itemsize == 8 else sys.maxsize
"""Items over which :meth:`ScheduleRng.shuffle` makes its draws at once (fewer, the loop
draws faster: measured 8 items 2.7 µs a loop, 2.4 at once; 100 items 37 and 17 µs). Never
where an array's ``Q`` item is not 64 bits."""

_LANE = b"\x01" + bytes(15)
"""One 128-bit lane holding 1, little-endian (:func:`_draws`)."""

_lanes_of: tuple[int, int, int, int] = (0, 0, 0, 0)
"""The lanes :func:`_draws` made last: ``(m, ones, low, steps)`` (one width kept)."""

_KEEP_LANES = 1 << 10
"""The widest draw whose lanes are kept for the next one (48 KB at most; making them is a
few µs at 100 wide, under 1% of a batch wider than this)."""


def _draws(state: int, m: int) -> Any:
    """The next ``m`` outputs of SplitMix64 from ``state`` (what ``m`` calls of
    :meth:`ScheduleRng._next` return), computed at once: the ``m`` states are lanes of 128
    bits of one integer (SWAR), each holding a 64-bit value, so that every step of the mix
    (an addition, a shift, an exclusive or, a product by a 64-bit constant, a mask) is one
    operation on the integer; a lane's product fits its 128 bits, and the bits a shift moves
    into a lane's upper half are masked off before the next product. An array of the
    ``m`` numbers (64-bit, in order)."""
    global _lanes_of
    kept = _lanes_of
    if kept[0] == m:
        _, ones, low, steps = kept
    else:
        ones = int.from_bytes(_LANE * m, "little")  # 1 in every lane
        low = ones * _MASK  # the low 64 bits of every lane
        counts = array("Q", bytes(16 * m))
        counts[::2] = array("Q", range(1, m + 1))  # lane t holds t + 1
        if _BIG:
            counts.byteswap()
        steps = int.from_bytes(counts.tobytes(), "little") * _GAMMA
        if m <= _KEEP_LANES:
            _lanes_of = (m, ones, low, steps)
    z = (state * ones + steps) & low  # lane t: (state + (t + 1) * gamma) mod 2**64
    z = ((z ^ (z >> 30)) & low) * _MIX1 & low
    z = ((z ^ (z >> 27)) & low) * _MIX2 & low
    z ^= z >> 31  # (the upper halves are not read)
    out = array("Q", z.to_bytes(16 * m, "little"))
    if _BIG:
        out.byteswap()
    return out[::2]


_BIG = sys.byteorder == "big"


def _digest(value: object) -> int:
    return int.from_bytes(hashlib.sha256(str(value).encode()).digest()[:8], "big")


class EntropyStream(ScheduleRng):
    """A node task's owned stream: SplitMix64 seeded from the task's key, with the methods
    of ``random.Random`` the entropy hooks call (``random``, ``getrandbits``, ``randbytes``,
    ``seed``, ``getstate``/``setstate``, ``gauss``). Seeding takes a hash, not 15 µs."""

    __slots__ = ("gauss_next",)

    def __init__(self, key: str) -> None:
        self._state = _digest(key)
        self.gauss_next: float | None = None

    def random(self) -> float:
        """A float in [0, 1) with 53 random bits, as ``random.random()``."""
        return (self._next() >> 11) * (1.0 / 9007199254740992.0)

    def getrandbits(self, k: int) -> int:
        """An int of ``k`` random bits."""
        if k < 0:
            raise ValueError("number of bits must be non-negative")
        out, have = 0, 0
        while have < k:
            out = (out << 64) | self._next()
            have += 64
        return out >> (have - k)

    def randbytes(self, n: int) -> bytes:
        """``n`` random bytes."""
        return self.getrandbits(n * 8).to_bytes(n, "little")

    def seed(self, a: Any = None, version: int = 2) -> None:
        """Restart the stream from ``a`` (int, float, str, bytes), or from its next draw."""
        if a is None:
            a = self._next()
        elif not isinstance(a, (int, float, str, bytes, bytearray)):
            raise TypeError("The only supported seed types are: None, int, float, str, "
                            "bytes, and bytearray.")
        self._state = _digest(f"{type(a).__name__}:{a!r}")
        self.gauss_next = None

    def getstate(self) -> tuple[Any, ...]:
        """The stream's state, for :meth:`setstate`."""
        return ("graphflow-entropy", self._state, self.gauss_next)

    def setstate(self, state: tuple[Any, ...]) -> None:
        """Go back to a state from :meth:`getstate`."""
        if not (isinstance(state, tuple) and len(state) == 3 and state[0] == "graphflow-entropy"):
            raise ValueError(f"setstate({state!r}): not a state of this node task's stream "
                             "(take it with random.getstate() in the same node)")
        self._state, self.gauss_next = state[1], state[2]

    gauss = _random.Random.gauss
