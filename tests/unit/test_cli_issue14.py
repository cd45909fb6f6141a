"""Issue 14: "CLI: events misaligns node names over 12 characters, has no time column and no
--json; no command lists a run's checkpoints or the runs waiting on a human ('which refunds
are waiting for approval?'); mermaid MODULE:build does not call a factory."
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    Resume,
    SQLiteCheckpointStore,
    VirtualClock,
    interrupt,
)
from pytest_graphflow._cli._main import main


class Refund(BaseModel):
    amount: int = 0
    approved: bool = False


def build() -> object:
    g = Graph("refunds", Refund)
    g.node("look_up_the_customer_account", lambda s: None)
    g.node("approve", lambda s: {"approved": interrupt({"amount": s.amount}, id="ok")},
           effect="human")
    g.edge(START, "look_up_the_customer_account")
    g.edge("look_up_the_customer_account", "approve")
    g.edge("approve", END)
    return g.compile()


@pytest.fixture
def store_file(tmp_path: Path) -> tuple[Path, str, str]:
    """Two refund runs: one waiting for approval, one approved and done."""
    path = tmp_path / "refunds.db"
    with SQLiteCheckpointStore(path) as store:
        rt = GraphRuntime(store, clock=VirtualClock(), seed=1)
        waiting = rt.invoke(build(), {"amount": 120})
        done = rt.invoke(build(), {"amount": 30})
        rt.resume(done.run_id, Resume(True))
    return path, waiting.run_id, done.run_id


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_events_stay_aligned_with_long_node_names_and_show_the_time(
    capsys: pytest.CaptureFixture[str], store_file: tuple[Path, str, str]
) -> None:
    path, waiting, _ = store_file
    code, out, _ = run(capsys, "events", str(path), waiting)
    assert code == 0
    lines = out.splitlines()
    starts = [line for line in lines if " node_start " in line]
    # what follows the node column starts at one offset on every line
    after = {line.index("task=") for line in starts}
    assert len(after) == 1, out
    assert any("look_up_the_customer_account " in line for line in starts)
    assert all(line.split()[1].count(":") == 2 for line in lines)  # HH:MM:SS.fff


def test_events_as_json(capsys: pytest.CaptureFixture[str],
                        store_file: tuple[Path, str, str]) -> None:
    path, waiting, _ = store_file
    code, out, _ = run(capsys, "events", str(path), waiting, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["run_id"] == waiting
    events = doc["events"]
    assert events[0]["type"] == "run_start"
    assert events[-1]["type"] == "run_end"
    assert [e["seq"] for e in events] == list(range(len(events)))


def test_checkpoints_lists_a_runs_checkpoints(capsys: pytest.CaptureFixture[str],
                                              store_file: tuple[Path, str, str]) -> None:
    path, waiting, _ = store_file
    code, out, _ = run(capsys, "checkpoints", str(path), waiting)
    assert code == 0
    rows = out.splitlines()
    assert rows[0].split() == ["CHECKPOINT", "STEP", "STATUS", "NODE", "TIME", "PENDING"]
    assert rows[-1].split()[2] == "interrupted"
    assert rows[-1].split()[-1].endswith(":ok")

    code, out, _ = run(capsys, "checkpoints", str(path), waiting, "--json")
    found = json.loads(out)
    assert len(found) == len(rows) - 1
    assert found[-1]["status"] == "interrupted"
    assert found[-1]["pending"] == [rows[-1].split()[-1]]


def test_checkpoints_of_an_unknown_run(capsys: pytest.CaptureFixture[str],
                                       store_file: tuple[Path, str, str]) -> None:
    path, _, _ = store_file
    code, out, err = run(capsys, "checkpoints", str(path), "run-nope")
    assert (code, out) == (2, "")
    assert "no run 'run-nope'" in err
    assert "graphflow runs" in err


def test_waiting_lists_the_runs_waiting_for_a_human(capsys: pytest.CaptureFixture[str],
                                                    store_file: tuple[Path, str, str]) -> None:
    path, waiting, done = store_file
    code, out, _ = run(capsys, "waiting", str(path))
    assert code == 0
    rows = out.splitlines()
    assert rows[0].split()[:2] == ["RUN", "ID"]
    assert len(rows) == 2
    assert rows[1].startswith(waiting)
    assert "approve:ok" in rows[1]
    assert '{"amount":120}' in rows[1]
    assert done not in out

    code, out, _ = run(capsys, "waiting", str(path), "--json")
    (row,) = json.loads(out)
    assert row["run_id"] == waiting
    assert row["interrupts"][0]["payload"] == {"amount": 120}


def test_waiting_when_nothing_waits(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    SQLiteCheckpointStore(path).close()
    assert run(capsys, "waiting", str(path)) == (
        0, f"no run in {path} is waiting at an interrupt\n", "")


FACTORIES = """
from pydantic import BaseModel
from pytest_graphflow import END, START, Graph

class S(BaseModel):
    n: int = 0

def build():
    g = Graph("built", S)
    g.node("only", lambda s: None)
    g.edge(START, "only")
    g.edge("only", END)
    return g.compile()

def needs_args(tools):
    return build()

def raises():
    raise RuntimeError("no config")
"""


@pytest.fixture
def factories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    (tmp_path / "gf_cli_factories.py").write_text(textwrap.dedent(FACTORIES))
    monkeypatch.chdir(tmp_path)
    yield "gf_cli_factories"
    sys.modules.pop("gf_cli_factories", None)


def test_mermaid_calls_a_factory(capsys: pytest.CaptureFixture[str], factories: str) -> None:
    code, out, _ = run(capsys, "mermaid", f"{factories}:build")
    assert code == 0
    assert 'n_only["only"]' in out


@pytest.mark.parametrize(("target", "expected"), [
    ("needs_args", "calling it with no arguments failed"),
    ("raises", "raises() raised RuntimeError: no config"),
], ids=["needs-arguments", "raises"])
def test_mermaid_of_a_bad_factory(capsys: pytest.CaptureFixture[str], factories: str,
                                  target: str, expected: str) -> None:
    code, out, err = run(capsys, "mermaid", f"{factories}:{target}")
    assert (code, out) == (2, "")
    assert expected in err
