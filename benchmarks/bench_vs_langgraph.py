"""What users pay in pytest-graphflow against LangGraph, on the same graphs, in one run.

    .venv/bin/pip install -e ".[test,bench]"
    .venv/bin/python benchmarks/bench_vs_langgraph.py [--repeat 7] [--tests 200] [--graphs 60]
    .venv/bin/python benchmarks/bench_vs_langgraph.py --bridge-only   # the LangGraph bridge

Every pytest-graphflow row uses the default path a user takes:
``GraphRuntime(clock=VirtualClock(), seed=0)`` (wall clock patched in node code, sync API),
a new runtime per run, and the ``graph_runtime`` fixture in the pytest rows. LangGraph is
imported in this same process (its modules loaded count against both), compiled once per
graph with ``InMemorySaver`` (or ``SqliteSaver``), a new ``thread_id`` per run. Each row runs
both sides in alternating rounds and keeps the best round of each, in CPU time of the process
(steadier than wall time on a shared machine; the code is CPU-bound); the last column is
LangGraph / pytest-graphflow, except in the bridge's rows (a LangGraph app under
``LangGraphHarness``), which print harness / plain LangGraph. Nothing here is asserted: it
is to be run and read (docs/performance.md explains every row).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import operator
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel
from typing_extensions import TypedDict

from pytest_graphflow import (
    END,
    START,
    Expand,
    Graph,
    GraphRuntime,
    Reducer,
    Resume,
    SQLiteCheckpointStore,
    VirtualClock,
    interrupt,
)

try:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import StateGraph
    from langgraph.types import Command, Send
    from langgraph.types import interrupt as lg_interrupt
except ImportError:  # pragma: no cover - the bench extra installs it
    sys.exit("LangGraph is not installed: pip install -e '.[bench]'")

CHAIN = 100  # nodes of the chain rows
CLOCK = time.process_time  # CPU seconds: steadier than wall time on a shared machine
FAN = 100  # parallel workers of the fan-out row
WIDE = (1_000, 10_000)  # tasks of the wide fan-out rows (Expand / LangGraph's Send)
AGENT_FAN = 4  # parallel searches (Send) of the bridge's agent row
LONG = 100_000  # steps of the long chain row (and of the memory line, with a tenth of it)


# --------------------------------------------------------------------------- graphs


class GFState(BaseModel):
    n: int = 0
    log: Annotated[list[int], Reducer(operator.add)] = []
    answer: str = ""


class LGState(TypedDict, total=False):
    n: int
    log: Annotated[list[int], operator.add]
    answer: str


def gf_one() -> Any:
    g = Graph("one", GFState)
    g.node("a", lambda s: {"n": s.n + 1}).edge(START, "a").edge("a", END)
    return g.compile()


def lg_one(saver: Any) -> Any:
    g = StateGraph(LGState)
    g.add_node("a", lambda s: {"n": s.get("n", 0) + 1})
    g.add_edge("__start__", "a")
    g.add_edge("a", "__end__")
    return g.compile(checkpointer=saver)


def gf_approval() -> Any:
    g = Graph("approval", GFState)
    g.node("draft", lambda s: {"n": s.n + 1})
    g.node("approve", lambda s: {"answer": interrupt({"draft": s.n}, id="ok")})
    g.node("publish", lambda s: {"n": s.n + 10})
    g.edge(START, "draft").edge("draft", "approve").edge("approve", "publish")
    g.edge("publish", END)
    return g.compile()


def lg_approval(saver: Any) -> Any:
    g = StateGraph(LGState)
    g.add_node("draft", lambda s: {"n": s.get("n", 0) + 1})
    g.add_node("approve", lambda s: {"answer": lg_interrupt({"draft": s["n"]})})
    g.add_node("publish", lambda s: {"n": s["n"] + 10})
    g.add_edge("__start__", "draft")
    g.add_edge("draft", "approve")
    g.add_edge("approve", "publish")
    g.add_edge("publish", "__end__")
    return g.compile(checkpointer=saver)


def gf_fanout() -> Any:
    g = Graph("fanout", GFState)
    names = [f"w{i}" for i in range(FAN)]
    g.node("split", lambda s: {"n": 1})
    for name in names:
        g.node(name, lambda s: {"log": [1]})
    g.node("join", lambda s: {"n": len(s.log)})
    g.edge(START, "split").edge("split", names).edge(names, "join").edge("join", END)
    return g.compile()


def lg_fanout(saver: Any) -> Any:
    g = StateGraph(LGState)
    names = [f"w{i}" for i in range(FAN)]
    g.add_node("split", lambda s: {"n": 1})
    for name in names:
        g.add_node(name, lambda s: {"log": [1]})
        g.add_edge("split", name)
    g.add_node("join", lambda s: {"n": len(s["log"])})
    g.add_edge("__start__", "split")
    g.add_edge(names, "join")
    g.add_edge("join", "__end__")
    return g.compile(checkpointer=saver)


def gf_chain() -> Any:
    g = Graph("chain", GFState)
    prev = START
    for i in range(CHAIN):
        g.node(f"n{i}", lambda s: {"n": s.n + 1})
        g.edge(prev, f"n{i}")
        prev = f"n{i}"
    g.edge(prev, END)
    return g.compile(checkpoint_policy="every_step")


def lg_chain(saver: Any) -> Any:
    g = StateGraph(LGState)
    prev = "__start__"
    for i in range(CHAIN):
        g.add_node(f"n{i}", lambda s: {"n": s.get("n", 0) + 1})
        g.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    g.add_edge(prev, "__end__")
    return g.compile(checkpointer=saver)


def gf_wide(width: int) -> Any:
    """plan → ``width`` tasks of one node (``Expand``), each appending to a list → join."""
    g = Graph("wide", GFState)
    g.node("plan", lambda s: Expand("work", list(range(width))), destinations=["work"])
    g.node("work", lambda s, ctx: {"log": [ctx.item]})
    g.node("join", lambda s: {"n": len(s.log)})
    g.edge(START, "plan").edge("work", "join").edge("join", END)
    return g.compile()


class LGWideState(LGState, total=False):
    i: int


def lg_wide(width: int, saver: Any) -> Any:
    """The same with LangGraph's ``Send`` (one ``work`` task per item, then the join)."""
    g = StateGraph(LGWideState)
    g.add_node("plan", lambda s: {"n": 1})
    g.add_node("work", lambda s: {"log": [s["i"]]})
    g.add_node("join", lambda s: {"n": len(s["log"])})
    g.add_edge("__start__", "plan")
    g.add_conditional_edges("plan", lambda s: [Send("work", {"i": i}) for i in range(width)],
                            ["work"])
    g.add_edge("work", "join")
    g.add_edge("join", "__end__")
    return g.compile(checkpointer=saver)


