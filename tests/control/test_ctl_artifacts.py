"""Artifacts a node or a run attaches (seed 002: "Artifact stores larger outputs or diagnostic
material associated with a Run"), kept by the store and listed by ``graphflow artifacts``."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphExecutionError,
    GraphRuntime,
    InMemoryCheckpointStore,
    InvalidArgument,
    NodeContext,
    NodeFailed,
    SQLiteCheckpointStore,
    VirtualClock,
)
from pytest_graphflow._cli._main import main

pytestmark = pytest.mark.anyio


class S(BaseModel):
    n: int = 0


def report(state: S, ctx: NodeContext) -> dict[str, Any]:
    ctx.attach("report.txt", "all good", media_type="text/plain")
    return {"n": 1}


def crash(state: S, ctx: NodeContext) -> None:
    ctx.attach("dump.bin", b"\x00\x01\x02")
    raise ValueError("boom")


def graph(*nodes: tuple[str, Any]) -> Any:
    g = Graph("artifacts", S)
    names = [name for name, _ in nodes]
    for name, fn in nodes:
        g.node(name, fn)
    g.edge(START, names[0])
    for a, b in itertools.pairwise(names):
        g.edge(a, b)
    g.edge(names[-1], END)
    return g.compile()


async def test_a_node_attaches_an_artifact_to_the_run() -> None:
    store = InMemoryCheckpointStore()
    rt = GraphRuntime(store=store, clock=VirtualClock(), seed=1)
    trace = await rt.atrace(graph(("report", report)))
    run_id = trace.result.run_id
    assert await rt.artifacts(run_id) == [
        {"name": "report.txt", "media_type": "text/plain", "size": 8}]
    assert await store.get_artifact(run_id, "report.txt") == b"all good"
    (event,) = trace.events.of_type("custom")
    assert (event.node, event.channel, event.value) == (
        "report", "artifact", {"name": "report.txt", "media_type": "text/plain", "size": 8})


async def test_a_failing_node_keeps_its_diagnostics_and_a_run_can_attach_too() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=1)
    result = await rt.ainvoke(graph(("report", report), ("crash", crash)))
    assert isinstance(result.error, NodeFailed)
    await rt.attach(result.run_id, "summary.json", '{"ok": false}', "application/json")
    assert [a["name"] for a in await rt.artifacts(result.run_id)] == [
        "report.txt", "dump.bin", "summary.json"]


def test_graphflow_artifacts_lists_them(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteCheckpointStore(path)
    rt = GraphRuntime(store=store, clock=VirtualClock(), seed=1)
    result = rt.invoke(graph(("report", report), ("crash", crash)))
    store.close()
    assert main(["artifacts", str(path), result.run_id]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["NAME", "MEDIA", "TYPE", "SIZE"]
    assert [line.split() for line in out[1:]] == [
        ["report.txt", "text/plain", "8"], ["dump.bin", "application/octet-stream", "3"]]
    assert main(["artifacts", str(path), "run-nope"]) == 2
    assert "no run 'run-nope'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("", b"x"), "name must be a non-empty str"),
        (("a", 3), "data must be bytes or str"),
        (("a", b"x", ""), "media_type must be a non-empty str"),
    ],
    ids=["empty-name", "int-data", "empty-media-type"],
)
async def test_bad_attach_arguments_fail_the_node(args: tuple[Any, ...], match: str) -> None:
    def bad(state: S, ctx: NodeContext) -> None:
        ctx.attach(*args)

    result = await GraphRuntime(clock=VirtualClock(), seed=1).ainvoke(graph(("bad", bad)))
    assert isinstance(result.error, NodeFailed)
    assert isinstance(result.error.__cause__, TypeError)
    assert match in str(result.error)


async def test_a_store_without_artifacts_is_named() -> None:
    class Bare(InMemoryCheckpointStore):
        put_artifact = None  # type: ignore[assignment]

    rt = GraphRuntime(store=Bare(), clock=VirtualClock(), seed=1)
    with pytest.raises(GraphExecutionError, match="keeps no artifacts"):
        await rt.ainvoke(graph(("report", report)))
    with pytest.raises(InvalidArgument):
        await GraphRuntime().attach("run-x", "", b"")
