"""Under pytest-xdist (``-n 2``) every test gets the seed and the result it gets without it:
the controller resolves the session seed once and hands it to the workers."""

from __future__ import annotations

import re

import pytest
from graphflow_plugin_helpers import Run, dedent, seeds_of

pytest.importorskip("xdist")

TESTS = dedent("""
    import zlib

    import pytest
    from gf_graphs import fan

    @pytest.mark.parametrize("i", range(6))
    def test_many(graph_runtime, graph_seed, request, i):
        trace = graph_runtime.trace(fan(), {"n": i})
        digest = zlib.crc32(trace.to_json().encode())
        print(f"SEED {request.node.nodeid} {graph_seed}")
        print(f"RUN {request.node.nodeid} {trace.result.run_id} {digest}")
        assert trace.status == "completed"

    def test_fails_on_purpose(graph_runtime, graph_seed, request):
        print(f"SEED {request.node.nodeid} {graph_seed}")
        assert graph_runtime.trace(fan()).result.run_id == "run-nope"
""")

RUN_LINE = re.compile(r"^RUN (\S+) (\S+) (\d+)$", re.MULTILINE)


def runs_of(result: pytest.RunResult) -> dict[str, tuple[str, str]]:
    """``{node id: (run id, crc32 of the event stream)}``."""
    return {m[1]: (m[2], m[3]) for m in RUN_LINE.finditer(result.stdout.str())}


def failure_lines(result: pytest.RunResult) -> list[str]:
    return sorted(line for line in result.stdout.lines
                  if line.startswith(("E ", "seed: ", "reproduce: ", "last run: ")))


def test_two_workers_give_the_same_seeds_and_results(graph_project: pytest.Pytester,
                                                     run: Run) -> None:
    graph_project.makepyfile(test_spread=TESTS)
    # A random session seed on the controller: if each worker resolved its own, the seeds
    # below would not match a plain run with the seed the header shows.
    spread = run("-rA", "-n", "2", "test_spread.py")
    spread.assert_outcomes(passed=6, failed=1)
    spread.stdout.fnmatch_lines(["created: 2/2 workers"])
    session = re.search(r"^graphflow: session seed (\d+)", spread.stdout.str(), re.MULTILINE)
    assert session is not None
    alone = run("-rA", "-p", "no:xdist", f"--graphflow-seed={session[1]}", "test_spread.py")
    alone.assert_outcomes(passed=6, failed=1)
    assert len(seeds_of(alone)) == 7
    assert seeds_of(spread) == seeds_of(alone)
    assert runs_of(spread) == runs_of(alone)
    assert len(runs_of(alone)) == 6
    assert failure_lines(spread) == failure_lines(alone)
    assert any(line.startswith("reproduce: ") for line in failure_lines(alone))
