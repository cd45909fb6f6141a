"""An opt-in lint for non-deterministic calls in node code: ``check_node_code(graph)``.

A deterministic run owns ``uuid.uuid4``/``uuid1`` and the ``random`` module in node code
(:mod:`..._time._entropy`); what it cannot own gives another run every time: ``os.urandom``,
``secrets``, ``random.SystemRandom``, and a ``random.random``/``getrandbits``/``seed`` bound
by ``from random import`` before the first runtime was made. ``time.sleep`` blocks the event
loop without moving the virtual clock. The lint reads each node's (and each route's)
bytecode (no source file needed), resolves the names it loads through the function's
globals and closure, and reports each use of such a function with its file and line and
what to use instead. It is opt-in (a test calls it): a node may have a good reason.
"""

from __future__ import annotations

import dis
import inspect
import os
import random
import secrets
import time
from collections.abc import Callable
from types import CodeType
from typing import Any

from ..._graph._builder import CompiledGraph
from ..._time._entropy import UNOWNED, install_entropy_hooks
from ._checks import Violation

__all__ = ["check_node_code"]

_USE = {
    "random": "`import random` and call it through the module, which deterministic runs own "
              "(a name bound by `from random import` before the first runtime is not), or "
              "ctx.random()",
    "os": "random.randbytes(n) or ctx.random().randbytes(n)",
    "system": "random.Random() or ctx.random() (seeded per run and task)",
    "secrets": "random or ctx.random() in tests (secrets are never reproducible)",
    "time.sleep": "await anyio.sleep(...) in an async node (virtual time)",
}


def _banned() -> dict[int, tuple[str, str]]:
    # What a deterministic run cannot own; the module attributes are the owned functions
    # only once the hooks are in (the first runtime installs them; so does the lint).
    install_entropy_hooks()
    out: dict[int, tuple[str, str]] = {}
    for name, fn in UNOWNED.items():
        out[id(fn)] = (name, "random")
    out[id(random.SystemRandom)] = ("random.SystemRandom", "system")
    out[id(os.urandom)] = ("os.urandom", "os")
    for name in ("token_hex", "token_bytes", "token_urlsafe", "choice", "randbelow",
                 "randbits"):
        out[id(getattr(secrets, name))] = (f"secrets.{name}", "secrets")
    sleep = time.sleep
    out[id(sleep)] = ("time.sleep", "time.sleep")
    out[id(getattr(sleep, "__wrapped__", sleep))] = ("time.sleep", "time.sleep")
    return out


def _scope(fn: Callable[..., Any]) -> dict[str, Any]:
    scope = dict(getattr(fn, "__globals__", {}))
    code = getattr(fn, "__code__", None)
    closure = getattr(fn, "__closure__", None)
    if code is not None and closure:
        for name, cell in zip(code.co_freevars, closure, strict=False):
            try:
                scope[name] = cell.cell_contents
            except ValueError:  # an empty cell
                continue
    return scope


_LOADS = {"LOAD_GLOBAL", "LOAD_DEREF", "LOAD_NAME", "LOAD_CLASSDEREF"}
_ATTRS = {"LOAD_ATTR", "LOAD_METHOD"}


def _uses(code: CodeType, scope: dict[str, Any], banned: dict[int, tuple[str, str]],
          out: list[tuple[int, str, str]]) -> None:
    """Scan ``code``'s bytecode (no source needed) for loads of a banned function:
    ``name`` or ``module.attr...`` resolved through ``scope``."""
    current: Any = None
    line = code.co_firstlineno
    for ins in dis.get_instructions(code):
        positions = getattr(ins, "positions", None)
        if positions is not None and positions.lineno is not None:
            line = positions.lineno
        if ins.opname in _LOADS:
            current = scope.get(ins.argval) if isinstance(ins.argval, str) else None
        elif ins.opname in _ATTRS and current is not None:
            current = getattr(current, ins.argval, None)
        else:
            current = None
            continue
        hit = banned.get(id(current)) if current is not None else None
        if hit is not None:
            out.append((line, hit[0], hit[1]))
            current = None
    for const in code.co_consts:
        if isinstance(const, CodeType):
            _uses(const, scope, banned, out)


def _calls(fn: Callable[..., Any], banned: dict[int, tuple[str, str]]) -> list[tuple[int, str,
                                                                                         str]]:
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    if not isinstance(code, CodeType):
        return []
    found: list[tuple[int, str, str]] = []
    _uses(code, _scope(fn), banned, found)
    return found


def check_node_code(graph: CompiledGraph) -> list[Violation]:
    """Report calls in node and route code that make runs differ or block the loop.

    Rule ``"nondeterminism"``: calls a deterministic run cannot own — ``os.urandom``,
    ``secrets``, ``random.SystemRandom``, a ``random.random``/``getrandbits``/``seed``/
    ``getstate``/``setstate`` bound by ``from random import`` before the first runtime — and
    ``time.sleep``, each with its file and line and what to use instead. ``uuid.uuid4``/
    ``uuid1`` and the ``random`` module's functions are owned (they draw from the task's
    seeded stream) and wall-clock reads (``time.time()``, ``datetime.now()``) read virtual
    time: neither is reported. Opt-in: call it from a test,
    ``assert check_node_code(build()) == []``.
    """
    banned = _banned()
    out: list[Violation] = []
    seen: set[int] = set()
    fns: list[tuple[str, Callable[..., Any]]] = [
        (f"node {name!r}", spec.fn) for name, spec in graph.nodes.items()]
    fns += [(f"route of {b.source!r}", b.route) for bs in graph.branches.values() for b in bs]
    for what, fn in fns:
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        filename = getattr(getattr(inspect.unwrap(fn), "__code__", None), "co_filename", "?")
        for line, call, kind in _calls(fn, banned):
            out.append(Violation("nondeterminism", None,
                                 f"{what} calls {call}() at {filename}:{line}: use "
                                 f"{_USE[kind]}", example=(filename, line)))
    return out
