"""Virtual wall-clock time in node code (SPEC §7), at a cost of microseconds per run.

While at least one virtual-clock run is active, the wall-clock functions answer *per task*:
in a node task of a virtual run (:data:`NODE_CLOCK` is set) they return that run's virtual
time; anywhere else real time, or the instant of the user's own ``time_machine.travel`` or
``freezegun.freeze_time``. Two drivers do it:

* **time-machine** (the default): a C-level patch of ``time.time``/``time_ns``/``gmtime``/
  ``localtime``/``strftime`` and ``datetime.now``/``utcnow``/``date.today``. Starting and
  stopping it swaps a few function pointers (under a microsecond) and reaches every
  reference, whatever the number of loaded modules; ``time.monotonic`` and
  ``time.perf_counter`` are never touched here (event loops read them; the LangGraph
  harness makes them virtual within its legs only, ``_langgraph/_loop.py``). We push one
  traveller of our own on time-machine's stack; it asks :data:`NODE_CLOCK` and otherwise
  defers to the traveller below it (the user's ``travel``) or to the real clock.
* **freezegun**, only while the user's own ``freeze_time`` is active (freezegun has replaced
  ``datetime.datetime`` then, and time-machine refuses to start): a nested ``freeze_time``
  (cheap: freezegun walks the modules only for the outermost one) whose time factory is ours.
  freezegun's fakes of ``time.monotonic``/``perf_counter`` are undone at once (research
  pitfalls P1, P2).

The patch is reference counted: the first run to start turns it on, the last to end turns it
off, also when a run raised.
"""

from __future__ import annotations

import sys
import threading
import time
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Protocol

__all__ = ["NODE_CLOCK", "NodeClock", "activate", "active", "deactivate"]


class NodeClock(Protocol):
    """What a node's wall-clock reads take from its run's ``VirtualClock`` (a protocol, so
    this module need not import the clock module, which imports it)."""

    @property
    def start_epoch_ns(self) -> int: ...

    @property
    def elapsed_ns(self) -> int: ...

    def now(self) -> datetime: ...


NODE_CLOCK: ContextVar[NodeClock | None] = ContextVar("graphflow_node_clock", default=None)
"""Set in node tasks of a virtual run: the clock their wall-clock reads come from."""

_lock = threading.RLock()
# freezegun levels we started: [freezer, the factory below ours, holds].
_stack: list[list[Any]] = []
# Kept in a tuple: freezegun replaces module attributes that point at the real datetime.
_REAL: tuple[type[datetime]] = (datetime,)


def _node_ns() -> int | None:
    """The virtual instant (ns since the epoch, in µs steps like ``clock.now()``) of the node
    task calling, or ``None`` outside node tasks."""
    clock = NODE_CLOCK.get()
    if clock is None:
        return None
    return clock.start_epoch_ns + clock.elapsed_ns // 1000 * 1000


# --------------------------------------------------------------------------- time-machine


class _TimeMachine:
    """Our traveller on time-machine's stack, with the number of runs holding it."""

    holds = 0
    traveller: Any = None
    modules: tuple[Any, Any] | None = None


_tm = _TimeMachine()


def _traveller_class() -> type[Any]:
    import _time_machine  # type: ignore[import-not-found]
    import time_machine

    class NodeTraveller(time_machine.Traveller):
        """Virtual time in node tasks; elsewhere what the traveller below (or reality) says."""

        def __init__(self) -> None:
            super().__init__(0, None, tick=False)

        def time_ns(self) -> int:
            ns = _node_ns()
            if ns is not None:
                return ns
            stack = time_machine.traveller_stack
            try:
                below = stack.index(self) - 1
            except ValueError:  # being removed by another thread
                below = -1
            if below >= 0:
                return stack[below].time_ns()
            return _time_machine.original_time_ns()  # type: ignore[no-any-return]

    return NodeTraveller


