"""``--graphflow-processes`` for LangGraph harness runs: the same calls in a fresh interpreter.

A harness records what each of its legs was called with (the input, or the ``Command`` a
resume sends; an ``update_state``) and the virtual instant it began at. :func:`recipe`
packs that, with the harness's settings and a ``"module:attr"`` reference to the graph the
test passed, into text a worker process can take; :func:`replay_recipe`, run there in a child
that imports the graph's module afresh, makes the same harness, makes the same calls and
compares the event log with the test's, byte for byte. Fault rules that acted on the saver
(a delay, a rejected or failed call) are replayed by position: the same calls of the same
operations are delayed, rejected or fail again, with the same error (pickled: its class and
arguments; an error that does not pickle is counted as skipped).

A graph no imported module holds (built inside the test) is pickled by reference: its node
functions, schemas and routers must be module-level (imported afresh there), LangGraph's own
objects go by value, a compiled graph or subgraph goes as its builder and compile arguments,
and the graph must come back the same; a lambda, a nested function or a user object in it
(a fake model whose state the test may have changed) keeps it from a replay.

A harness cannot be replayed, and :func:`recipe` says why, when its graph holds any of
those, when it wraps a saver of the test's own that held data (an
empty ``InMemorySaver`` is made again there), when a simulated crash ended its saver, when
something else wrote to its thread between its legs (another harness over the same saver),
or when a call's arguments do not pickle.
"""

from __future__ import annotations

import base64
import io
import pickle
import sys
import types
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ._harness import LangGraphHarness

__all__ = ["recipe", "replay_recipe"]


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


def recipe(harness: LangGraphHarness) -> tuple[str | None, str]:
    """``(recipe, "")`` for a replayable harness, else ``(None, why not)``."""
    if not harness.replay_calls:
        return None, "it ran no leg"
    if not harness.own_saver:
        return None, "it uses a saver of the test's own"
    if harness.replay_broken:
        return None, harness.replay_broken
    faults, why = _faults(harness.saver)
    if faults is None:
        return None, why
    ref = _ref(harness.source)
    built = b""
    if ref is None:
        built, why = _built(harness)
        if not built:
            return None, why
    settings = {"seed": harness.seed, "thread_id": harness.thread_id,
                "durability": harness.durability, "config": harness.config,
                "interrupt_before": harness.interrupt_before_arg,
                "interrupt_after": harness.interrupt_after_arg, "context": harness.context}
    try:
        packed = pickle.dumps({"graph": ref, "built": built, "start": harness.clock.start,
                               "settings": settings, "calls": harness.replay_calls,
                               "faults": faults})
    except Exception as exc:  # any pickling failure means "cannot replay"
        return None, f"its calls do not pickle ({type(exc).__name__})"
    return base64.b64encode(packed).decode("ascii"), ""


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


def _faults(saver: Any) -> tuple[list[tuple[Any, ...]] | None, str]:
    """What the test's fault rules did to a saver, by call: ``(outcome, op, nth of op, delay,
    error repr, error)`` for each delayed, rejected or failed call (a replay makes the same
    happen at the same calls, raising the same error: its class and arguments, pickled), or
    ``None`` and why not (a simulated crash; an error that does not pickle)."""
    counts: dict[str, int] = {}
    out: list[tuple[Any, ...]] = []
    raised = list(getattr(saver, "_raised", ()))  # the errors the saver raised, in order
    for call in saver.calls:
        counts[call.op] = nth = counts.get(call.op, 0) + 1
        if call.outcome in ("crashed", "dead"):
            return None, "a simulated crash ended its saver (a fresh harness goes on over it)"
        injected = call.injected and call.outcome in ("rejected", "failed")
        error = None
        if injected:
            error = next((e for e in raised if repr(e) == call.error), None)
            if error is not None:
                raised.remove(error)
            if not _pickles(error):
                return None, (f"its fault rules raised {call.error}, which does not pickle "
                              "(a fresh interpreter cannot raise it again)")
        if call.delay or injected:
            out.append((call.outcome if injected else "ok", call.op, nth, call.delay,
                        call.error if injected else None, error))
    return out, ""


def _pickles(error: BaseException | None) -> bool:
    """Whether ``error`` comes back from pickle as itself (its class, its repr)."""
    try:
        again = pickle.loads(pickle.dumps(error))
    except Exception:  # any pickling failure means "cannot replay"
        return False
    return type(again) is type(error) and repr(again) == repr(error)


def _apply_faults(saver: Any, faults: list[tuple[Any, ...]]) -> None:
    """Rules that act on the same calls as the test's did, raising the same errors."""
    for outcome, op, nth, delay, _, error in faults:
        if delay:
            saver.delay(op, delay, nth=nth)
        if outcome == "rejected":
            saver.reject_save(nth=nth, error=error)
        elif outcome == "failed":
            saver.fail(op, nth=nth, error=error)


def _faults_differ(saver: Any, faults: list[tuple[Any, ...]]) -> bool:
    """Whether the replay's injected calls differ from the test's (by operation, position,
    delay and the error's repr)."""
    again = _faults(saver)[0]
    return again is None or [f[:5] for f in again] != [f[:5] for f in faults]


def replay_recipe(recipe: str, expected: list[str]) -> str | dict[str, str] | None:
    """Run a :func:`recipe` again; ``None`` when its events are ``expected`` (JSON lines),
    else where they first differ (``{"skipped": why}`` when this interpreter cannot make the
    harness: its graph's module or an argument's class does not import here)."""
    from .._graph._refs import resolve_ref
    from .._time._clock import VirtualClock
    from ._harness import LangGraphHarness

    try:
        plan = pickle.loads(base64.b64decode(recipe))  # our own recipe, from this test
        clock = VirtualClock(start=plan["start"])
        graph = resolve_ref(plan["graph"]) if plan["graph"] else pickle.loads(plan["built"])
    except Exception as exc:
        return {"skipped": f"{type(exc).__name__}: {exc}"}
    harness = LangGraphHarness(graph, clock=clock, **plan["settings"])
    _apply_faults(harness.saver, plan.get("faults", []))
    for op, args, at_ns in plan["calls"]:
        clock.advance_to_ns(at_ns)
        try:
            if op == "leg":
                harness._leg(args)
            elif op == "cancel_leg":
                harness._leg(*args)
            else:
                harness._owned_update(*args)
        except Exception:  # it raised in the test too; the events tell
            continue
    if _faults_differ(harness.saver, plan.get("faults", [])):
        return {"skipped": "its fault rules raised errors a replay rule does not make"}
    got = [e.model_dump_json() for e in harness.events]
    for i, (want, have) in enumerate(zip(expected, got, strict=False)):
        if want != have:
            return (f"diverged at event {i} of {len(expected)}:\n  recorded: {want}\n"
                    f"  replayed: {have}")
    if len(got) != len(expected):
        return f"the replay logged {len(got)} events, the test {len(expected)}"
    return None
