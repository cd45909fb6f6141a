"""A warning for ``time.sleep`` in node code of a virtual-clock run.

``time.sleep`` in a node blocks the event loop for real (0.5 s per call, every other task of
the batch waiting) and the virtual clock does not move, so the run neither waits the time it
means to nor stays fast. While a node of a virtual-clock run executes on the loop's thread,
``time.sleep`` warns with :class:`~pytest_graphflow.errors.BlockingSleepWarning` (an error
under ``filterwarnings = error``) and then sleeps as asked. Worker threads
(``anyio.to_thread.run_sync(time.sleep, ...)``) are left alone: they block nothing.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from .._time._clock import VirtualClock
from ..errors import BlockingSleepWarning
from ._node import CURRENT_TASK

__all__ = ["install_blocking_sleep_warning"]


def _on_loop_thread() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        pass
    try:
        import trio
    except ImportError:  # pragma: no cover - trio is optional
        return False
    try:
        trio.lowlevel.current_task()
        return True
    except RuntimeError:
        return False


def install_blocking_sleep_warning() -> None:
    """Wrap ``time.sleep`` to warn in node code of virtual-clock runs (idempotent)."""
    if getattr(time.sleep, "__graphflow__", False):
        return
    original = time.sleep

    def sleep(seconds: float, /) -> None:
        ctx = CURRENT_TASK.get()
        if ctx is not None and _on_loop_thread() and isinstance(_clock(ctx), VirtualClock):
            warnings.warn(BlockingSleepWarning(
                f"node {ctx.node!r} called time.sleep({seconds!r}) on the event loop of a "
                "virtual-clock run: it blocks the loop in real time and does not move the "
                "virtual clock; use `await anyio.sleep(...)` (or asyncio.sleep) in an async "
                "node"), stacklevel=2)
        original(seconds)

    sleep.__graphflow__ = True  # type: ignore[attr-defined]
    sleep.__wrapped__ = original  # type: ignore[attr-defined]
    time.sleep = sleep  # type: ignore[assignment]


def _clock(ctx: Any) -> Any:
    try:
        return ctx.clock
    except Exception:  # a context whose run is gone
        return None
