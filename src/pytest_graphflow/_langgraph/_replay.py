"""``--graphflow-processes`` for LangGraph harness runs: the same calls in a fresh interpreter.

A harness records what each of its legs was called with (the input, or the ``Command`` a
resume sends; an ``update_state``), the virtual instant it began at and its place among every
harness's calls. The harnesses of a test that share one saver (a harness, then a fresh one
over its saver after a crash: what a new process does) are replayed together, as one
*group*: :func:`recipe` packs their settings, graphs (:mod:`._replay_graph`), clocks and
calls into text a worker process can take; :func:`replay_recipe`, run there in a child that
imports the graphs' modules afresh, makes the same harnesses over one fresh saver, makes
the same calls in the same order and compares each harness's event log with the test's,
byte for byte. Fault rules that acted on a saver (a delay, a rejected or failed call, a
simulated crash) are replayed by position: the same calls of the same operations are
delayed, rejected, fail or crash again, with the same error (pickled: its class and
arguments; an error that does not pickle is counted as skipped).

A group cannot be replayed, and :func:`recipe` says why, when its graph cannot be named
(:mod:`._replay_graph`), when its saver held data when its first harness was made (an empty
``InMemorySaver`` is made again there), when something other than its harnesses called its
saver or wrote checkpoints into it (a plain LangGraph run, ``h.graph.invoke``), when a saver
was revived after a crash, or when a call's arguments do not pickle.
"""

from __future__ import annotations

import base64
import pickle
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..errors import SimulatedCrash
from ._replay_graph import graph_ref

if TYPE_CHECKING:
    from ._harness import LangGraphHarness

__all__ = ["groups", "recipe", "replay_recipe"]

_CHECKPOINT = re.compile(r"checkpoint ([^,\s]+)")


def groups(harnesses: Iterable[LangGraphHarness]) -> list[list[LangGraphHarness]]:
    """The harnesses by the saver they share (its inner saver), each group in the order
    they were made."""
    found: dict[int, list[LangGraphHarness]] = {}
    for harness in harnesses:
        found.setdefault(id(harness.saver.inner), []).append(harness)
    return [sorted(group, key=lambda h: h.replay_born) for group in found.values()]


def recipe(group: list[LangGraphHarness]) -> tuple[str | None, str]:
    """``(recipe, "")`` for a replayable group of harnesses (:func:`groups`), else ``(None,
    why not)``."""
    first = group[0]
    if not any(h.replay_calls for h in group):
        return None, "it ran no leg"
    if not first.own_saver:
        return None, ("it uses a saver of the test's own that held data when the harness was "
                      "made (a fresh interpreter cannot make it again)")
    unread = next((h.replay_broken for h in group if h.replay_broken.startswith("its saver")),
                  "")
    if unread:
        return None, unread
    savers: list[Any] = []
    clocks: list[Any] = []
    for h in group:
        if not any(h.saver is other for other in savers):
            savers.append(h.saver)
        if not any(h.clock is other for other in clocks):
            clocks.append(h.clock)
    faults: list[list[tuple[Any, ...]]] = []
    for saver in savers:
        acted, why = _faults(saver)
        if acted is None:
            return None, why
        faults.append(acted)
    why = _outside_calls(group, savers)
    if why:
        return None, why
    plans = []
    for h in group:
        ref, built, why = graph_ref(h)
        if ref is None and not built:
            return None, why
        plans.append({
            "graph": ref, "built": built, "born": h.replay_born, "calls": h.replay_calls,
            "saver": next(i for i, s in enumerate(savers) if s is h.saver),
            "clock": next(i for i, c in enumerate(clocks) if c is h.clock),
            "settings": {"seed": h.seed, "thread_id": h.thread_id, "durability": h.durability,
                         "config": h.config, "interrupt_before": h.interrupt_before_arg,
                         "interrupt_after": h.interrupt_after_arg, "context": h.context}})
    try:
        packed = pickle.dumps({"harnesses": plans, "clocks": [c.start for c in clocks],
                               "faults": faults})
    except Exception as exc:  # any pickling failure means "cannot replay"
        return None, f"its calls do not pickle ({type(exc).__name__})"
    return base64.b64encode(packed).decode("ascii"), ""


def _outside_calls(group: list[LangGraphHarness], savers: list[Any]) -> str:
    """Why something other than the group's harnesses used its saver, or ``""``: a call the
    harnesses' legs and updates did not make, or a checkpoint no call put."""
    for saver in savers:
        spent = 0
        for h in group:
            if h.saver is saver:
                for call in h.replay_calls:
                    if call[3] not in h.replay_spent:
                        return "one of its legs ended before it counted its saver calls"
                    spent += h.replay_spent[call[3]]
        if spent != len(saver.calls):
            return ("something other than its harnesses called its saver (a plain LangGraph "
                    "run, h.graph.invoke): a replay makes only the harnesses' calls")
    put = {m.group(1) for saver in savers for call in saver.calls if call.op == "put"
           for m in [_CHECKPOINT.search(call.args)] if m is not None}
    storage = getattr(group[0].saver.inner, "storage", {})
    held = {cid for namespaces in storage.values() for cps in namespaces.values()
            for cid in cps}
    if not held <= put:
        return ("something other than its harnesses wrote checkpoints into its saver: a "
                "replay makes only the harnesses' calls")
    return ""


