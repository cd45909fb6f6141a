"""Checks that cross a process boundary: determinism under other interpreters, and recovery
from what a store really kept on its medium after a real process death.

Both run the graph in worker interpreters (:mod:`._pool`), so the graph is named the way a
fresh process can find it: ``"module:attr"`` text or a module-level factory function (a
compiled graph works too when an imported module holds it). Answers must be JSON (a mapping).

Costs (measured on a 2-core machine; see ``docs/hypothesis.md``): a worker interpreter costs
about 0.7 s of CPU once per session (the pool is reused by every check and every example);
after that a cross-process determinism check costs one run per worker, and a crash point of
the process-killing check costs two forks (a few milliseconds each) plus the run and the
recovery.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..._assert._repr import field_diff, format_event
from ..._graph._builder import CompiledGraph
from ..._graph._refs import find_graph_ref, ref_of
from ..._records._events import parse_event
from ...errors import InvalidArgument, SimulatedCrash
from .._progress import Progress, ProgressCallback, check_progress, report_progress
from ..checks._checks import Violation
from ._deadlock import deadlock_in_lines
from ._pool import DEFAULT_TIMEOUT, pool, request_all

__all__ = [
    "check_crash_recovery_across_processes",
    "check_determinism_across_processes",
]

GraphRef = str | CompiledGraph | Any


def graph_ref(graph: GraphRef) -> str:
    """``graph`` as ``"module:attr"`` text a worker can import."""
    if isinstance(graph, CompiledGraph):
        found = find_graph_ref(graph)
        if found is None:
            raise InvalidArgument(
                f"graph {graph.graph_id!r} is not held by an imported module, so another "
                "process cannot build it: pass 'module:attr' text or a module-level factory")
        return found
    return ref_of(graph, "graph")


def _json(value: Any, what: str) -> Any:
    if value is None:
        return None
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if callable(value):
        raise InvalidArgument(f"{what}={value!r}: another process needs the answers as data; "
                              "pass a mapping of '<node>:<id>' (or Interrupt.key) to answers")
    try:
        return json.loads(json.dumps(dict(value) if isinstance(value, Mapping) else value))
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{what}={value!r} is not JSON data ({exc})") from None


def check_determinism_across_processes(
    graph: GraphRef,
    input: Any = None,
    seed: int = 0,
    *,
    answers: Any = None,
    processes: int = 2,
    hashseeds: Sequence[int] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    progress: ProgressCallback | None = None,
) -> list[Violation]:
    """Run one seed in ``processes`` fresh interpreters, each with its own ``PYTHONHASHSEED``,
    and compare the event streams byte for byte.

    Catches what no check inside one process can: an order that depends on ``hash()`` of
    strings — the iteration order of a ``set`` of strings, a ``dict`` built from one,
    anything keyed on them — which is stable within a process and changes between processes
    (on another CI worker, after a resume in a fresh process).

    Args:
        graph: ``"module:attr"`` (a compiled graph, a ``Graph`` or a factory of one), a
            module-level factory function, or a compiled graph an imported module holds.
        input: the input (JSON data).
        seed: the runtime seed, the same in every process.
        answers: interrupt answers (JSON data), as for :func:`check_determinism`.
        processes: how many interpreters (>= 2).
        hashseeds: their ``PYTHONHASHSEED`` values (default ``1..processes``); workers are
            reused across calls.
        timeout: seconds one run may take in a worker.
        progress: ``progress(p: Progress)``, called once the interpreters have run (phase
            ``"interpreters"``).

    Returns:
        One ``"determinism-processes"`` violation naming the first event that differs (with
        both versions and the fields that differ), or nothing.
    """
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 2:
        raise InvalidArgument(f"processes={processes!r}: compare at least 2 interpreters")
    seeds = list(hashseeds) if hashseeds is not None else list(range(1, processes + 1))
    if len(seeds) != processes or len(set(seeds)) != processes:
        raise InvalidArgument(f"hashseeds={hashseeds!r}: give {processes} distinct seeds")
    request = {"op": "run", "graph": graph_ref(graph), "input": _json(input, "input"),
               "seed": seed, "answers": _json(answers, "answers")}
    progress = check_progress(progress, "check_determinism_across_processes")
    workers = pool(seeds)
    answers_ = request_all(workers, [request] * len(workers), timeout)
    report_progress(progress, Progress("check_determinism_across_processes", "interpreters",
                                       len(workers), len(workers), finished=True,
                                       detail=f"PYTHONHASHSEED {', '.join(map(str, seeds))}"))
    base = answers_[0]["events"]
    stuck = deadlock_in_lines(base, f"seed {seed} in a fresh interpreter")
    if stuck is not None:
        return [stuck]  # every interpreter waits the same way
    for hashseed, answer in zip(seeds[1:], answers_[1:], strict=True):
        lines = answer["events"]
        if lines == base:
            continue
        i = next((k for k, (a, b) in enumerate(zip(base, lines, strict=False)) if a != b),
                 min(len(base), len(lines)))
        text = [f"seed {seed} gave different event streams in two fresh interpreters "
                f"(PYTHONHASHSEED={seeds[0]} and {hashseed}); within one process it may well "
                "be stable: look for the order of a set or dict of strings, hash() or id() "
                f"in the node or route that produced event #{i}:"]
        a = parse_event(base[i]) if i < len(base) else None
        b = parse_event(lines[i]) if i < len(lines) else None
        text.append(f"  PYTHONHASHSEED={seeds[0]}: "
                    f"{format_event(a) if a is not None else '<end of stream>'}")
        text.append(f"  PYTHONHASHSEED={hashseed}: "
                    f"{format_event(b) if b is not None else '<end of stream>'}")
        if a is not None and b is not None:
            da, db = a.model_dump(mode="json"), b.model_dump(mode="json")
            for name in da:
                if da[name] != db.get(name):
                    text.extend(field_diff(name, da[name], db.get(name)))
        return [Violation("determinism-processes", i, "\n".join(text),
                          example=(seeds[0], hashseed))]
    return []


# --------------------------------------------------------------------------- crash recovery


def _covered(call: Sequence[Any], cp: dict[str, Any] | None) -> bool:
    """Whether the acknowledged checkpoint ``cp`` records effect ``call`` as done."""
    if cp is None:
        return False
    _node, task_id, step = call
    return bool(cp["next_step"] > step or (cp["next_step"] == step
                                            and task_id in cp["completed"]))


class _InProcess:
    """The in-process twin of a worker: the "death" is a ``SimulatedCrash`` and recovery
    reuses the store object (what the in-process checks do)."""

    def __init__(self) -> None:
        self.stores: dict[str, Any] = {}

    def request(self, req: dict[str, Any], timeout: float = 0) -> dict[str, Any]:
        from ..._graph._refs import resolve_ref
        from ._crashrun import run_child

        def die() -> None:
            raise SimulatedCrash("in-process crash")

        directory = req["directory"]
        store = self.stores.get(directory)
        if store is None:
            store = self.stores[directory] = resolve_ref(req["factory"])(directory)
        out = io.StringIO()
        killed = False
        try:
            run_child(req, out, req["op"] == "recover", die=die, store=store)
        except SimulatedCrash:
            killed = True
        return {"lines": [json.loads(line) for line in out.getvalue().splitlines()],
                "killed": killed}


def check_crash_recovery_across_processes(
    graph: GraphRef,
    input: Any = None,
    answers: Any = None,
    *,
    store_factory: Any,
    seed: int = 0,
    ops: Iterable[str] | None = ("save",),
    phases: Iterable[str] = ("before", "after"),
    points: Iterable[int] | None = None,
    claim_ttl: float = 30.0,
    in_process: bool = False,
    directory: str | Path | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    progress: ProgressCallback | None = None,
) -> list[Violation]:
    """Kill a real process at each chosen store operation, reopen the store from its medium in
    a fresh process, recover, and end where the crash-free run ends.

    A store that acknowledges a save and then loses it when the process dies (write-behind
    caching, batching, an async flush) passes the in-process :func:`check_crash_recovery`,
    whose "crashed" store object keeps what it buffered. Here the run happens in a forked
    child that SIGKILLs itself at the crash point (``"before"``: the operation never reaches
    the store; ``"after"``: it did, and the process dies before learning so), and the recovery
    runs in another fresh child that opens the store again with ``store_factory``. Checked:

    * ``durability``: the last checkpoint whose ``save`` returned before the death is in the
      reopened store;
    * ``crash-recovery``: the recovered run ends in the crash-free run's status and state;
    * ``effects``: ``write``/``external`` nodes completed as often as in the crash-free run,
      plus only the re-runs no acknowledged checkpoint could have prevented.

    Args:
        graph: ``"module:attr"``, a module-level factory, or a compiled graph a module holds.
        input: the input (JSON data).
        answers: interrupt answers (JSON data).
        store_factory: ``"module:attr"`` or a module-level function ``f(directory) -> store``
            that opens (or reopens) the store kept under ``directory`` — for example a
            ``SQLiteCheckpointStore`` on a file in it, or a client of your server keyed by it.
        seed: the runtime seed.
        ops: the store operations to crash at (default ``("save",)``; ``None``: every
            operation of the crash-free run, reads included — slower).
        phases: ``"before"`` and/or ``"after"``.
        points: indexes (from 0) into the crash-free run's list of chosen operations.
        claim_ttl: how far the recovering process's clock is past the dead one's (claims of
            the dead process expire).
        in_process: run the same procedure inside this process, the crash simulated and the
            store object reused — the in-process check's view, for comparison.
        directory: where the stores' folders go (default: a temporary folder).
        timeout: seconds one run may take in a worker.
        progress: ``progress(p: Progress)``, called after each crash point (phase ``"killed
            processes"``) and when they are done.
    """
    progress = check_progress(progress, "check_crash_recovery_across_processes")
    if not in_process and not hasattr(os, "fork"):
        raise InvalidArgument("check_crash_recovery(store_factory=...) kills forked processes, "
                              "which this platform does not have (POSIX only); pass "
                              "in_process=True for the in-process view")
    factory = ref_of(store_factory, "store_factory")
    base = {"graph": graph_ref(graph), "input": _json(input, "input"), "seed": seed,
            "answers": _json(answers, "answers"), "factory": factory}
    wanted_ops = None if ops is None else set(ops)
    # hash seed 1: the same worker the determinism checks start first (one fewer interpreter)
    worker: Any = _InProcess() if in_process else pool([1])[0]
    with tempfile.TemporaryDirectory(prefix="graphflow-crash-",
                                     dir=None if directory is None else str(directory)) as tmp:
        root = Path(tmp)
        counter = iter(range(1_000_000))

        def fresh_dir() -> str:
            path = root / f"store-{next(counter)}"
            path.mkdir()
            return str(path)

        oracle = worker.request({**base, "op": "crash_run", "directory": fresh_dir(),
                                 "kill": None}, timeout)
        result = _last(oracle, "result")
        if result is None:
            return [Violation("crash-recovery", None, "the crash-free run did not finish in "
                              f"its worker: {_error(oracle)}")]
        if result.get("deadlock"):
            return [Violation("deadlock", None, "the crash-free run: the run can never end: "
                              f"{result['deadlock']}")]
        want_calls = Counter(c[0] for c in result["calls"])
        chosen = [(line["op"], line["nth"]) for line in oracle["lines"]
                  if line["kind"] == "op" and (wanted_ops is None or line["op"] in wanted_ops)]
        keep = None if points is None else set(points)
        phases = list(phases)
        todo = [(op, nth, phase) for index, (op, nth) in enumerate(chosen)
                if keep is None or index in keep for phase in phases]
        tool = "check_crash_recovery_across_processes"
        violations: list[Violation] = []
        for n, (op, nth, phase) in enumerate(todo, start=1):
            where = f"a process killed at {op}() #{nth} ({phase})"
            violations += _one_point(worker, base, fresh_dir(), op, nth, phase, where,
                                     result, want_calls, claim_ttl, timeout)
            report_progress(progress, Progress(tool, "killed processes", n, len(todo),
                                               detail=f"{op}() #{nth} ({phase})"))
        report_progress(progress, Progress(tool, "killed processes", len(todo), len(todo),
                                           finished=True,
                                           detail=f"{len(violations)} violation(s)"))
    return violations


def _last(answer: dict[str, Any], kind: str) -> dict[str, Any] | None:
    found = [line for line in answer["lines"] if line["kind"] == kind]
    return found[-1] if found else None


def _error(answer: dict[str, Any]) -> str:
    err = _last(answer, "error")
    return "no report" if err is None else f"{err['error']}\n{err.get('traceback', '')}"


def _one_point(worker: Any, base: dict[str, Any], directory: str, op: str, nth: int,
               phase: str, where: str, oracle: dict[str, Any], want_calls: Counter[str],
               claim_ttl: float, timeout: float) -> list[Violation]:
    kill = {"op": op, "nth": nth, "phase": phase}
    crashed = worker.request({**base, "op": "crash_run", "directory": directory,
                              "kill": kill}, timeout)
    example = (op, nth, phase)
    if not crashed["killed"]:
        result = _last(crashed, "result")
        if result is None:
            return [Violation("crash-recovery", None, f"{where}: {_error(crashed)}",
                              example=example)]
        return _compare(where, result, oracle, Counter(c[0] for c in result["calls"]),
                        want_calls, Counter(), example)
    lines = crashed["lines"]
    before = lines[-1]["calls"] if lines else []
    acks = [line["checkpoint"] for line in lines if line["kind"] == "ack"]
    acked = acks[-1] if acks else None
    now = datetime.fromisoformat(lines[-1]["now"]) if lines else None
    clock = None if now is None else (now + timedelta(seconds=claim_ttl + 1)).isoformat()
    recovered = worker.request({**base, "op": "recover", "directory": directory,
                                "run_id": oracle["run_id"], "clock": clock,
                                "acked": None if acked is None else acked["id"]}, timeout)
    result = _last(recovered, "result")
    if result is None:
        return [Violation("crash-recovery", None, f"after {where}, recovery in a fresh process "
                          f"failed: {_error(recovered)}", example=example)]
    out: list[Violation] = []
    if acked is not None and result.get("present") is False:
        found = result.get("from")
        out.append(Violation(
            "durability", None,
            f"after {where}: checkpoint {acked['id']} was acknowledged (its save() returned) "
            "before the process died, but the store reopened from its medium does not have it "
            f"(its latest checkpoint of the run is {found['id'] if found else 'none'}): the "
            "store lost an acknowledged write", example=example))
    got_calls = Counter(c[0] for c in before) + Counter(c[0] for c in result["calls"])
    start = result.get("from")
    # Recovery re-runs what the checkpoint it found does not record; of those, the ones an
    # acknowledged checkpoint did record are the store's fault, not the crash's.
    rerun = [c for c in before if not _covered(c, start)]
    unavoidable = Counter(c[0] for c in rerun)
    lost = [c for c in rerun if _covered(c, acked)]
    if lost and acked is not None:
        tasks = ", ".join(f"{node!r} (task {task})" for node, task, _ in lost)
        out.append(Violation(
            "effects", None,
            f"after {where}: {len(lost)} effect(s) ran again in the recovering process although "
            f"checkpoint {acked['id']}, acknowledged before the death, recorded them as done: "
            f"{tasks}", example=example))
    out += _compare(f"after {where} and recovery in a fresh process", result, oracle,
                    got_calls, want_calls, unavoidable, example)
    return out


def _compare(where: str, got: dict[str, Any], want: dict[str, Any], got_calls: Counter[str],
             want_calls: Counter[str], unavoidable: Counter[str], example: Any
             ) -> list[Violation]:
    out: list[Violation] = []
    g = (got.get("status"), json.dumps(got.get("state"), sort_keys=True))
    w = (want.get("status"), json.dumps(want.get("state"), sort_keys=True))
    if g != w:
        out.append(Violation("crash-recovery", None, f"{where} the run ended {g[0]} with state "
                             f"{g[1]}; without the crash it ends {w[0]} with state {w[1]}",
                             example=example))
    for node in sorted(set(want_calls) | set(got_calls)):
        expected = want_calls[node] + unavoidable[node]
        if got_calls[node] != expected:
            why = (f" ({unavoidable[node]} re-run(s) expected: the checkpoint recovery started "
                   "from does not record them)") if unavoidable[node] else ""
            out.append(Violation("effects", None, f"{where}: node {node!r} completed "
                                 f"{got_calls[node]} time(s); expected {expected}{why}",
                                 example=example))
    return out
