"""Worker processes for the cross-process claim races (``test_claims_processes.py``).

Each worker is a real process with its own runtime (real clock, system randomness: a
production runtime) over one SQLite file or one PostgreSQL schema. It takes commands from
its queue — start a new run on a thread, recover a thread, resume a run — and reports what
happened: ``advanced`` with
the run's status, or the name and message of the error it got. The ``charge`` node is an
``external`` effect: it appends a line to an effects file, so the test counts effects, and
when the command says so it blocks between two ``multiprocessing.Event``s (``inside`` set,
then wait for ``go``) to hold the thread while the others try.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphflowError,
    GraphRuntime,
    Resume,
    SQLiteCheckpointStore,
    interrupt,
)

GATE: dict[str, Any] = {"inside": None, "go": None, "gated": False}
"""This process's gate events, and whether the current command holds at the gate."""


class Pay(BaseModel):
    n: int = 0
    answer: Any = None


def build(name: str, effects: str, fail_flag: str) -> Any:
    """The race graph: ``prep -> [ask ->] charge -> done``, checkpointed every step."""
    g = Graph(name, Pay)
    g.node("prep", lambda s: {"n": 1})

    def ask(state: Pay) -> dict[str, Any]:
        return {"answer": interrupt("charge the card?", id="pay")}

    def charge(state: Pay, ctx: Any) -> dict[str, Any]:
        if os.path.exists(fail_flag):  # the card is declined once (a failed run)
            os.remove(fail_flag)
            raise RuntimeError("card declined")
        with open(effects, "a") as out:
            out.write(f"{ctx.run_id} {os.getpid()}\n")
        if GATE["gated"]:
            GATE["inside"].set()
            if not GATE["go"].wait(60):
                raise RuntimeError("the test never opened the gate")
        return {"n": state.n + 1}

    g.node("charge", charge, effect="external")
    g.node("done", lambda s: {"n": s.n + 1})
    g.edge(START, "prep")
    if name == "asking":
        g.node("ask", ask, effect="human")
        g.edge("prep", "ask").edge("ask", "charge")
    else:
        g.edge("prep", "charge")
    g.edge("charge", "done").edge("done", END)
    return g.compile(checkpoint_policy="every_step")


def open_store(spec: tuple[str, ...]) -> Any:
    """``("sqlite", path)`` or ``("postgres", dsn, schema)``: the store the race runs on."""
    if spec[0] == "postgres":
        from pytest_graphflow import PostgresCheckpointStore

        return PostgresCheckpointStore(spec[1], schema=spec[2])
    return SQLiteCheckpointStore(spec[1])


def run_command(cmd: dict[str, Any]) -> tuple[str, str, str | None]:
    """Run one command; ``("advanced", status, run_id)`` or ``(error name, message, None)``."""
    GATE["gated"] = cmd.get("gated", False)
    graph = build(cmd["graph"], cmd["effects"], cmd["fail_flag"])
    store = open_store(cmd["store"])
    runtime = GraphRuntime(store)
    try:
        kind = cmd["kind"]
        if kind == "new":
            result = runtime.invoke(graph, thread_id=cmd["thread"])
        elif kind == "recover":
            result = runtime.recover(cmd["thread"], graph=graph)
        elif kind == "resume":
            answer = Resume("yes") if cmd["graph"] == "asking" else None
            result = runtime.resume(cmd["run_id"], answer, graph=graph)
        else:  # pragma: no cover - a test bug
            raise ValueError(kind)
        return ("advanced", result.status, result.run_id)
    except GraphflowError as exc:
        return (type(exc).__name__, str(exc), None)
    finally:
        store.close()


def serve(index: int, commands: Any, results: Any, inside: Any, go: Any) -> None:
    """A worker's loop: report ready, then run commands until ``None``."""
    GATE["inside"], GATE["go"] = inside, go
    results.put((index, "ready", "", None))
    while True:
        cmd = commands.get()
        if cmd is None:
            return
        try:
            outcome = run_command(cmd)
        except BaseException as exc:  # report anything, never hang the test
            outcome = ("crashed", f"{type(exc).__name__}: {exc}", None)
        results.put((index, *outcome))
