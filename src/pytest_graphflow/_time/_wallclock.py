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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._clock import VirtualClock

__all__ = ["NODE_CLOCK", "activate", "active", "deactivate"]

NODE_CLOCK: ContextVar[VirtualClock | None] = ContextVar("graphflow_node_clock", default=None)
"""Set in node tasks of a virtual run: the clock their wall-clock reads come from."""

# One entry per freezegun level we started: [freezer, the factory below ours, users].
_stack: list[list[Any]] = []
# Kept in a tuple: freezegun replaces module attributes that point at the real datetime.
_REAL: tuple[type[datetime]] = (datetime,)


def _factory() -> datetime:
    clock = NODE_CLOCK.get()
    if clock is not None:
        return clock.now().replace(tzinfo=None)
    outer = _stack[-1][1] if _stack else None
    if outer is not None:
        return outer()  # type: ignore[no-any-return]
    return _REAL[0].now(UTC).replace(tzinfo=None)


def active() -> bool:
    """Whether the wall-clock patch is on."""
    return bool(_stack)


def activate() -> None:
    """Turn the wall-clock patch on (reference counted; cheap while it is already on).

    The plugin holds it for a whole test that uses the graph fixtures, so the ~3 ms freezegun
    start is paid once per test, not once per run. A user's ``freeze_time`` started on top
    of it is honoured: a run started then pushes the patch again above it.
    """
    from freezegun import api, freeze_time

    if _stack and api.freeze_factories and api.freeze_factories[-1] is _factory:
        _stack[-1][2] += 1
        return
    outer = api.freeze_factories[-1] if api.freeze_factories else None
    was_started = bool(api.freeze_factories)
    freezer = freeze_time(_REAL[0](2000, 1, 1))
    freezer.start()
    api.freeze_factories[-1] = _factory  # type: ignore[call-overload]
    if not was_started:
        _unfreeze_monotonic(api, freezer)
    _stack.append([freezer, outer, 1])


def _unfreeze_monotonic(api: Any, freezer: Any) -> None:
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
    for module, attribute, original in freezer.undo_changes:
        if id(getattr(module, attribute, None)) in reals:
            setattr(module, attribute, original)


def deactivate() -> None:
    """Release one hold of the wall-clock patch; the last one undoes every patch."""
    if not _stack:
        return
    top = _stack[-1]
    top[2] -= 1
    if top[2] == 0:
        _stack.pop()
        top[0].stop()
