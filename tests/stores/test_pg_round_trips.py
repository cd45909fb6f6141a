"""A durable step on PostgreSQL costs one round trip to the server (issue 29): the step's
checkpoint, its events, the run record and the claim check that fences them travel as one
statement. Counted, not timed: a child process runs psycopg's pure-Python libpq binding
(``PSYCOPG_IMPL=python``) and counts every statement it executes (each waits for its
answer); a run of 15 steps minus a run of 5 steps, over 10, is the cost of one step (what a
run pays once, its claim, reads and release, cancels out)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from pydantic import BaseModel

from graphflow_postgres import watch_statements
from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    PostgresCheckpointStore,
    VirtualClock,
)

_COUNTER = """
import asyncio, collections, json, sys
from psycopg.pq import pq_ctypes

# A round trip: the client sends (a statement, or in pipeline mode a batch ended by a flush
# request or a sync), then waits for the answer: counted at the first read after a send
# (psycopg also prepares a statement it has run five times on a connection: once per
# connection, not per step, so preparing is not counted).
sent = collections.Counter()
pending = [False]
for name in ("exec_", "exec_params", "exec_prepared"):  # blocking: send and wait
    def counted(self, *args, _orig=getattr(pq_ctypes.PGconn, name), _name=name, **kwargs):
        sent[_name] += 1
        return _orig(self, *args, **kwargs)
    setattr(pq_ctypes.PGconn, name, counted)
for name in ("send_query", "send_query_params", "send_query_prepared", "send_flush_request",
             "pipeline_sync"):
    def sending(self, *args, _orig=getattr(pq_ctypes.PGconn, name), _name=name, **kwargs):
        pending[0] = True
        if _name.startswith("send_query"):
            statements[0] += 1
        return _orig(self, *args, **kwargs)
    setattr(pq_ctypes.PGconn, name, sending)
statements = [0]  # statements sent without waiting (send_query*), beside the exec_* above
def reading(self, *args, _orig=pq_ctypes.PGconn.consume_input, **kwargs):
    if pending[0]:
        pending[0] = False
        sent["round trip"] += 1
    return _orig(self, *args, **kwargs)
pq_ctypes.PGconn.consume_input = reading

from pydantic import BaseModel
from pytest_graphflow import END, START, Graph, GraphRuntime, PostgresCheckpointStore
from pytest_graphflow import VirtualClock

class Counter(BaseModel):
    n: int = 0

def chain(steps):
    g = Graph(f"chain{steps}", Counter)
    prev = START
    for i in range(steps):
        g.node(f"n{i}", lambda s: {"n": s.n + 1})
        g.edge(prev, f"n{i}")
        prev = f"n{i}"
    return g.edge(prev, END).compile(checkpoint_policy="every_step")

dsn, schema, path = sys.argv[1], sys.argv[2], sys.argv[3]
out = {}

def sends():
    return sum(sent.values())

def counts():  # (statements, round trips) so far
    return (statements[0] + sum(v for k, v in sent.items() if k != "round trip"),
            sent["round trip"])

async def on_pool():
    async with PostgresCheckpointStore(dsn, schema=schema) as store:
        assert store._pg._pool is not None  # the async pool, on asyncio
        runtime = GraphRuntime(store)
        for _ in range(2):  # warm: connections, statements prepared (psycopg: at the 5th use)
            await runtime.ainvoke(chain(15), {})
        for steps in (5, 15):
            graph = chain(steps)
            await runtime.ainvoke(graph, {})
            before = counts()
            assert (await runtime.ainvoke(graph, {})).data == {"n": steps}
            out[f"pool/{steps}"] = [a - b for a, b in zip(counts(), before)]

def on_sync_connection():
    with PostgresCheckpointStore(dsn, schema=schema) as store:
        runtime = GraphRuntime(store, clock=VirtualClock(), seed=0)
        for _ in range(2):
            runtime.invoke(chain(15))
        for steps in (5, 15):
            graph = chain(steps)
            runtime.invoke(graph)
            before = counts()
            assert runtime.invoke(graph).data == {"n": steps}
            out[f"sync/{steps}"] = [a - b for a, b in zip(counts(), before)]

asyncio.run(on_pool())
on_sync_connection()
with open(path, "w") as f:
    json.dump(out, f)
