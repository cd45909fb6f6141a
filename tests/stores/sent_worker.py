"""A process that dies while a step's commit is on the wire (``test_pg_sent_commits.py``).

    python sent_worker.py DSN SCHEMA LOG DIE_AT RUNS [GRAPH]

Runs ``tail`` (``prepare`` → ``charge``, external: one line appended to ``LOG`` a call →
``settle`` → ``close``, pure) ``RUNS`` times with the sync API on a PostgreSQL store, on
threads ``t0``, ``t1``, ...; ``close`` runs while ``settle``'s commit is sent and its answer
not read yet, notes in ``LOG.close`` how many of the store's statements are unread, and in
its ``DIE_AT``-th call SIGKILLs its own process. ``GRAPH`` ``behind``: ``behind`` instead
(``close`` not the last: ``tidy``, pure, after it, notes and dies instead), so that two commits
are on the wire when it runs (``settle``'s and ``close``'s behind it).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, PostgresCheckpointStore


class Job(BaseModel):
    n: int = 0
    log: str = ""
    effect: str = ""
    settled: bool = False
    closed: bool = False


DIE_AT = [0]
"""The ``close`` call that kills the process (0: none)."""

_closes = [0]


def prepare(state: Job) -> dict[str, Any]:
    return {"settled": False}


def charge(state: Job, ctx: Any) -> dict[str, Any]:
    with open(state.log, "a") as f:  # one write of one line
        f.write(f"{ctx.thread_id}\t{state.n}\n")
    return {"effect": f"{ctx.thread_id}:{state.n}"}


def settle(state: Job) -> dict[str, Any]:
    return {"settled": True}


def close(state: Job, ctx: Any) -> dict[str, Any]:
    _closes[0] += 1
    unread = ctx._leg.spec.store._pg.unread  # (a test's look inside: the commit on the wire)
    with open(state.log + ".close", "a") as f:
        f.write(f"{ctx.thread_id}\t{unread}\n")
    if _closes[0] == DIE_AT[0]:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"closed": True}


g = Graph("tail", Job)
g.node("prepare", prepare)
g.node("charge", charge, effect="external")
g.node("settle", settle)
g.node("close", close)
g.edge(START, "prepare").edge("prepare", "charge").edge("charge", "settle")
tail = g.edge("settle", "close").edge("close", END).compile()


def tidy(state: Job, ctx: Any) -> dict[str, Any]:
    close(state, ctx)  # (notes the commits unread and dies where close would)
    return {"log": state.log}


b = Graph("behind", Job)
b.node("prepare", prepare)
b.node("charge", charge, effect="external")
b.node("settle", settle)
b.node("close", lambda s: {"closed": True})
b.node("tidy", tidy)
b.edge(START, "prepare").edge("prepare", "charge").edge("charge", "settle")
behind = b.edge("settle", "close").edge("close", "tidy").edge("tidy", END).compile()


def main(dsn: str, schema: str, log: str, die_at: int, runs: int, graph: str = "tail") -> None:
    DIE_AT[0] = die_at
    with PostgresCheckpointStore(dsn, schema=schema) as store:
        runtime = GraphRuntime(store)
        for n in range(runs):
            runtime.invoke(behind if graph == "behind" else tail, {"n": n, "log": log},
                           thread_id=f"t{n}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
         *sys.argv[6:7])