def _tm_modules() -> tuple[Any, Any]:
    """``_time_machine`` and ``time_machine``, imported once (at the first run)."""
    found = _tm.modules
    if found is None:
        import _time_machine
        import time_machine

        found = _tm.modules = (_time_machine, time_machine)
    return found


def _tm_start() -> None:
    _time_machine, time_machine = _tm.modules or _tm_modules()
    if _tm.traveller is None:
        _tm.traveller = _traveller_class()()
    stack = time_machine.traveller_stack
    # Push before patching, unpatch before popping: a patched function called meanwhile by
    # another thread always finds a traveller.
    stack.append(_tm.traveller)
    if len(stack) == 1:
        _time_machine.patch()


def _tm_stop() -> None:
    _time_machine, time_machine = _tm.modules or _tm_modules()
    stack = time_machine.traveller_stack
    if len(stack) == 1 and stack[0] is _tm.traveller:
        _time_machine.unpatch()
        stack.pop()
        return
    for i in range(len(stack) - 1, -1, -1):
        if stack[i] is _tm.traveller:
            del stack[i]
            break


# --------------------------------------------------------------------------- freezegun


def _freezegun_active() -> bool:
    """Whether a ``freeze_time`` (the user's, or ours above it) is active."""
    api = sys.modules.get("freezegun.api")
    return bool(api is not None and api.freeze_factories)


def _factory() -> datetime:
    clock = NODE_CLOCK.get()
    if clock is not None:
        return clock.now().replace(tzinfo=None)
    outer = _stack[-1][1] if _stack else None
    if outer is not None:
        return outer()  # type: ignore[no-any-return]
    return _REAL[0].now(UTC).replace(tzinfo=None)


def _fg_start() -> None:
    from freezegun import api, freeze_time

    if _stack and api.freeze_factories and api.freeze_factories[-1] is _factory:
        _stack[-1][2] += 1
        return
    outer = api.freeze_factories[-1] if api.freeze_factories else None
    was_started = bool(api.freeze_factories)
    freezer = freeze_time(_REAL[0](2000, 1, 1))
    freezer.start()
    api.freeze_factories[-1] = _factory  # type: ignore[call-overload]
    if not was_started:  # pragma: no cover - only used above the user's freeze_time
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


def _fg_stop() -> None:
    top = _stack[-1]
    top[2] -= 1
    if top[2] == 0:
        _stack.pop()
        top[0].stop()


# --------------------------------------------------------------------------- public


def active() -> bool:
    """Whether the wall-clock patch is on."""
    return bool(_stack) or _tm.holds > 0


def activate() -> str:
    """Turn the wall-clock patch on (reference counted; cheap while it is already on).

    Returns:
        the driver used, ``"time-machine"`` or ``"freezegun"``; pass it to
        :func:`deactivate`.
    """
    with _lock:
        api = sys.modules.get("freezegun.api")  # _freezegun_active(), inline (every run)
        if api is not None and api.freeze_factories:
            _fg_start()
            return "freezegun"
        if _tm.holds == 0:
            modules, traveller = _tm.modules, _tm.traveller
            if modules is None or traveller is None:
                _tm_start()
            else:  # _tm_start(), inline (every run)
                stack = modules[1].traveller_stack
                stack.append(traveller)  # pushed before patching, as _tm_start explains
                if len(stack) == 1:
                    modules[0].patch()
        _tm.holds += 1
        return "time-machine"


def deactivate(driver: str = "time-machine") -> None:
    """Release one hold of the wall-clock patch taken by :func:`activate`; the last one
    undoes the patch."""
    with _lock:
        if driver == "freezegun":
            if _stack:
                _fg_stop()
            return
        if _tm.holds == 0:
            return
        _tm.holds -= 1
        if _tm.holds == 0:
            modules = _tm.modules
            if modules is not None:
                stack = modules[1].traveller_stack
                if len(stack) == 1 and stack[0] is _tm.traveller:
                    modules[0].unpatch()  # _tm_stop()'s usual case, inline (every run)
                    stack.pop()
                    return
            _tm_stop()
