"""Public classes and functions show the module users import them from (trio's
``fixup_module_metadata``).

``GraphRuntime`` is defined in ``pytest_graphflow._engine._runtime`` and exported as
``pytest_graphflow.GraphRuntime``; it gets ``__module__ = "pytest_graphflow"``, so its repr,
the exception line of a traceback, ``help()`` and pickle name the path users import from.
``__qualname__`` is kept. Pickle and ``"module:attr"`` references (``--graphflow-processes``,
history files) find the public path through the package's lazy ``__getattr__``.

The package imports its modules on first use, so the rewrite runs at three moments: when a
name is first read from ``pytest_graphflow`` (for every module imported by then,
:func:`show_loaded`), when a public front (``testing``, ``invariants``, ``strategies``, ...) is
imported (for its own names, :func:`show_public`), and when the pytest plugin hands a fixture's
object to a test. Only an object whose ``__module__`` is still private changes, and it gets one
home: ``pytest_graphflow`` when the package's table lists it, else the front that exports it.

The rewrite comes after each class is created, so pydantic models are already complete (built
with the namespace of the module that defines them).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterable, Mapping
from typing import Any

ROOT = "pytest_graphflow"

_DONE: set[str] = set()  # table modules whose names were all shown already


def _private(obj: Any, name: str) -> bool:
    module = getattr(obj, "__module__", None)
    return ((isinstance(obj, type) or inspect.isfunction(obj)) and isinstance(module, str)
            and module.startswith(ROOT + "._") and getattr(obj, "__name__", None) == name)


def show_public(front: str, namespace: Mapping[str, Any], names: Iterable[str]) -> None:
    """Show each class or function ``namespace[name]`` defined in a private module under
    ``front``, or under ``pytest_graphflow`` when the package's table lists that same object."""
    lazy: Mapping[str, str] = getattr(sys.modules[ROOT], "_LAZY", {})
    for name in names:
        obj = namespace.get(name)
        if not _private(obj, name):
            continue
        home = front
        if front != ROOT and name in lazy:
            listed = sys.modules.get(ROOT + lazy[name])
            if listed is not None and getattr(listed, name, None) is obj:
                home = ROOT
        obj.__module__ = home


def show_loaded() -> None:
    """Show the names of every module of the package's table imported so far under
    ``pytest_graphflow``."""
    table: Mapping[str, tuple[str, ...]] = getattr(sys.modules[ROOT], "_PUBLIC", {})
    for module, names in table.items():
        if module in _DONE:
            continue
        loaded = sys.modules.get(ROOT + module)
        if loaded is None:
            continue
        namespace = vars(loaded)
        show_public(ROOT, namespace, names)
        if all(name in namespace for name in names):  # not a module half-way through import
            _DONE.add(module)
