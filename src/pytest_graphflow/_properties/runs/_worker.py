"""The child side of the cross-process checks:
``python -m pytest_graphflow._properties.runs._worker``.

A worker is a fresh interpreter (its own ``PYTHONHASHSEED``) that reads one JSON request a
line on stdin and writes one JSON answer a line on its protocol channel (the original stdout;
what node code prints goes to stderr). It stays alive between requests, so a pool of workers
is paid for once per session. Operations:

* ``ping``: the worker's hash seed and pid;
* ``call``: call a function named ``"module:attr"`` with JSON keyword arguments;
* ``fresh_call``: the same call in a forked child that imports everything else afresh (what
  ``--graphflow-processes`` replays run in: a module-level fake a node mutates starts from
  its import-time state every time). A worker serving these imports only pytest-graphflow
  itself, never the modules a call names; where ``fork`` is missing it answers one call and
  exits, and the pool starts a fresh one;
* ``run``: run a graph (``"module:attr"``) with an input, a seed and answers on a fresh
  in-memory store; answer the event stream as JSON lines;
* ``crash_run``: fork a child that opens a store from a factory and runs the graph, reporting
  every store operation, every acknowledged save and every completed effectful call as it
  goes; with ``kill``, the child SIGKILLs itself at the chosen store operation (before it
  reaches the store or after it returned) — a real process death: no ``finally``, no flush;
* ``recover``: fork a fresh child that reopens the store from its medium and recovers the
  run, as a new process of a real deployment would.

Forking from a worker that has imported everything keeps a crash point cheap (milliseconds),
and the forked child shares nothing in memory with the one that died.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from typing import Any

from ._crashrun import run_child

__all__ = ["main"]


def _die() -> None:
    sys.stdout.flush()
    if hasattr(signal, "SIGKILL"):
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(137)  # pragma: no cover - platforms without SIGKILL


def _setup(req: dict[str, Any]) -> None:
    for entry in reversed(req.get("path", [])):
        if entry not in sys.path:
            sys.path.insert(0, entry)


def _run(req: dict[str, Any]) -> dict[str, Any]:

    from ..._graph._refs import resolve_graph
    from ..._stores._memory import InMemoryCheckpointStore
    from ._drive import _runtime, drive

    graph = resolve_graph(req["graph"])

    from ..._time._loops import run_sync_owned

    runtime = _runtime(InMemoryCheckpointStore(), req["seed"])

    async def go() -> Any:
        return await drive(runtime, graph, req.get("input"), req.get("answers"))

    # On the loop the runtime owns, as invoke() runs it: virtual timers, no hang.
    d = run_sync_owned(go, runtime.clock)
    return {"events": [e.model_dump_json() for e in d.events],
            "status": d.result.status if d.result is not None else None}


def _call(req: dict[str, Any]) -> dict[str, Any]:
    from ..._graph._refs import resolve_ref

    return {"value": resolve_ref(req["fn"])(**req.get("kwargs", {}))}


def _fresh_call(req: dict[str, Any]) -> dict[str, Any]:
    """``_call`` in a forked child: nothing the call imports or changes outlives it."""
    module = str(req.get("fn", "")).partition(":")[0]
    if module.startswith("pytest_graphflow."):  # warm: each fork starts with it imported
        import importlib

        importlib.import_module(module)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_fd)
        try:
            with os.fdopen(write_fd, "w") as out:
                try:
                    sent = {"ok": True, **_call(req)}
                except BaseException as exc:
                    sent = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                            "traceback": traceback.format_exc()}
                out.write(json.dumps(sent))
                out.flush()
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as reader:
        text = reader.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        raise RuntimeError(f"the forked replay process exited (status "
                           f"{os.waitstatus_to_exitcode(status)}) before answering")
    answer: dict[str, Any] = json.loads(text)
    if not answer.pop("ok"):
        raise RuntimeError(f"{answer['error']}\n{answer.get('traceback', '')}")
    return answer


_WARM: set[str] = set()


def _warm(req: dict[str, Any]) -> None:
    """Import what a child needs before forking, so each fork starts warm (milliseconds)."""
    key = f"{req.get('graph')}|{req.get('factory')}"
    if key in _WARM:
        return
    import anyio

    from ..._graph._refs import resolve_graph, resolve_ref
    from ..strategies import _instrument  # noqa: F401
    from . import _drive  # noqa: F401

    async def nothing() -> None:
        return None

    anyio.run(nothing)
    resolve_graph(req["graph"])
    resolve_ref(req["factory"])
    _WARM.add(key)


def _fork(req: dict[str, Any], recover: bool) -> dict[str, Any]:
    """Run the child body in a forked process; collect what it reported and how it ended."""
    _warm(req)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_fd)
        code = 0
        try:
            with os.fdopen(write_fd, "w") as out:
                try:
                    run_child(req, out, recover, die=_die)
                except BaseException as exc:  # report, then exit without running finalizers
                    out.write(json.dumps({"kind": "error", "error": f"{type(exc).__name__}: "
                                          f"{exc}", "traceback": traceback.format_exc()}) + "\n")
                    out.flush()
                    code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    lines: list[dict[str, Any]] = []
    with os.fdopen(read_fd) as reader:
        for line in reader:
            lines.append(json.loads(line))
    _, status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == getattr(signal, "SIGKILL", -1)
    return {"lines": lines, "killed": killed, "exit": os.waitstatus_to_exitcode(status)}


def _answer(req: dict[str, Any]) -> dict[str, Any]:
    op = req.get("op")
    _setup(req)
    if op == "ping":
        return {"hashseed": os.environ.get("PYTHONHASHSEED"), "pid": os.getpid()}
    if op == "run":
        return _run(req)
    if op == "call":
        return _call(req)
    if op == "fresh_call":
        return _fresh_call(req) if hasattr(os, "fork") else _call(req)
    if op == "crash_run":
        return _fork(req, recover=False)
    if op == "recover":
        return _fork(req, recover=True)
    raise ValueError(f"unknown operation {op!r}")


def main() -> None:
    """Serve requests until stdin closes."""
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # node code that prints must not corrupt the protocol
    sys.stdout = sys.stderr
    for line in sys.stdin:
        req = json.loads(line)
        try:
            answer = {"ok": True, **_answer(req)}
        except BaseException as exc:
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc()}
        channel.write(json.dumps(answer) + "\n")
        channel.flush()
        if req.get("op") == "fresh_call" and not hasattr(os, "fork"):
            break  # the next call gets a fresh interpreter


if __name__ == "__main__":
    main()
