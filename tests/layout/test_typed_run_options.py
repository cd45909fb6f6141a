"""The run options of ``GraphRuntime``'s methods are typed (``**options: Unpack[RunOptions]``):
mypy and editors know its keys, so a misspelt or mistyped option is a type error before
the run-time ``InvalidArgument``. Runs mypy (``mypy.api``) on a small user module."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    InvalidArgument,
    RunOptions,
    VirtualClock,
)

USER_CODE = '''\
from pytest_graphflow import CompiledGraph, GraphRuntime, RunOptions


async def use(rt: GraphRuntime, graph: CompiledGraph, opts: RunOptions) -> None:
    rt.invoke(graph, {}, timeout=3.0, max_supersteps=None, interrupt_before=["a"],
              interrupt_after="b", tenant_id="t", on_interrupt=lambda i: i.payload)
    rt.invoke(graph, **opts)
    rt.invoke(graph, {}, cancel_at="node_end:a", cancel_after=5)
    rt.trace(graph, cancel_at=lambda e: e.seq == 3)
    rt.invoke(graph, {}, max_super_steps=3)
    rt.trace(graph, timeout="soon")
    await rt.aresume("run-1", tenant_id=7)
    rt.invoke(graph, cancel_at=3)
'''


class _State(BaseModel):
    n: int = 0


def test_every_run_option_is_a_key_of_run_options() -> None:
    assert RunOptions.__optional_keys__ == {
        "max_supersteps", "timeout", "on_interrupt", "tenant_id", "interrupt_before",
        "interrupt_after", "cancel_after", "cancel_at"}
    graph = Graph("options", _State)
    graph.node("a", lambda s: None).edge(START, "a").edge("a", END)
    runtime = GraphRuntime(clock=VirtualClock(), seed=1)
    with pytest.raises(InvalidArgument, match=r"unknown run option\(s\) \['max_super_steps'\]"):
        runtime.invoke(graph.compile(), max_super_steps=3)


def test_mypy_reports_a_misspelt_or_mistyped_run_option(tmp_path: Path) -> None:
    user = tmp_path / "graphflow_user_options.py"
    user.write_text(USER_CODE, encoding="utf-8")
    report, errors, status = api.run([
        str(user), "--strict", "--follow-imports=silent", "--no-error-summary",
        "--cache-dir", str(tmp_path / "cache"), "--config-file", ""])
    assert errors == ""
    found = [(int(line.split(": error: ")[0].rsplit(":", 1)[1]), line.rsplit("[", 1)[1])
             for line in report.splitlines() if ": error: " in line]
    # lines 5-9 are right; 10 misspells an option, 11, 12 and 13 give one the wrong type
    assert found == [(10, "call-arg]"), (11, "arg-type]"), (12, "arg-type]"),
                     (13, "arg-type]")], report
    assert 'did you mean "max_supersteps"' in report
    assert status == 1