def gf_loop(steps: int) -> Any:
    """One node run ``steps`` times in a row (a branch back to itself), a checkpoint a step:
    a chain of ``steps`` steps without a graph of ``steps`` nodes to build."""
    g = Graph("loop", GFState)
    g.node("step", lambda s: {"n": s.n + 1})
    g.edge(START, "step")
    g.branch("step", lambda s: "step" if s.n < steps else END, ["step", END])
    return g.compile(checkpoint_policy="every_step")


def lg_loop(steps: int, saver: Any) -> Any:
    """The same loop in LangGraph (which saves every step)."""
    g = StateGraph(LGState)
    g.add_node("step", lambda s: {"n": s.get("n", 0) + 1})
    g.add_edge("__start__", "step")
    g.add_conditional_edges("step", lambda s: "step" if s["n"] < steps else "__end__",
                            ["step", "__end__"])
    return g.compile(checkpointer=saver)


class AgentState(TypedDict, total=False):
    question: str
    ticket: str
    opened: str
    queries: list[str]
    query: str
    hits: Annotated[list[dict[str, str]], operator.add]
    answer: str
    route: str


def agent_intake(state: AgentState) -> dict[str, Any]:
    return {"ticket": f"T-{uuid.uuid4().hex[:12]}", "opened": datetime.now().isoformat()}