"""


def test_a_durable_step_is_one_round_trip_claim_check_included(
    postgres_dsn: str, pg_schema: str, tmp_path: object
) -> None:
    out = os.path.join(str(tmp_path), "sent.json")
    env = {**os.environ, "PSYCOPG_IMPL": "python"}
    done = subprocess.run([sys.executable, "-c", _COUNTER, postgres_dsn, pg_schema, out],
                          env=env, capture_output=True, text=True, timeout=300)
    if "libpq" in done.stderr and "not found" in done.stderr:  # pragma: no cover
        pytest.skip("psycopg's Python binding needs the libpq library: " + done.stderr[-200:])
    assert done.returncode == 0, done.stderr
    with open(out) as f:
        sent = json.load(f)
    for path in ("pool", "sync"):
        (short, short_trips), (long, long_trips) = sent[f"{path}/5"], sent[f"{path}/15"]
        # One statement a step, whatever the timing.
        assert (long - short) / 10 == 1, (path, sent)
        # What a run pays once: the step before the first node (its checkpoint) and the
        # claim of its new thread, the read that picks a free run id in the same statement
        # (five round trips before issue 29's fifth pass, two in pipeline mode before its
        # eighth, the read one more before its tenth); the release rides on the last step's
        # statement (one round trip more before the tenth pass).
        assert short == 5 + 1 + 1, (path, sent)
        # A wait for the server at most a statement: a step's statement is sent behind the
        # last one's while that one is unanswered (pipeline mode), so an answer may already
        # be in when it is read (fewer waits than statements, as the timing falls).
        assert 0 < short_trips <= short, (path, sent)
        assert 0 < long_trips <= long, (path, sent)


_STEP_SHAPE = ("SELECT name, generic_plans, custom_plans FROM pg_prepared_statements "
               "WHERE statement LIKE 'WITH claim AS%%' AND statement LIKE '%%INSERT INTO "
               "checkpoints%%' AND statement LIKE '%%INSERT INTO events%%' AND statement NOT "
               "LIKE '%%INSERT INTO runs%%'")


def test_a_step_statement_is_prepared_once_and_runs_its_generic_plan(
    postgres_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step's statement has one text whatever its events or checkpoint (their values
    travel as parameters), so psycopg prepares it once per connection (at its fifth use)
    and the server then runs the generic plan it keeps: no planning a step. Counted in
    ``pg_prepared_statements`` on the store's connection, after three runs of 12 steps: one
    prepared statement of the step's shape, the server's first five executions custom
    plans (how PostgreSQL decides); then two more runs: every step of that shape runs the
    same prepared statement's generic plan."""
    class Counter(BaseModel):
        n: int = 0

    g = Graph("prepared12", Counter)
    prev = START
    for i in range(12):
        g.node(f"n{i}", lambda s: {"n": s.n + 1})
        g.edge(prev, f"n{i}")
        prev = f"n{i}"
    graph = g.edge(prev, END).compile(checkpoint_policy="every_step")
    with PostgresCheckpointStore(postgres_dsn, schema=pg_schema) as store:
        runtime = GraphRuntime(store, clock=VirtualClock(), seed=0)
        conn = store._pg.sync_connection()
        for _ in range(3):  # warm: the text prepared at its fifth use, five custom plans
            assert runtime.invoke(graph).data == {"n": 12}
        before = conn.execute(_STEP_SHAPE).fetchall()
        texts: list[str] = []

        def counted(sql: str, params: Any) -> None:
            if "INSERT INTO events" in sql and "INSERT INTO runs" not in sql:
                texts.append(sql)

        watch_statements(monkeypatch, store._pg, counted)
        for _ in range(2):
            assert runtime.invoke(graph).data == {"n": 12}
        after = conn.execute(_STEP_SHAPE).fetchall()
    assert len(set(texts)) == 1
    assert len(texts) >= 2 * 10, len(texts)
    assert len(before) == len(after) == 1, (before, after)
    assert before[0][0] == after[0][0]  # the same prepared statement
    assert after[0][2] == before[0][2] <= 5  # no custom plan after the first five
    assert after[0][1] - before[0][1] == len(texts)  # every step of the shape: the generic plan
