"""An opt-in lint for non-deterministic calls in node code: ``check_node_code(graph)``.

Node code that calls the ``random`` module, ``uuid.uuid1``/``uuid4``, ``os.urandom``,
or ``secrets`` gives another run every time, and ``time.sleep`` blocks the
event loop without moving the virtual clock. The lint reads each node's (and each route's)
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
import uuid
from collections.abc import Callable
from types import CodeType
from typing import Any

from .._graph._builder import CompiledGraph
from ._checks import Violation

__all__ = ["check_node_code"]

_USE = {
    "random": "ctx.random() (seeded per run and task)",
    "uuid": "ctx.uuid() (seeded per run and task)",
    "os": "ctx.random().randbytes(n)",
    "secrets": "ctx.random() in tests (secrets are never reproducible)",
    "time.sleep": "await anyio.sleep(...) in an async node (virtual time)",
}


def _banned() -> dict[int, tuple[str, str]]:
    out: dict[int, tuple[str, str]] = {}
    for name in ("random", "randint", "randrange", "choice", "choices", "shuffle", "sample",
                 "uniform", "gauss", "getrandbits", "randbytes", "seed", "betavariate",
                 "expovariate", "normalvariate", "triangular"):
        fn = getattr(random, name, None)
        if fn is not None:
            out[id(fn)] = (f"random.{name}", "random")
    for name in ("uuid1", "uuid4"):
        out[id(getattr(uuid, name))] = (f"uuid.{name}", "uuid")
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

    Rule ``"nondeterminism"``: calls of the ``random`` module, ``uuid.uuid1``/``uuid4``,
    ``os.urandom``, ``secrets`` and ``time.sleep``, each with its file and line and what to
    use instead (``ctx.random()``, ``ctx.uuid()``, ``await anyio.sleep(...)``). Wall-clock
    reads (``time.time()``, ``datetime.now()``) are not reported: under a ``VirtualClock``
    they read virtual time. Opt-in: call it from a test,
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
