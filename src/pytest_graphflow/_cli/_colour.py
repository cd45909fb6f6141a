"""Colour in what ``graphflow`` prints, through pytest's terminal writer.

``--color=auto`` (the default) colours only a terminal, and never when ``NO_COLOR`` is set
(``PY_COLORS`` and ``FORCE_COLOR`` work as in pytest); ``--color=yes`` always colours,
``--color=no`` never. Colour is added after :func:`._output.clean`, so only escapes the
command wrote itself ever reach the terminal.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from _pytest._io import TerminalWriter

__all__ = ["Colour", "add_colour_option"]

MODES = ("yes", "no", "auto")


def add_colour_option(parser: argparse.ArgumentParser, default: Any = "auto") -> None:
    """Add ``--color`` (``yes``, ``no`` or ``auto``, as pytest's)."""
    parser.add_argument("--color", choices=MODES, default=default,
                        help="colour the output: yes, no, or auto (a terminal, unless "
                             "NO_COLOR is set; the default)")


class Colour:
    """Marks up text for ``file`` as ``mode`` says: ``colour("failed", red=True)``."""

    def __init__(self, mode: str, file: TextIO) -> None:
        writer = TerminalWriter(file)
        if mode == "yes":
            writer.hasmarkup = True
        elif mode == "no":
            writer.hasmarkup = False
        self._writer = writer

    @property
    def enabled(self) -> bool:
        """Whether text gets escape codes."""
        return bool(self._writer.hasmarkup)

    def __call__(self, text: str, **markup: bool) -> str:
        """``text`` with ``markup`` (``red=True``, ``bold=True``, ...) when colour is on."""
        return self._writer.markup(text, **markup) if markup and self.enabled else text
