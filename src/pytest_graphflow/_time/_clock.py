"""Clocks: the real clock for production runs and the virtual clock for tests (SPEC §7)."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, runtime_checkable

import anyio

from ..errors import InvalidArgument

__all__ = ["DEFAULT_START", "Clock", "RealClock", "VirtualClock"]

DEFAULT_START = datetime(2025, 1, 1, tzinfo=UTC)
"""Where a :class:`VirtualClock` starts unless told otherwise (fixed, so streams are stable)."""

# Kept in a tuple: freezegun replaces module attributes that point at the real functions.
_REAL = (time.time_ns, time.monotonic_ns, datetime)


@runtime_checkable
class Clock(Protocol):
    """What the runtime reads time from and waits on."""

    virtual: bool

    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock."""


class RealClock:
    """The wall clock; what a production :class:`GraphRuntime` uses by default."""

    virtual = False

    def now(self) -> datetime:
        """The current UTC time."""
        return _REAL[2].fromtimestamp(_REAL[0]() / 1e9, UTC)

    def monotonic(self) -> float:
        """``time.monotonic()`` (the unpatched one)."""
        return _REAL[1]() / 1e9

    async def sleep(self, seconds: float) -> None:
        """Wait in real time."""
        await anyio.sleep(seconds)

    def __repr__(self) -> str:
        return "RealClock()"


class VirtualClock:
    """A clock that moves only when the runtime moves it.

    Time is kept as integer nanoseconds since ``start``, so sums of sleeps never drift.
    During a run under this clock, ``await anyio.sleep(d)`` (and ``asyncio.sleep``,
    ``trio.sleep``) in node code returns at once in real time and moves virtual time by ``d``;
    the runtime's scheduler *autojumps*: it advances time to the earliest pending wake-up as
    soon as every task of the batch is waiting, never while a task is running (so a worker
    thread or real I/O inside a node never sees time jump under it).

    Args:
        start: the virtual instant the clock starts at. Naive datetimes are taken as UTC.
            When ``None`` and a ``freezegun.freeze_time`` is active, the frozen instant is used
            (so the two cooperate); otherwise :data:`DEFAULT_START`.
        patch_wall_clock: read ``datetime.now()``/``time.time()`` in node code as virtual time
            (a C-level patch through time-machine, held only while a run is active; about a
            microsecond per run). ``False`` leaves the wall clock real in node code.
    """

    virtual = True

    def __init__(self, start: datetime | None = None, *, patch_wall_clock: bool = True) -> None:
        if start is None:
            start = _frozen_now() or DEFAULT_START
        if start is DEFAULT_START:  # the usual clock: its instants worked out once
            self.start, self.start_epoch_ns = DEFAULT_START, _DEFAULT_EPOCH_NS
        else:
            self.start, self.start_epoch_ns = _start_of(start)
        self.patch_wall_clock = patch_wall_clock
        self._ns = 0
        self._now_ns = -1
        self._now = self.start

    @property
    def elapsed(self) -> float:
        """Virtual seconds since ``start``."""
        return self._ns / 1e9

    @property
    def elapsed_ns(self) -> int:
        """Virtual nanoseconds since ``start``."""
        return self._ns

    def now(self) -> datetime:
        """The current virtual time (UTC)."""
        if self._now_ns != self._ns:
            self._now = self.start + timedelta(microseconds=self._ns // 1000)
            self._now_ns = self._ns
        return self._now

    def monotonic(self) -> float:
        """Virtual seconds since ``start``."""
        return self._ns / 1e9

    def advance(self, seconds: float) -> None:
        """Move virtual time forward by ``seconds`` (>= 0)."""
        if not seconds >= 0:
            raise InvalidArgument(f"VirtualClock.advance({seconds!r}): time only moves forward")
        self._ns += round(seconds * 1e9)

    def advance_to_ns(self, ns: int) -> None:
        """Move virtual time to ``ns`` since start; never backwards (clamped)."""
        if ns > self._ns:
            self._ns = ns

    async def sleep(self, seconds: float) -> None:
        """Outside a scheduled batch: advance at once and yield to the loop."""
        self.advance(max(0.0, seconds))
        await anyio.lowlevel.checkpoint()

    def __repr__(self) -> str:
        return f"VirtualClock(start={self.start.isoformat()}, elapsed={self.elapsed}s)"


def _start_of(start: object) -> tuple[datetime, int]:
    """A clock's ``start`` as an aware UTC datetime, and as nanoseconds since the epoch.

    Raises:
        InvalidArgument: ``start`` is not a datetime.
    """
    if not isinstance(start, datetime):
        raise InvalidArgument(f"VirtualClock(start={start!r}): start must be a datetime")
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    start = start.astimezone(UTC)
    return start, (int(start.replace(microsecond=0).timestamp()) * 1_000_000_000
                   + start.microsecond * 1000)


_DEFAULT_EPOCH_NS = _start_of(DEFAULT_START)[1]


def _frozen_now() -> datetime | None:
    """The instant a user's active ``freeze_time`` shows, if any."""
    api: Any = sys.modules.get("freezegun.api")  # not imported: nothing is frozen
    if api is None or not api.freeze_factories:
        return None
    factory: Any = api.freeze_factories[-1]
    from . import _wallclock

    if factory is _wallclock._factory:  # our own patch: the user's freeze_time is below it
        factory = _wallclock._stack[-1][1] if _wallclock._stack else None
        if factory is None:
            return None
    frozen: datetime = factory()
    return frozen.replace(tzinfo=UTC) if frozen.tzinfo is None else frozen
