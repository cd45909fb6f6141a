"""Virtual wall-clock time in node code, through freezegun (SPEC §7).

While at least one virtual-clock run is active, freezegun is started once (reference
counted) with a time factory that answers *per task*: in a node task of a virtual run it
returns that run's virtual time; anywhere else it returns real time (or the instant of the
user's own ``freeze_time``, when one is active). freezegun's fakes of ``time.monotonic`` and
``time.perf_counter`` are undone at once, because event loops (asyncio and trio) read them and
hang when they stand still (research pitfalls P1, P2). When the last run ends, freezegun is
stopped and every patch is undone, also when the run raised.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from ._clock import VirtualClock

__all__ = ["NODE_CLOCK", "activate", "active", "deactivate"]

NODE_CLOCK: ContextVar[VirtualClock | None] = ContextVar("graphflow_node_clock", default=None)
"""Set in node tasks of a virtual run: the clock their wall-clock reads come from."""

_count = 0
_freezer: Any = None
_outer: Any = None
# Kept in a tuple: freezegun replaces module attributes that point at the real datetime.
_REAL: tuple[type[datetime]] = (datetime,)


def _factory() -> datetime:
    clock = NODE_CLOCK.get()
    if clock is not None:
        return clock.now().replace(tzinfo=None)
    if _outer is not None:
        return _outer()  # type: ignore[no-any-return]
    return _REAL[0].now(UTC).replace(tzinfo=None)


def active() -> bool:
    """Whether the wall-clock patch is on."""
    return _count > 0


def activate() -> None:
    """Turn the wall-clock patch on (reference counted)."""
    global _count, _freezer, _outer
    _count += 1
    if _count > 1:
        return
    from freezegun import api, freeze_time

    _outer = api.freeze_factories[-1] if api.freeze_factories else None
    was_started = bool(api.freeze_factories)
    _freezer = freeze_time(_REAL[0](2000, 1, 1))
    try:
        _freezer.start()
    except BaseException:
        _count -= 1
        _freezer = None
        raise
    api.freeze_factories[-1] = _factory  # type: ignore[call-overload]
    if not was_started:
        _unfreeze_monotonic(api)


def _unfreeze_monotonic(api: Any) -> None:
    reals = {
        id(api.fake_monotonic): api.real_monotonic,
        id(api.fake_perf_counter): api.real_perf_counter,
    }
    for name in ("monotonic_ns", "perf_counter_ns"):
        fake = getattr(api, f"fake_{name}", None)
        if fake is not None:
            reals[id(fake)] = getattr(api, f"real_{name}")
    for name in ("monotonic", "perf_counter", "monotonic_ns", "perf_counter_ns"):
        current = getattr(time, name, None)
        if current is not None and id(current) in reals:
            setattr(time, name, reals[id(current)])
    for module, attribute, original in _freezer.undo_changes:
        if id(getattr(module, attribute, None)) in reals:
            setattr(module, attribute, original)


def deactivate() -> None:
    """Turn the wall-clock patch off once the last user is done."""
    global _count, _freezer, _outer
    if _count == 0:
        return
    _count -= 1
    if _count:
        return
    freezer, _freezer = _freezer, None
    _outer = None
    if freezer is not None:
        freezer.stop()
