"""Progress of long work: ``explore()``, crash sweeps, store conformance, cross-process checks.

A tool reports a :class:`Progress` after each unit of work (a run, a crash point, an
example) and once more when a phase ends (``finished=True``), to the ``progress=`` callback
its caller passed and to every watcher (:func:`watching_progress`: the pytest plugin's
printer). Reporting costs a call when nobody listens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["Progress", "ProgressCallback", "check_progress", "report_progress",
           "watching_progress"]


@dataclass(frozen=True)
class Progress:
    """Where a long check stands, as its ``progress=`` callback receives it.

    Attributes:
        tool: the check (``"explore"``, ``"check_crash_recovery"``, ``"store conformance"``,
            ``"check_determinism_across_processes"``, ...).
        phase: what it is doing (``"schedules"``, ``"crash points"``, ``"examples"``, ...).
        done: units of the phase done so far (runs, crash points, examples).
        total: units the phase will do, when known (``explore(schedules="exhaustive")`` stops
            once every order is covered: ``None``).
        finished: the phase is over (``done`` is then its final count).
        detail: a short note on the last unit (``"seed 7"``) or, when finished, the outcome.
    """

    tool: str
    phase: str
    done: int
    total: int | None = None
    finished: bool = False
    detail: str = ""

    def __str__(self) -> str:
        count = f"{self.done}/{self.total}" if self.total is not None else str(self.done)
        if self.finished:
            tail = f": {self.detail}" if self.detail else ""
            return f"{self.tool}: {self.phase} done ({count}){tail}"
        tail = f" ({self.detail})" if self.detail else ""
        return f"{self.tool}: {self.phase} {count}{tail}"


ProgressCallback = Callable[[Progress], object]
"""A ``progress=`` callback: called with each :class:`Progress`; its result is ignored."""

_WATCHERS: list[ProgressCallback] = []


@contextmanager
def watching_progress(callback: ProgressCallback) -> Iterator[None]:
    """Call ``callback`` with the progress of every check run while the block runs."""
    _WATCHERS.append(callback)
    try:
        yield
    finally:
        _WATCHERS.remove(callback)


def check_progress(progress: object, where: str) -> ProgressCallback | None:
    """``progress`` checked: ``None`` or a callable (else :class:`InvalidArgument`)."""
    if progress is None or callable(progress):
        return progress
    from ..errors import InvalidArgument

    raise InvalidArgument(f"{where}(progress={progress!r}): pass a function "
                          "progress(p: Progress) -> None, or None")


def report_progress(callback: ProgressCallback | None, progress: Progress) -> None:
    """Hand ``progress`` to ``callback`` (the caller's) and to every watcher."""
    if callback is not None:
        callback(progress)
    for watcher in list(_WATCHERS):
        watcher(progress)