def agent_plan(state: AgentState) -> dict[str, Any]:
    return {"queries": [f"{state['question']} #{i}" for i in range(AGENT_FAN)]}


def agent_search(state: AgentState) -> dict[str, Any]:
    hit = {"id": str(uuid.uuid4()), "query": state["query"], "at": datetime.now().isoformat()}
    return {"hits": [hit]}


def agent_rank(state: AgentState) -> dict[str, Any]:
    best = sorted(state["hits"], key=lambda h: h["query"])
    return {"route": "escalate" if len(best) < AGENT_FAN else "respond"}


def agent_respond(state: AgentState) -> dict[str, Any]:
    return {"answer": f"{state['ticket']}: {len(state['hits'])} hits"}


def agent_escalate(state: AgentState) -> dict[str, Any]:
    return {"answer": f"{state['ticket']}: escalated"}


def lg_agent_builder() -> Any:
    """A small support agent as LangGraph users write one: an intake stamping a ticket id
    (``uuid.uuid4()``) and a time (``datetime.now()``), a planner, a ``Send`` fan-out of
    ``AGENT_FAN`` searches appending to ``Annotated[list, operator.add]`` (each with its own
    ``uuid4`` and ``now()``), a ranker, and a conditional edge to one of two answers."""
    g = StateGraph(AgentState)
    g.add_node("intake", agent_intake)
    g.add_node("plan", agent_plan)
    g.add_node("search", agent_search)
    g.add_node("rank", agent_rank)
    g.add_node("respond", agent_respond)
    g.add_node("escalate", agent_escalate)
    g.add_edge("__start__", "intake")
    g.add_edge("intake", "plan")
    g.add_conditional_edges("plan", lambda s: [Send("search", {"query": q})
                                               for q in s["queries"]], ["search"])
    g.add_edge("search", "rank")
    g.add_conditional_edges("rank", lambda s: s["route"], ["respond", "escalate"])
    g.add_edge("respond", "__end__")
    g.add_edge("escalate", "__end__")
    return g


# --------------------------------------------------------------------------- timing


def runtime(store: Any = None) -> GraphRuntime:
    return GraphRuntime(store, clock=VirtualClock(), seed=0, max_supersteps=LONG + 10)


_threads = itertools.count()


def lg_config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t{next(_threads)}"}, "recursion_limit": LONG + 10}


def best_pair(repeat: int, inner: int, ours: Callable[[], Any],
              theirs: Callable[[], Any], warm: bool = True) -> tuple[float, float]:
    """Best per-call seconds of each side, in alternating rounds of ``inner`` calls."""
    if warm:
        ours(), theirs()  # warm up both
    best = [float("inf"), float("inf")]
    for _ in range(repeat):
        for i, fn in enumerate((ours, theirs)):
            gc.collect()  # neither side pays for collecting the other's garbage
            t0 = CLOCK()
            for _ in range(inner):
                fn()
            best[i] = min(best[i], (CLOCK() - t0) / inner)
    return best[0], best[1]


Row = tuple[str, float, float, str]


def row(name: str, ours: float, theirs: float, unit: str) -> Row:
    return (name, ours, theirs, unit)


