"""``--graphflow-processes`` for LangGraph harness runs: the same calls in a fresh interpreter.

A harness records what each of its legs was called with (the input, or the ``Command`` a
resume sends; an ``update_state``) and the virtual instant it began at. :func:`recipe`
packs that, with the harness's settings and a ``"module:attr"`` reference to the graph the
test passed, into text a worker process can take; :func:`replay_recipe`, run there in a child
that imports the graph's module afresh, makes the same harness, makes the same calls and
compares the event log with the test's, byte for byte. Fault rules that acted on the saver
(a delay, a rejected or failed call) are replayed by position: the same calls of the same
operations are delayed, rejected or fail again, with the default error (a replay whose
errors then differ from the test's, a custom error class, is counted as skipped).

A harness cannot be replayed, and :func:`recipe` says why, when no imported module holds its
graph (built inside the test), when it wraps a saver of the test's own that held data (an
empty ``InMemorySaver`` is made again there), when a simulated crash ended its saver, when
something else wrote to its thread between its legs (another harness over the same saver),
or when a call's arguments do not pickle.
"""

from __future__ import annotations

import base64
import pickle
import sys
from typing import TYPE_CHECKING, Any

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
    faults, why = _faults(harness.saver.calls)
    if faults is None:
        return None, why
    ref = _ref(harness.source)
    if ref is None:
        return None, "its graph is not held by an importable module"
    settings = {"seed": harness.seed, "thread_id": harness.thread_id,
                "durability": harness.durability, "config": harness.config,
                "interrupt_before": harness.interrupt_before_arg,
                "interrupt_after": harness.interrupt_after_arg, "context": harness.context}
    try:
        packed = pickle.dumps({"graph": ref, "start": harness.clock.start,
                               "settings": settings, "calls": harness.replay_calls,
                               "faults": faults})
    except Exception as exc:  # any pickling failure means "cannot replay"
        return None, f"its calls do not pickle ({type(exc).__name__})"
    return base64.b64encode(packed).decode("ascii"), ""


def _faults(calls: Any) -> tuple[list[tuple[Any, ...]] | None, str]:
    """What the test's fault rules did to a saver (its ``calls``), by call: ``(outcome, op,
    nth of op, delay, error repr)`` for each delayed, rejected or failed call (a replay makes
    the same happen at the same calls), or ``None`` and why not (a simulated crash)."""
    counts: dict[str, int] = {}
    out: list[tuple[Any, ...]] = []
    for call in calls:
        counts[call.op] = nth = counts.get(call.op, 0) + 1
        if call.outcome in ("crashed", "dead"):
            return None, "a simulated crash ended its saver"
        injected = call.injected and call.outcome in ("rejected", "failed")
        if call.delay or injected:
            out.append((call.outcome if injected else "ok", call.op, nth, call.delay,
                        call.error if injected else None))
    return out, ""


def _apply_faults(saver: Any, faults: list[tuple[Any, ...]]) -> None:
    """Rules that act on the same calls as the test's did (default errors)."""
    for outcome, op, nth, delay, _ in faults:
        if delay:
            saver.delay(op, delay, nth=nth)
        if outcome == "rejected":
            saver.reject_save(nth=nth)
        elif outcome == "failed":
            saver.fail(op, nth=nth)


def _faults_differ(saver: Any, faults: list[tuple[Any, ...]]) -> bool:
    """Whether the replay's injected calls differ from the test's (another error class or
    message than the default one a replay rule raises)."""
    return _faults(saver.calls)[0] != faults


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
        graph = resolve_ref(plan["graph"])
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
