"""Graphs the worker tests run in worker processes (``graphflow worker DSN wgraphs:effects``).

``effects``: ``prepare`` (pure) → ``charge`` (external: appends one line to the file named by
the input, the side effect counted) → ``settle`` (pure). A worker process can be told to
SIGKILL itself at a chosen point, so a crash lands exactly where a test wants it:
``GRAPHFLOW_TEST_DIE=charge:N`` dies right after the N-th effect this process performed (the
effect happened, its result is not checkpointed); ``settle:N`` dies in the N-th ``settle``
(after ``charge``'s result was checkpointed). ``GRAPHFLOW_TEST_TERM=charge:N`` sends SIGTERM
instead (a graceful stop requested mid-step).
"""

from __future__ import annotations

import os
import signal
import uuid
from typing import Any

from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, interrupt

_counts = {"charge": 0, "settle": 0}


class Job(BaseModel):
    n: int = 0
    log: str = ""
    effect: str = ""
    settled: bool = False
    approved: Any = None


def _maybe_die(where: str) -> None:
    _counts[where] += 1
    for env, sig in (("GRAPHFLOW_TEST_DIE", signal.SIGKILL), ("GRAPHFLOW_TEST_TERM",
                                                             signal.SIGTERM)):
        for item in os.environ.get(env, "").split(","):
            name, _, count = item.partition(":")
            if name == where and count and _counts[where] == int(count):
                os.kill(os.getpid(), sig)


def prepare(state: Job) -> dict[str, Any]:
    return {"settled": False}


def charge(state: Job, ctx: Any) -> dict[str, Any]:
    attempt = uuid.uuid4().hex
    with open(state.log, "a") as f:  # one write of one line: appends never interleave
        f.write(f"{ctx.thread_id}\t{state.n}\t{attempt}\n")
    _maybe_die("charge")
    return {"effect": attempt}


def settle(state: Job) -> dict[str, Any]:
    _maybe_die("settle")
    return {"settled": True}


g = Graph("effects", Job)
g.node("prepare", prepare)
g.node("charge", charge, effect="external")
g.node("settle", settle)
g.edge(START, "prepare").edge("prepare", "charge").edge("charge", "settle").edge("settle", END)
effects = g.compile()


def review(state: Job) -> dict[str, Any]:
    return {"approved": interrupt({"n": state.n}, id="ok")}


a = Graph("approval", Job)
a.node("review", review, effect="human")
a.edge(START, "review").edge("review", END)
approval = a.compile()