def sqlite_row(repeat: int) -> Row:
    """The chain with a checkpoint per step in one SQLite file per side, reused by every run
    (``SQLiteCheckpointStore`` / ``SqliteSaver``, each as shipped)."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    chain = gf_chain()
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteCheckpointStore(Path(tmp) / "gf.db")
        conn = sqlite3.connect(Path(tmp) / "lg.db", check_same_thread=False)
        lsql = lg_chain(SqliteSaver(conn))
        try:
            o, t = best_pair(max(2, repeat // 2), 1, lambda: runtime(store).invoke(chain, {}),
                             lambda: lsql.invoke({"n": 0}, lg_config()))
        finally:
            store.close()
            conn.close()
    return row("chain, SQLite checkpoint per step (one store)", o / CHAIN * 1e6,
               t / CHAIN * 1e6, "µs/step")


def postgres_rows(dsn: str, repeat: int) -> list[Row]:
    """The chain on one PostgreSQL server: ``PostgresCheckpointStore`` against
    ``AsyncPostgresSaver``, both async on one loop with a connection pool, in WALL time (both
    wait for the server): ``bench_postgres_vs_langgraph.py``'s measurement, 50 nodes. Two
    rows: LangGraph as shipped (``durability="async"``: a step's checkpoint is saved while the
    next step runs) and like with like (``durability="sync"``: saved before the next step
    runs, as graphflow's always is)."""
    from bench_postgres_vs_langgraph import DURABLE, measure

    found = asyncio.run(measure(dsn, 50, max(5, repeat)))
    ours = found["graphflow+PostgresCheckpointStore"]
    return [row("chain, PostgreSQL checkpoint per step (same server, wall)", ours,
                found["langgraph+AsyncPostgresSaver"], "µs/step"),
            row(f"  the same, LangGraph at {DURABLE} (like with like)", ours,
                found[f"langgraph+AsyncPostgresSaver {DURABLE}"], "µs/step")]


def micro_rows(repeat: int) -> list[Row]:
    rows: list[Row] = []
    saver = InMemorySaver()

    one, lone = gf_one(), lg_one(saver)
    o, t = best_pair(repeat, 50, lambda: runtime().invoke(one, {}),
                     lambda: lone.invoke({"n": 0}, lg_config()))
    rows.append(row("one-node run, checkpointed", o * 1e3, t * 1e3, "ms/run"))

    appr, lappr = gf_approval(), lg_approval(saver)

    def gf_round_trip() -> None:
        rt = runtime()
        paused = rt.invoke(appr, {})
        assert paused.status == "interrupted"
        assert rt.resume(paused.run_id, Resume("yes")).status == "completed"

    def lg_round_trip() -> None:
        config = lg_config()
        lappr.invoke({"n": 0}, config)
        lappr.invoke(Command(resume="yes"), config)

    o, t = best_pair(repeat, 20, gf_round_trip, lg_round_trip)
    rows.append(row("interrupt + resume round trip", o * 1e3, t * 1e3, "ms/round trip"))

    fan, lfan = gf_fanout(), lg_fanout(saver)
    o, t = best_pair(repeat, 3, lambda: runtime().invoke(fan, {}),
                     lambda: lfan.invoke({"n": 0, "log": []}, lg_config()))
    rows.append(row(f"fan-out 1→{FAN}→1", o * 1e3, t * 1e3, "ms/run"))

    chain, lchain = gf_chain(), lg_chain(saver)
    o, t = best_pair(repeat, 2, lambda: runtime().invoke(chain, {}),
                     lambda: lchain.invoke({"n": 0}, lg_config()))
    rows.append(row("chain, in-memory checkpoint per step", o / CHAIN * 1e6, t / CHAIN * 1e6,
                    "µs/step"))

    rows.append(sqlite_row(repeat))

    counts = [0, 0]

    def gf_stream() -> None:
        counts[0] = len(runtime().trace(chain, {}).events)

    def lg_stream() -> None:
        counts[1] = sum(1 for _ in lchain.stream({"n": 0}, lg_config(), stream_mode="debug"))

    o, t = best_pair(repeat, 2, gf_stream, lg_stream)
    rows.append(row(f"stream a chain, per event ({counts[0]} vs {counts[1]} events)",
                    o / counts[0] * 1e6, t / counts[1] * 1e6, "µs/event"))
    rows.append(row("stream a chain, per step", o / CHAIN * 1e6, t / CHAIN * 1e6, "µs/step"))
    return rows


def scale_rows(repeat: int, wide: tuple[int, ...], long: int) -> list[Row]:
    """Per task of a wide fan-out (plan → N tasks → join), and per step of a ``long`` chain,
    each against LangGraph (``Send`` of the same width; the same loop). Each LangGraph run
    compiles its graph (three nodes, or one: about a millisecond) with a fresh
    ``InMemorySaver``, as each graphflow run has a fresh in-memory store: neither side's
    heap grows with the other's past runs, which every garbage collection would walk. The
    widest and the longest take seconds a run on LangGraph's side: fewer rounds there, and
    the long chain one round of each, not warmed up (its steps are)."""
    rows: list[Row] = []
    for width in wide:
        ours = gf_wide(width)
        rounds = repeat if width <= 1_000 else max(2, repeat // 3)
        o, t = best_pair(rounds, 1, lambda g=ours: runtime().invoke(g, {}),
                         lambda w=width: lg_wide(w, InMemorySaver()).invoke(
                             {"n": 0, "log": []}, lg_config()))
        rows.append(row(f"fan-out 1→{width:,}→1 (Expand / Send), per task", o / width * 1e6,
                        t / width * 1e6, "µs/task"))
    loop = gf_loop(long)
    o, t = best_pair(1, 1, lambda: runtime().invoke(loop, {}),
                     lambda: lg_loop(long, InMemorySaver()).invoke({"n": 0}, lg_config()),
                     warm=False)
    rows.append(row(f"chain of {long:,} steps, in-memory checkpoint per step", o / long * 1e6,
                    t / long * 1e6, "µs/step"))
    return rows


def bridge_rows(repeat: int) -> list[Row]:
    """The LangGraph bridge: the same LangGraph agent (``lg_agent_builder``, compiled once
    with an ``InMemorySaver``) run plainly, ``app.invoke`` on a new thread per run, and under
    pytest-graphflow's harness the way a test runs it: a fresh ``LangGraphHarness(app,
    seed=0)`` per run (its own fresh saver) and ``trace(input)``; and through the
    ``graph_runtime`` fixture's runtime (``make_graph_runtime(seed=0).langgraph(app)``, a new
    runtime per run, as a test gets one). Here "ours" is the harness and "theirs" plain
    LangGraph: the ratio to read is harness / plain (the bridge's overhead). The last rows
    are plain LangGraph on its own async runner, which the harness drives (virtual time and
    the seeded order live on an event loop): ``asyncio.run(app.ainvoke(...))`` (a new loop a
    run, as a script would), ``ainvoke`` on one loop reused by every run (as the harness
    reuses its thread's loop), and ``astream`` with the harness's stream modes on that loop
    (``tasks`` and ``values``, ``subgraphs=True``): LangGraph's own share of a harness run,
    the floor under the bridge's ratio."""
    from pytest_graphflow.langgraph import LangGraphHarness
    from pytest_graphflow.testing import make_graph_runtime

    app = lg_agent_builder().compile(checkpointer=InMemorySaver())
    question = {"question": "where is my parcel", "hits": []}
    done = {"harness": "", "plain": ""}

    def plain() -> None:
        done["plain"] = app.invoke(question, lg_config())["answer"]

    def harness() -> None:
        done["harness"] = LangGraphHarness(app, seed=0).trace(question).result.state["answer"]

    def fixture() -> None:
        done["harness"] = make_graph_runtime(seed=0).langgraph(app).trace(
            question).result.state["answer"]

    def plain_async() -> None:
        done["harness"] = asyncio.run(app.ainvoke(question, lg_config()))["answer"]

    loop = asyncio.new_event_loop()

    def plain_async_loop() -> None:
        done["harness"] = loop.run_until_complete(app.ainvoke(question, lg_config()))["answer"]

    async def streamed() -> str:
        last: dict[str, Any] = {}
        async for _, mode, chunk in app.astream(question, lg_config(), subgraphs=True,
                                                stream_mode=["tasks", "values"]):
            if mode == "values":
                last = chunk
        return str(last["answer"])

    def plain_stream_loop() -> None:
        done["harness"] = loop.run_until_complete(streamed())

    rows: list[Row] = []
    try:
        for name, ours in (
                (f"agent, Send fan-out of {AGENT_FAN}: fresh LangGraphHarness", harness),
                ("  the same through graph_runtime.langgraph(app)", fixture),
                ("  plain LangGraph async, asyncio.run(app.ainvoke)", plain_async),
                ("  plain LangGraph async, ainvoke on one reused loop", plain_async_loop),
                ("  plain astream as the harness streams it, one loop (floor)",
                 plain_stream_loop)):
            o, t = best_pair(repeat, 20, ours, plain)
            assert done["harness"].endswith(f"{AGENT_FAN} hits"), done
            assert done["plain"].endswith(f"{AGENT_FAN} hits"), done
            rows.append(row(name, o * 1e3, t * 1e3, "ms/run"))
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
    return rows


def print_bridge(rows: list[Row]) -> None:
    print(f"{'the bridge (LangGraph app)':58s} {'harness':>10s} {'plain':>10s} {'unit':>14s} "
          f"{'harness/plain':>14s}")
    for name, ours, theirs, unit in rows:
        print(f"{name:58s} {ours:10.3f} {theirs:10.3f} {unit:>14s} {ours / theirs:13.2f}×")


def chain_memory(steps: tuple[int, ...]) -> list[tuple[int, float]]:
    """The memory a chain of each length takes, per step: tracemalloc's peak over the run
    (the in-memory store keeps every checkpoint), in bytes per step (pytest-graphflow only:
    LangGraph under tracemalloc would take minutes)."""
    import tracemalloc

    out = []
    for n in steps:
        loop = gf_loop(n)
        gc.collect()
        tracemalloc.start()
        runtime().invoke(loop, {})
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        out.append((n, peak / n))
    return out


# --------------------------------------------------------------------------- pytest suites

SUITE_CONFTEST = """
import time, os
_t = {}
def pytest_runtest_logfinish(nodeid, location):
    # CPU time from the end of the first test (which pays one-time imports) to the end of
    # the last
    _t.setdefault("start", time.process_time())
    _t["end"] = time.process_time()
def pytest_sessionfinish(session):
    if "start" in _t:
        with open(os.environ["BENCH_OUT"], "w") as f:
            f.write(f"{_t['end'] - _t['start']} {session.testscollected}")
"""

GF_SUITE = """
import pytest
from pydantic import BaseModel
from pytest_graphflow import END, START, Graph, Resume, interrupt

class S(BaseModel):
    n: int = 0
    answer: str = ""

g = Graph("approval", S)
g.node("draft", lambda s: {"n": s.n + 1})
g.node("approve", lambda s: {"answer": interrupt({"draft": s.n}, id="ok")})
g.node("publish", lambda s: {"n": s.n + 10})
g.edge(START, "draft").edge("draft", "approve").edge("approve", "publish").edge("publish", END)
graph = g.compile()

@pytest.mark.parametrize("i", range(N))
def test_approval(graph_runtime, i):
    paused = graph_runtime.invoke(graph, {"n": i})
    assert paused.status == "interrupted"
    done = graph_runtime.resume(paused.run_id, Resume("yes"))
    assert done.data == {"n": i + 11, "answer": "yes"}
"""

LG_SUITE = """
import itertools, operator
import pytest
from typing_extensions import TypedDict
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import StateGraph
from langgraph.types import Command, interrupt

class S(TypedDict, total=False):
    n: int
    answer: str

builder = StateGraph(S)
builder.add_node("draft", lambda s: {"n": s["n"] + 1})
builder.add_node("approve", lambda s: {"answer": interrupt({"draft": s["n"]})})
builder.add_node("publish", lambda s: {"n": s["n"] + 10})
builder.add_edge("__start__", "draft")
builder.add_edge("draft", "approve")
builder.add_edge("approve", "publish")
builder.add_edge("publish", "__end__")

@pytest.fixture
def app():
    return builder.compile(checkpointer=InMemorySaver())

@pytest.mark.parametrize("i", range(N))
def test_approval(app, i):
    config = {"configurable": {"thread_id": f"t{i}"}}
    app.invoke({"n": i}, config)
    assert app.get_state(config).next == ("approve",)
    done = app.invoke(Command(resume="yes"), config)
    assert done == {"n": i + 11, "answer": "yes"}
"""


def cached_env() -> dict[str, str]:
    """This process's environment, with bytecode caching on: ``PYTHONDONTWRITEBYTECODE`` set
    to any non-empty value (even ``"0"``) turns it off, and every start then compiles the
    modules changed since their last ``.pyc`` again."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_suite(folder: Path, module: str, extra: list[str]) -> tuple[float, int]:
    out = folder / f"{module}.out"
    env = {**cached_env(), "BENCH_OUT": str(out)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:xdist",
           "-W", "ignore", f"{module}.py", *extra]
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{module} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    seconds, count = out.read_text().split()
    return float(seconds), int(count)


EMPTY_SUITE = """
import pytest

@pytest.mark.parametrize("i", range(N))
def test_nothing(i):
    pass
"""


def suite_rows(n: int, repeat: int) -> list[Row]:
    """Per test of a suite of ``n`` tests on each side, and the same net of what pytest itself
    costs per test (a suite of ``n`` empty tests, run in the same rounds)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "conftest.py").write_text(textwrap.dedent(SUITE_CONFTEST))
        (folder / "pytest.ini").write_text("[pytest]\n")
        (folder / "test_gf.py").write_text(GF_SUITE.replace("range(N)", f"range({n})"))
        (folder / "test_lg.py").write_text(LG_SUITE.replace("range(N)", f"range({n})"))
        (folder / "test_empty.py").write_text(EMPTY_SUITE.replace("range(N)", f"range({n})"))
        best = [float("inf"), float("inf"), float("inf")]
        for _ in range(repeat):
            for i, (module, extra) in enumerate((("test_gf", []),
                                                 ("test_lg", ["-p", "no:graphflow"]),
                                                 ("test_empty", []))):
                seconds, count = run_suite(folder, module, extra)
                assert count == n, (module, count)
                best[i] = min(best[i], seconds / (n - 1))
    floor = best[2]
    return [row(f"pytest suite, {n} approval-graph tests, per test", best[0] * 1e3,
                best[1] * 1e3, "ms/test"),
            row(f"  the same, net of pytest's own {floor * 1e3:.2f} ms per empty test",
                (best[0] - floor) * 1e3, (best[1] - floor) * 1e3, "ms/test")]


def startup_rows(repeat: int) -> list[Row]:
    """pytest start-up with and without the plugin (one trivial test, bytecode cached): the
    CPU time (user + system) of the pytest process, the median of ``repeat`` runs each, the
    two taking turns. (The best of a few runs moved by hundreds of milliseconds on a shared
    machine, more than the plugin costs; the medians of alternating runs do not.)"""
    import resource

    def child_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "pytest.ini").write_text("[pytest]\n")
        (folder / "test_trivial.py").write_text("def test_trivial():\n    pass\n")
        taken: dict[str, list[float]] = {"with": [], "without": []}
        env = cached_env()
        for round_ in range(repeat + 1):  # the first round writes the bytecode caches
            for label, extra in (("with", []), ("without", ["-p", "no:graphflow"])):
                t0 = child_cpu()
                subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                "test_trivial.py", *extra], cwd=folder, capture_output=True,
                               check=True, env=env)
                if round_:
                    taken[label].append(child_cpu() - t0)
    median = {label: statistics.median(times) for label, times in taken.items()}
    return [("pytest start-up: with the plugin / without (-p no:graphflow)",
             median["with"] * 1e3, median["without"] * 1e3, "ms")]


