"""The order of every harness's calls in this process, for ``--graphflow-processes``: the
harnesses sharing a saver are replayed with their calls (and their making) in this order."""

from __future__ import annotations

import itertools

__all__ = ["replay_order"]

_ORDER = itertools.count()


def replay_order() -> int:
    """The next place among every harness's calls (and their making) in this process."""
    return next(_ORDER)
