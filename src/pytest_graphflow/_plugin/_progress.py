"""``--graphflow-progress``: what the plugin prints while a long check runs.

``explore()``, the crash sweeps, the store conformance machine and the cross-process checks
report a :class:`~pytest_graphflow.Progress` as they go; during a test the plugin prints it:

* ``lines``: a line per finished phase (``graphflow: explore: schedules done (24): every
  seed ended alike``);
* ``live``: a counter rewritten in place on the terminal, then the finished phase's line;
* ``none``: nothing;
* ``auto`` (the default): ``none`` under ``-q`` and on an xdist worker; ``lines`` under
  ``-v``; otherwise ``live`` on a terminal, and ``none`` when the output is not a terminal
  or ``CI`` is set (a CI log stays clean unless asked: ``-v`` or the option).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any, cast

import pytest

from .._properties._progress import Progress, watching_progress

__all__ = ["MODES", "ProgressPrinter", "progress_mode", "progress_option"]

MODES = ("auto", "lines", "live", "none")


def progress_option(value: str) -> str:
    """The ``--graphflow-progress`` value, checked."""
    if value in MODES:
        return value
    raise argparse.ArgumentTypeError(
        f"{value!r} is not a progress mode; use one of {', '.join(MODES)}")


def progress_mode(config: pytest.Config) -> str:
    """What to print: ``"lines"``, ``"live"`` or ``"none"`` (``auto`` resolved)."""
    value = config.getoption("graphflow_progress", None) or config.getini("graphflow_progress")
    mode = value or "auto"
    if mode not in MODES:
        raise pytest.UsageError(f"graphflow_progress = {mode!r} is not a progress mode; use "
                                f"one of {', '.join(MODES)}")
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if hasattr(config, "workerinput") or reporter is None:
        return "none"  # an xdist worker: its terminal is not the user's
    if mode != "auto":
        return mode
    verbosity = config.get_verbosity()
    if verbosity < 0:
        return "none"
    if verbosity > 0:
        return "lines"
    if os.environ.get("CI") or not _on_a_terminal(reporter):
        return "none"
    return "live"


def _on_a_terminal(reporter: Any) -> bool:
    file = getattr(getattr(reporter, "_tw", None), "_file", None) or sys.stdout
    isatty = getattr(file, "isatty", None)
    return bool(isatty is not None and isatty())


class ProgressPrinter:
    """Prints the progress of checks run by a test (registered as a plugin; what it prints is
    decided at the first test, once pytest's terminal reporter exists; printing nothing, it
    unregisters itself then, so that no later test pays for its hook).

    A test's output is captured while it runs (the terminal's file descriptor then points at
    the capture), so every write, and the terminal check, happens with capturing suspended,
    as pytest's live logging does.
    """

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._mode: str | None = None
        self._reporter: Any = None
        self._counting = False

    def _uncaptured(self) -> AbstractContextManager[object]:
        capture = self._config.pluginmanager.get_plugin("capturemanager")
        if capture is None:
            return nullcontext()
        return cast("AbstractContextManager[object]", capture.global_and_fixture_disabled())

    def __call__(self, progress: Progress) -> None:
        text = f"graphflow: {progress}"
        with self._uncaptured():
            if self._mode == "lines":
                if progress.finished:
                    self._reporter.write_line(text, cyan=True)
                return
            if not self._counting:
                self._reporter.ensure_newline()
                self._counting = True
            self._reporter.rewrite(text, cyan=True, erase=True)
            if progress.finished:
                self._reporter.write("\n")
                self._counting = False

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        """Print the progress of the checks the test runs."""
        if self._mode is None:
            with self._uncaptured():
                self._mode = progress_mode(self._config)
            self._reporter = self._config.pluginmanager.get_plugin("terminalreporter")
        if self._mode == "none":  # for the whole session: no hook around later tests
            if self._config.pluginmanager.is_registered(self):
                self._config.pluginmanager.unregister(self)
            return (yield)
        with watching_progress(self):
            try:
                return (yield)
            finally:
                if self._counting:  # a check that failed midway: end its counter's line
                    with self._uncaptured():
                        self._reporter.write("\n")
                    self._counting = False
