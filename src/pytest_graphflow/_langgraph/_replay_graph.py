"""``--graphflow-processes``: naming a harness's graph for a fresh interpreter.

A graph an imported module holds is named ``"module:attr"``. A graph no imported module holds
(built inside the test) is pickled by reference: its node functions, schemas and routers must
be module-level (imported afresh there), LangGraph's own objects go by value, a compiled graph
or subgraph goes as its builder and compile arguments, and the graph must come back the same;
a lambda, a nested function or a user object in it (a fake model whose state the test may
have changed) keeps it from a replay.
"""

from __future__ import annotations

import io
import pickle
import sys
import types
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ._harness import LangGraphHarness

__all__ = ["graph_ref"]


def graph_ref(harness: LangGraphHarness) -> tuple[str | None, bytes, str]:
    """``(ref, b"", "")`` for a graph a module holds, ``(None, pickled, "")`` for one built
    inside the test, ``(None, b"", why not)`` when neither works."""
    ref = _ref(harness.source)
    if ref is not None:
        return ref, b"", ""
    built, why = _built(harness)
    return None, built, why


def _ref(obj: Any) -> str | None:
    """A ``"module:attr"`` under which an imported module holds ``obj`` itself (modules that
    are not test modules first)."""
    found: list[str] = []
    for name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict) or name.startswith(("_", "pytest_graphflow")):
            continue
        found += [f"{name}:{attr}" for attr, value in list(namespace.items()) if value is obj]
    found.sort(key=lambda ref: (ref.split(":")[0].split(".")[-1].startswith(("test_",
                                                                            "conftest")), ref))
    return found[0] if found else None


# Objects a graph built inside a test may hold by value: LangGraph's and langchain-core's own
# (channels, node specs, branches), and plain data. Anything else (a fake model, a client, a
# user object a node is bound to) may have changed during the test: such a graph is skipped.
_BY_VALUE: Final = ("langgraph", "langchain_core", "pydantic", "typing", "typing_extensions",
                    "types", "builtins", "collections", "functools", "operator", "enum",
                    "uuid", "datetime", "decimal", "re", "abc")


def _recompile(builder: Any, kwargs: dict[str, Any]) -> Any:
    """A compiled graph made again from its builder (what :func:`_built` pickles it as)."""
    return builder.compile(**kwargs)


class _ByReference(pickle.Pickler):
    """Pickles a LangGraph graph with user code by reference only: module-level functions and
    classes are named (a fresh interpreter imports their modules afresh); a compiled graph
    (the graph, or a subgraph node) becomes its builder and compile arguments; any other user
    object refuses (its state may be the test's, not the graph's)."""

    def reducer_override(self, obj: Any) -> Any:
        from langgraph.graph.state import CompiledStateGraph

        if isinstance(obj, CompiledStateGraph):
            kwargs = {"interrupt_before": obj.interrupt_before_nodes or None,
                      "interrupt_after": obj.interrupt_after_nodes or None,
                      "debug": obj.debug, "name": obj.name}
            if obj.checkpointer in (True, False):  # a subgraph's own setting
                kwargs["checkpointer"] = obj.checkpointer
            return _recompile, (obj.builder, kwargs)
        if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType,
                            types.ModuleType)):
            return NotImplemented  # by reference (a lambda or nested function refuses)
        if type(obj).__module__.split(".")[0] not in _BY_VALUE:
            raise pickle.PicklingError(
                f"it holds a {type(obj).__module__}.{type(obj).__qualname__} object")
        return NotImplemented


_SAME: Final = ("interrupt_before_nodes", "interrupt_after_nodes", "step_timeout", "debug",
                "retry_policy", "cache_policy", "config", "store", "cache", "name",
                "input_channels", "output_channels", "stream_channels", "stream_mode")


def _built(harness: LangGraphHarness) -> tuple[bytes, str]:
    """A graph built inside the test, pickled by reference (:class:`_ByReference`) and checked
    to come back as the same graph; ``(b"", why not)`` when it cannot."""
    from ._harness import _revision

    source = harness.source
    buffer = io.BytesIO()
    try:
        _ByReference(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(source)
        again = pickle.loads(buffer.getvalue())
    except Exception as exc:  # any pickling failure means "cannot replay"
        detail = str(exc).replace("Can't pickle local object", "it holds a function "
                                  "defined inside a function,")
        return b"", (f"its graph is built inside the test, and {detail} (no module holds it "
                     "for a fresh interpreter; build it at module level)")
    compiled = again.compile() if hasattr(again, "add_node") else again
    original = source.compile() if hasattr(source, "add_node") else source
    if _revision(compiled) != _revision(original) or sorted(compiled.nodes) != sorted(
            original.nodes) or any(getattr(compiled, a, None) != getattr(original, a, None)
                                   for a in _SAME):
        return b"", ("its graph is built inside the test and its builder does not compile "
                     "again to the same graph")
    return buffer.getvalue(), ""