def _faults(saver: Any) -> tuple[list[tuple[Any, ...]] | None, str]:
    """What the test's fault rules did to a saver, by call: ``(outcome, op, nth of op, delay,
    error repr, error)`` for each delayed, rejected or failed call (a replay makes the same
    happen at the same calls, raising the same error: its class and arguments, pickled) and
    ``("crashed", op, nth, delay, error repr, phase)`` for a simulated crash (the calls after
    it are dead again by themselves), or ``None`` and why not (an error that does not
    pickle, a saver revived after its crash)."""
    counts: dict[str, int] = {}
    out: list[tuple[Any, ...]] = []
    raised = list(getattr(saver, "_raised", ()))  # the errors the saver raised, in order
    crashed = False
    for call in saver.calls:
        counts[call.op] = nth = counts.get(call.op, 0) + 1
        if crashed and call.outcome != "dead":
            return None, ("its saver was revived after a simulated crash (a replay cannot "
                          "tell when)")
        if call.outcome == "dead":
            continue
        if call.outcome == "crashed":
            phase = _crash_phase(saver, call.op)
            if phase is None:
                return None, "a simulated crash ended its saver by a rule a replay cannot find"
            out.append(("crashed", call.op, nth, call.delay, call.error, phase))
            crashed = True
            continue
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


def _crash_phase(saver: Any, op: str) -> str | None:
    """The phase (``"before"``/``"after"``) of the crash rule that fired on ``op``."""
    from ._saver import _canon

    linked = getattr(saver, "_linked", None)
    rules = list(saver.rules) + ([] if linked is None else list(linked.rules))
    phases = {r.fault.phase for r in rules
              if r.fault.kind == "crash" and r.hits and _canon(r.fault.op) == op}
    return phases.pop() if len(phases) == 1 else None


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
        if outcome == "crashed":
            saver.crash_at(op, nth=nth, phase=error)
        elif outcome == "rejected":
            saver.reject_save(nth=nth, error=error)
        elif outcome == "failed":
            saver.fail(op, nth=nth, error=error)


def _faults_differ(saver: Any, faults: list[tuple[Any, ...]]) -> bool:
    """Whether the replay's injected calls differ from the test's (by operation, position,
    delay and the error's repr)."""
    again = _faults(saver)[0]
    return again is None or [f[:5] for f in again] != [f[:5] for f in faults]


def replay_recipe(recipe: str, expected: list[list[str]]) -> str | dict[str, str] | None:
    """Run a :func:`recipe` again; ``None`` when each harness's events are ``expected`` (JSON
    lines, one list per harness), else where they first differ (``{"skipped": why}`` when
    this interpreter cannot make the harnesses: a graph's module or an argument's class does
    not import here)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from .._graph._refs import resolve_ref
    from .._time._clock import VirtualClock
    from ._harness import LangGraphHarness
    from ._saver import FaultySaver

    try:
        plan = pickle.loads(base64.b64decode(recipe))  # our own recipe, from this test
        graphs = [resolve_ref(h["graph"]) if h["graph"] else pickle.loads(h["built"])
                  for h in plan["harnesses"]]
    except Exception as exc:
        return {"skipped": f"{type(exc).__name__}: {exc}"}
    clocks = [VirtualClock(start=start) for start in plan["clocks"]]
    inner = InMemorySaver()
    savers = [FaultySaver(inner) for _ in plan["faults"]]
    for saver, faults in zip(savers, plan["faults"], strict=True):
        _apply_faults(saver, faults)
    steps = sorted([(h["born"], i, None) for i, h in enumerate(plan["harnesses"])]
                   + [(call[3], i, call) for i, h in enumerate(plan["harnesses"])
                      for call in h["calls"]], key=lambda step: step[0])
    made: dict[int, LangGraphHarness] = {}
    for _, i, call in steps:
        spec = plan["harnesses"][i]
        if call is None:
            made[i] = LangGraphHarness(graphs[i], clock=clocks[spec["clock"]],
                                       saver=savers[spec["saver"]], **spec["settings"])
            continue
        harness, (op, args, at_ns, _) = made[i], call
        harness.clock.advance_to_ns(at_ns)
        try:
            if op == "leg":
                harness._leg(args)
            elif op == "cancel_leg":
                harness._leg(*args)
            else:
                harness._owned_update(*args)
        except (Exception, SimulatedCrash):  # it raised in the test too; the events tell
            continue
    for saver, faults in zip(savers, plan["faults"], strict=True):
        if _faults_differ(saver, faults):
            return {"skipped": "its fault rules raised errors a replay rule does not make"}
    for n, (want_all, i) in enumerate(zip(expected, range(len(made)), strict=True), start=1):
        got = [e.model_dump_json() for e in made[i].events]
        where = "" if len(made) == 1 else (
            f"harness {n} of {len(made)} (thread {made[i].thread_id!r}) ")
        for k, (want, have) in enumerate(zip(want_all, got, strict=False)):
            if want != have:
                return (f"{where}diverged at event {k} of {len(want_all)}:\n  recorded: "
                        f"{want}\n  replayed: {have}")
        if len(got) != len(want_all):
            return f"{where}the replay logged {len(got)} events, the test {len(want_all)}"
    return None
