"""Installing the process-wide hooks lazily: nothing is patched until a runtime is used.

Importing pytest-graphflow patches nothing. The first :class:`GraphRuntime` patches
``asyncio.sleep``, anyio's asyncio sleep, ``anyio.to_thread.run_sync`` and the sources of
entropy node code uses (``uuid``, ``random``: see :mod:`._entropy`); trio's
``trio.sleep``, anyio's trio sleep and ``trio.to_thread.run_sync`` are patched by the first
run that starts once trio is imported (a run on trio imports it first), so trio is never
imported for nothing.
"""

from __future__ import annotations

import sys

from ._entropy import install_entropy_hooks
from ._sched import install_sleep_hooks, install_trio_sleep_hooks
from ._vloop import install_thread_guards, install_trio_thread_guards

__all__ = ["INSTALLED", "install_hooks"]

_done = [False, False]  # asyncio side, trio side
INSTALLED = _done
"""What :func:`install_hooks` installed, ``[asyncio side, trio side]`` (read it without a
call: once the asyncio side is in and trio is not imported, there is nothing to do)."""


def install_hooks() -> None:
    """Install the sleep hooks and thread guards still missing (cheap once installed)."""
    if _done[1]:
        return
    if not _done[0]:
        install_sleep_hooks()
        install_thread_guards()
        install_entropy_hooks()
        _done[0] = True
    if "trio" in sys.modules:
        install_trio_sleep_hooks()
        install_trio_thread_guards()
        _done[1] = True
