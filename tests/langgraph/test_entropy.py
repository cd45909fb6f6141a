"""``uuid``/``random`` in LangGraph node code under the harness: seeded per thread and task.

The harness owns its node tasks' entropy as it owns their wall clock: ``uuid.uuid4()``,
``uuid.uuid1()``, the ``random`` module and an unseeded ``random.Random()`` draw from a stream
keyed by the thread and LangGraph's task id (a hash of the checkpoint the task extends and its
path), so a run again, another process, or a task LangGraph runs again on resume, draws the
same values. Plain LangGraph in the same process keeps real randomness.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from graphs import FanState, ticket_desk
from langgraph.graph import END, START, StateGraph

from pytest_graphflow.langgraph import LangGraphHarness

HERE = Path(__file__).resolve().parent

_SCRIPT = """
import sys
sys.path.insert(0, {here!r})
from graphs import ticket_desk
from pytest_graphflow.langgraph import LangGraphHarness
h = LangGraphHarness(ticket_desk(), seed={seed})
h.trace({{"log": []}})
h.resume("approve")
sys.stdout.write("\\n".join(e.model_dump_json() for e in h.events))
"""


def _run(seed: int) -> tuple[LangGraphHarness, bytes]:
    h = LangGraphHarness(ticket_desk(), seed=seed)
    h.trace({"log": []})
    h.resume("approve")
    return h, "\n".join(e.model_dump_json() for e in h.events).encode()


def test_the_same_seed_gives_the_same_bytes() -> None:
    h, first = _run(3)
    assert _run(3)[1] == first
    log = h.state()["log"]
    assert any(entry.startswith("T-") and len(entry) == 14 for entry in log)
    (tag,) = [entry for entry in log if entry.startswith("tag:")]
    assert uuid.UUID(tag.split(":")[-1]).version == 1


def test_two_fresh_processes_give_the_same_bytes() -> None:
    hash_seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    there = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(here=str(HERE), seed=3)],
        check=True, capture_output=True, env={"PYTHONHASHSEED": hash_seed, "PATH": ""},
        timeout=120).stdout
    assert there == _run(3)[1]


def test_the_task_langgraph_runs_again_on_resume_draws_the_same_values() -> None:
    h = LangGraphHarness(ticket_desk(), seed=3)
    paused = h.trace({"log": []})
    (pending,) = paused.result.interrupts.values()
    done = h.resume("approve")
    ticket, score = pending.payload["ticket"], pending.payload["score"]
    # `open` ran again from the top on resume: the same ticket and score as before the pause
    assert done.result.data["log"][:2] == [ticket, f"{score:.12f}"]


def test_plain_langgraph_in_the_same_process_keeps_real_randomness() -> None:
    def ticket(state: FanState) -> dict[str, Any]:
        return {"log": [uuid.uuid4().hex]}

    g = StateGraph(FanState)
    g.add_node("ticket", ticket)
    g.add_edge(START, "ticket")
    g.add_edge("ticket", END)
    assert LangGraphHarness(g, seed=3).invoke({"log": []}).data == \
        LangGraphHarness(g, seed=3).invoke({"log": []}).data  # owned under the harness
    graph = g.compile()
    assert graph.invoke({"log": []}) != graph.invoke({"log": []})  # plain: real
