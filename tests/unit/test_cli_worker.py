"""``graphflow worker`` on bad arguments (issue 23, item 15): one clear line and exit status 2,
never a traceback, and never the password of the DSN.

"`graphflow worker` prints the DSN with its password when it cannot connect; some bad
arguments give a traceback; `--poll -1` and `--max-jobs -1` are accepted."
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_graphflow._cli._main import main

PASSWORD = "hunter2-s3cret"
MODULE = "graphflow_cli_worker_graphs"
GRAPHS = """
from pydantic import BaseModel
from pytest_graphflow import END, START, Graph

class State(BaseModel):
    n: int = 0

builder = Graph("orders", State)
builder.node("work", lambda s: None)
builder.edge(START, "work").edge("work", END)
orders = builder.compile()
not_a_graph = 42
"""


@pytest.fixture
def graphs_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module with a graph in the current directory (like a user's project)."""
    (tmp_path / f"{MODULE}.py").write_text(textwrap.dedent(GRAPHS))
    monkeypatch.chdir(tmp_path)
    yield MODULE
    sys.modules.pop(MODULE, None)


UNREACHABLE_URI = f"postgresql://app:{PASSWORD}@127.0.0.1:1/graphs"
G = f"{MODULE}:orders"

# (arguments after `graphflow worker`, text the error holds); SERVER is the test server's DSN
# with a password added (the server ignores it), SCHEMA a fresh schema.
CASES = [
    pytest.param([UNREACHABLE_URI, G], "cannot open the store on "
                 "'postgresql://app:***@127.0.0.1:1/graphs'", id="cannot-connect-uri"),
    pytest.param([f"host=/nonexistent/socket/dir password={PASSWORD} dbname=graphs", G],
                 "cannot open the store on 'host=/nonexistent/socket/dir password=*** "
                 "dbname=graphs'", id="cannot-connect-key-value"),
    pytest.param([f"host=db password='{PASSWORD}' user", G],
                 "is not a libpq connection string or URI", id="dsn-syntax"),
    pytest.param([f"postgresql://app:{PASSWORD}@db/graphs?colour=blue", G],
                 "is not a libpq connection string or URI", id="dsn-unknown-uri-parameter"),
    pytest.param([f"postgresql://app:{PASSWORD}@db:99999999/graphs", G],
                 "cannot open the store on 'postgresql://app:***@db:99999999/graphs'",
                 id="dsn-bad-port"),
    pytest.param(["SERVER", MODULE], "is not MODULE:GRAPH", id="target-without-colon"),
    pytest.param(["SERVER", "graphflow_no_such_module:g"], "cannot import module",
                 id="missing-module"),
    pytest.param(["SERVER", f"{MODULE}:missing"], "has no attribute 'missing'",
                 id="missing-graph"),
    pytest.param(["SERVER", f"{MODULE}:not_a_graph"], "not a Graph or CompiledGraph",
                 id="not-a-graph"),
    pytest.param(["SERVER", G, G], "two graphs have graph_id 'orders'", id="same-graph-twice"),
    pytest.param(["SERVER", G, "--schema", "bad schema;"], "schema", id="bad-schema"),
    pytest.param(["SERVER", G, "--poll", "-1"], "argument --poll: -1 is not a positive",
                 id="negative-poll"),
    pytest.param(["SERVER", G, "--poll", "0"], "argument --poll: 0 is not a positive",
                 id="zero-poll"),
    pytest.param(["SERVER", G, "--poll", "nan"], "argument --poll: nan is not a positive",
                 id="nan-poll"),
    pytest.param(["SERVER", G, "--max-jobs", "-1"], "argument --max-jobs: -1 is not a positive",
                 id="negative-max-jobs"),
    pytest.param(["SERVER", G, "--max-jobs", "0"], "argument --max-jobs: 0 is not a positive",
                 id="zero-max-jobs"),
    pytest.param(["SERVER", G, "--claim-ttl", "-1"], "argument --claim-ttl: -1 is not a "
                 "positive", id="negative-claim-ttl"),
    pytest.param(["SERVER", G, "--claim-ttl", "inf"], "argument --claim-ttl: inf is not a "
                 "positive", id="infinite-claim-ttl"),
    pytest.param(["SERVER", G, "--max-attempts", "0"], "argument --max-attempts: 0 is not a "
                 "positive", id="zero-max-attempts"),
]


@pytest.mark.parametrize(("args", "text"), CASES)
def test_bad_worker_arguments_get_one_clear_line_and_never_the_password(
    capsys: pytest.CaptureFixture[str], graphs_module: str, postgres_dsn: str,
    fresh_pg_schema: str, args: list[str], text: str,
) -> None:
    server = f"{postgres_dsn} password={PASSWORD}"
    argv = ["worker", *[server if a == "SERVER" else a for a in args]]
    if "--schema" not in argv:
        argv += ["--schema", fresh_pg_schema]
    code = main([*argv, "--until-done"])  # raises if a traceback would be printed
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert out == ""
    assert PASSWORD not in err
    assert text in err
    assert "Traceback" not in err
    if "argument --" in text:  # argparse: the usage, then the error
        assert err.splitlines()[-1].startswith("graphflow worker: error: argument --")
    else:
        assert err.startswith("graphflow: error: ")
        assert err.count("\n") == 1
