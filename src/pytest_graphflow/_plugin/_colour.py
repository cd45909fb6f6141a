"""Colour in what the plugin prints, through pytest's terminal writer.

``config.get_terminal_writer()`` has markup exactly when pytest colours its own output:
``--color=yes`` always, ``--color=no`` never, ``--color=auto`` on a terminal unless
``NO_COLOR`` is set (``PY_COLORS``/``FORCE_COLOR`` as pytest reads them). Text is marked up
only then, so a report read from a pipe, a CI log or ``--color=no`` holds no escape code.

* the event diff (``assert trace.events == other``): the left side red, the right side
  green, the first differing row of the window bold;
* the ``graphflow`` failure section: ``raised:`` red, a leg's line by its status (failed red,
  interrupted yellow, completed green), ``reproduce:`` bold.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

__all__ = ["colour_diff", "colour_section", "markup_of"]

Markup = dict[str, bool]

_STATUS = re.compile(r"^(leg \d+: .*?): (completed|failed|interrupted|cancelled|timed_out),")
_STATUS_MARKUP: dict[str, Markup] = {
    "completed": {"green": True}, "failed": {"red": True}, "cancelled": {"red": True},
    "timed_out": {"red": True}, "interrupted": {"yellow": True}}


def markup_of(config: pytest.Config) -> Any:
    """The session's terminal writer when it colours, else ``None``."""
    writer = config.get_terminal_writer()
    return writer if writer.hasmarkup else None


def _diff_markup(line: str) -> Markup:
    stripped = line.lstrip()
    if stripped.startswith("left:") or line.startswith("    left:  "):
        return {"red": True}
    if stripped.startswith("right:"):
        return {"green": True}
    if line.startswith("  > "):
        return {"bold": True}
    return {}


def colour_diff(lines: list[str], config: pytest.Config) -> list[str]:
    """The event diff's lines, coloured when pytest colours."""
    writer = markup_of(config)
    if writer is None:
        return lines
    out = []
    for line in lines:
        markup = _diff_markup(line)
        out.append(writer.markup(line, **markup) if markup else line)
    return out


def _section_markup(line: str) -> Markup:
    if line.lstrip().startswith("raised:"):
        return {"red": True}
    if line.startswith("reproduce:"):
        return {"bold": True}
    found = _STATUS.match(line)
    if found is not None:
        return _STATUS_MARKUP[found.group(2)]
    return {}


def colour_section(text: str, config: pytest.Config) -> str:
    """The ``graphflow`` section's text, coloured when pytest colours."""
    writer = markup_of(config)
    if writer is None:
        return text
    out = []
    for line in text.splitlines():
        markup = _section_markup(line)
        out.append(writer.markup(line, **markup) if markup else line)
    return "\n".join(out)
