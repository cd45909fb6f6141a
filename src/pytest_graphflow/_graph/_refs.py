"""Naming a graph across processes and sessions: ``"module:attr"`` references.

A history file or a child process cannot hold a graph object, so it holds where to import it
from: ``"package.module:name"``, where ``name`` (dots allowed) is a :class:`CompiledGraph`, a
:class:`Graph` (compiled on import), or a function of no arguments returning either (a
factory, for graphs built around objects such as API clients).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from ..errors import InvalidArgument
from ._builder import CompiledGraph, Graph

__all__ = ["find_graph_ref", "ref_of", "resolve_graph", "resolve_ref"]


def ref_of(obj: Any, what: str) -> str:
    """``obj`` as a ``"module:attr"`` reference: text is kept, a module-level function or
    class becomes ``"its.module:its_name"``.

    Raises:
        InvalidArgument: a lambda, a nested function or another object with no import path.
    """
    if isinstance(obj, str):
        return obj
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None)
    if module and name and "<" not in name and module != "__main__":
        return f"{module}:{name}"
    raise InvalidArgument(f"{what}={obj!r} cannot be named in another process: pass "
                          "'module:attr' text or a function defined at module level "
                          "(not a lambda, a nested function or one in __main__)")


def resolve_ref(ref: str) -> Any:
    """The object ``ref`` (``"module:attr"``) names.

    Raises:
        InvalidArgument: a malformed reference, a module that does not import, a missing
            attribute.
    """
    if not isinstance(ref, str):
        raise InvalidArgument(f"reference {ref!r} must be text 'module:attr'")
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise InvalidArgument(f"reference {ref!r} is not 'module:attr'; name the module and "
                              "the object in it, e.g. 'myapp.graphs:build'")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise InvalidArgument(f"reference {ref!r}: cannot import {module_name!r} "
                              f"({type(exc).__name__}: {exc}); put it on sys.path "
                              "(PYTHONPATH, or pytest's pythonpath ini key)") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise InvalidArgument(f"reference {ref!r}: {module_name!r} has no attribute "
                                  f"{attr!r}") from None
    return obj


def resolve_graph(ref: str) -> CompiledGraph:
    """The compiled graph ``ref`` (``"module:attr"``) names.

    Raises:
        InvalidArgument: a malformed reference, a module that does not import, a missing
            attribute, or an object that is not a graph or a graph factory.
    """
    obj = resolve_ref(ref)
    if callable(obj) and not isinstance(obj, (Graph, CompiledGraph, type)):
        obj = obj()
    if isinstance(obj, Graph):
        obj = obj.compile()
    if not isinstance(obj, CompiledGraph):
        raise InvalidArgument(f"graph reference {ref!r} names a {type(obj).__name__}; name a "
                              "CompiledGraph, a Graph or a function returning one")
    return obj


def find_graph_ref(graph: CompiledGraph) -> str | None:
    """A ``"module:attr"`` under which an imported module holds ``graph`` itself (or the graph
    it is a ``with_policy`` twin of), preferring modules that are not test modules; ``None``
    if none does.

    Another graph with the same id and revision is not ``graph``: one builder compiled twice
    around different node functions (two fakes, say) gives two such graphs, and the one that
    did not run would take another path.
    """
    found: list[str] = []
    # A with_policy twin is a shallow copy: it shares the compiled graph's node table. (A
    # view of another runtime's graph, such as the LangGraph bridge's, has none.)
    nodes = getattr(graph, "nodes", None)
    for name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict) or name.startswith(("_", "pytest_graphflow")):
            continue
        for attr, value in list(namespace.items()):
            if isinstance(value, CompiledGraph) and (
                    value is graph or (nodes is not None and value.nodes is nodes)):
                found.append(f"{name}:{attr}")
    found.sort(key=lambda ref: (ref.rpartition(".")[2].startswith(("test_", "conftest")),
                                ref.split(":")[0].split(".")[-1].startswith("test_"), ref))
    return found[0] if found else None