# --------------------------------------------------------------------------- generated graphs


def generated_rate(examples: int, repeat: int) -> float:
    """Generated graphs (≤ 6 nodes) checked for interrupt/resume equivalence per second: the
    best of ``repeat`` rounds after a warm-up round, as the other rows keep their best round
    (the workload of ``bench_generated_split.py``, which also splits drawing from checking).
    A single cold round paid the session's one-off costs (first draws, imports, a full
    garbage collection over the heap the earlier rows left) inside the rate: ~25% less."""
    from bench_generated_split import one_round

    one_round(10)
    return max(one_round(examples)[0] for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7, help="rounds per micro row")
    parser.add_argument("--tests", type=int, default=200, help="tests per pytest suite")
    parser.add_argument("--suite-repeat", type=int, default=3, help="sessions per suite")
    parser.add_argument("--graphs", type=int, default=100, help="generated graphs to check")
    parser.add_argument("--long", type=int, default=LONG,
                        help="steps of the long chain row (LangGraph: about a minute at 100,000)")
    parser.add_argument("--scale-only", action="store_true",
                        help="only the wide fan-out and long chain rows, and the memory line")
    parser.add_argument("--bridge-only", action="store_true",
                        help="only the LangGraph bridge's rows (harness / plain LangGraph)")
    parser.add_argument("--stores-only", action="store_true",
                        help="only the durable stores' rows (SQLite, and PostgreSQL with a DSN)")
    parser.add_argument("--dsn", default=os.environ.get("GRAPHFLOW_POSTGRES_DSN"),
                        help="PostgreSQL server of the PostgreSQL row (default: "
                             "$GRAPHFLOW_POSTGRES_DSN; without one the row is skipped)")
    args = parser.parse_args()

    if args.stores_only:
        print_rows([sqlite_row(args.repeat)]
                   + (postgres_rows(args.dsn, args.repeat) if args.dsn else []))
        return

    if args.bridge_only:
        print_bridge(bridge_rows(args.repeat))
        return

    if args.scale_only:
        print_rows(scale_rows(args.repeat, WIDE, args.long))
        print_memory(args.long)
        return
    rows = micro_rows(args.repeat)
    if args.dsn:
        rows += postgres_rows(args.dsn, args.repeat)
    else:
        print("(no PostgreSQL row: pass --dsn or set GRAPHFLOW_POSTGRES_DSN)")
    rows += scale_rows(args.repeat, WIDE, args.long)
    rows += suite_rows(args.tests, args.suite_repeat)
    print_rows(rows)
    print_bridge(bridge_rows(args.repeat))
    rate = generated_rate(args.graphs, min(args.repeat, 3))
    print(f"{'generated graphs checked (equivalence, ≤6 nodes, 3 runs each)':58s} "
          f"{rate:10.0f} {'—':>10s} {'graphs/s':>14s}")
    (name, with_, without, unit), = startup_rows(3 * args.suite_repeat + 3)
    print(f"{name:58s} {with_:10.0f} {without:10.0f} {unit:>14s}  +{with_ - without:.0f} ms")
    print_memory(args.long)


def print_rows(rows: list[Row]) -> None:
    print(f"{'workload':58s} {'graphflow':>10s} {'LangGraph':>10s} {'unit':>14s} {'ratio':>7s}")
    for name, ours, theirs, unit in rows:
        print(f"{name:58s} {ours:10.3f} {theirs:10.3f} {unit:>14s} {theirs / ours:6.1f}×")


def print_memory(long: int) -> None:
    memory = chain_memory((long // 10, long))
    print("chain memory, tracemalloc peak per step: " + ", ".join(
        f"{n:,} steps {per / 1024:.2f} KiB" for n, per in memory))


if __name__ == "__main__":
    main()
