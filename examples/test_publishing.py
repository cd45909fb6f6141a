"""Testing a graph that uses a subgraph: the child's question pauses the parent, and the
parent's ``Resume`` answers it. Run with ``pytest examples``."""

from __future__ import annotations

from publishing.graph import build

from pytest_graphflow import GraphRuntime, Resume, SQLiteCheckpointStore, VirtualClock
from pytest_graphflow.invariants import assert_invariants


def test_the_editor_is_asked_through_the_parent(graph_runtime):
    graph = build()
    paused = graph_runtime.trace(graph, {"title": "graphflow 1.0"})

    assert paused.result.status == "interrupted"
    ((key, pending),) = paused.result.interrupts.items()
    assert pending.node == "review"  # the subgraph node of the parent
    assert key.startswith(f"{pending.task_id}/")  # the child's key, prefixed (seed 001)
    assert pending.payload == {"text": "Graphflow 1.0 is out"}

    done = graph_runtime.resume_trace(paused.result.run_id, Resume(answers={key: "ok"}))
    assert done.result.data["article"] == "Graphflow 1.0 is out"
    assert done.result.data["log"] == ["draft", "published (ok)"]
    assert_invariants([*paused.events, *done.events], graph=graph)


def test_a_risky_article_is_routed_by_the_child_to_legal(graph_runtime):
    result = graph_runtime.trace(build(), {"title": "lawsuit news"}).result
    assert result.status == "completed"
    assert result.data["log"] == ["draft", "escalated", "sent to legal"]


def test_resume_in_another_process_over_sqlite(tmp_path):
    path = tmp_path / "runs.db"
    first = GraphRuntime(store=SQLiteCheckpointStore(path), clock=VirtualClock(), seed=1)
    paused = first.invoke(build(), {"title": "release"})
    (key,) = paused.interrupts

    second = GraphRuntime(store=SQLiteCheckpointStore(path), clock=VirtualClock(), seed=1)
    done = second.resume(paused.run_id, Resume(answers={key: "approved"}), graph=build())
    assert done.data["log"] == ["draft", "published (approved)"]
