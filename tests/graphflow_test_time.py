"""Times for hand-built events in the project's tests: the virtual clock's default start."""

from __future__ import annotations

from datetime import datetime, timedelta

from pytest_graphflow import DEFAULT_START

T0: datetime = DEFAULT_START
"""Where a :class:`VirtualClock` starts by default: 2025-01-01T00:00:00Z."""


def at(seconds: float) -> datetime:
    """``seconds`` after :data:`T0`."""
    return T0 + timedelta(seconds=seconds)
