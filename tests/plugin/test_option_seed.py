"""``--graphflow-seed`` and the ``graphflow_seed`` ini key: the session seed, the header, and
per-test seeds that depend only on the session seed and the node id."""

from __future__ import annotations

import re
import zlib

import pytest
from graphflow_plugin_helpers import Run, dedent, seeds_of

from pytest_graphflow._plugin._seed import test_seed as per_test_seed

PRINTING_TESTS = dedent("""
    def test_a(graph_seed, request):
        print(f"SEED {request.node.nodeid} {graph_seed}")

    def test_b(graph_seed, request):
        print(f"SEED {request.node.nodeid} {graph_seed}")

    def test_c(graph_seed, request):
        print(f"SEED {request.node.nodeid} {graph_seed}")
""")

HEADER = re.compile(r"^graphflow: session seed (\d+) \(reproduce with --graphflow-seed=(\d+)\)$",
                    re.MULTILINE)


def session_seed(result: pytest.RunResult) -> int:
    match = HEADER.search(result.stdout.str())
    assert match is not None, result.stdout.str()
    assert match[1] == match[2]
    return int(match[1])


def test_the_per_test_seed_is_session_seed_plus_crc32_of_the_node_id() -> None:
    nodeid = "tests/test_x.py::test_a[1]"
    assert per_test_seed(5, nodeid) == (5 + zlib.crc32(nodeid.encode())) % 2**32
    assert per_test_seed(2**32 - 1, nodeid) == (2**32 - 1 + zlib.crc32(nodeid.encode())) % 2**32


def test_option_sets_the_session_seed_and_the_header(pytester: pytest.Pytester, run: Run) -> None:
    pytester.makepyfile(test_seeds=PRINTING_TESTS)
    result = run("-rP", "--graphflow-seed=1234", "test_seeds.py")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["graphflow: session seed 1234 (reproduce with --graphflow-seed=1234)"])
    seeds = seeds_of(result)
    assert seeds == {n: per_test_seed(1234, n) for n in
                     ("test_seeds.py::test_a", "test_seeds.py::test_b", "test_seeds.py::test_c")}
    assert len(set(seeds.values())) == 3


def test_without_option_the_session_seed_is_random(pytester: pytest.Pytester, run: Run) -> None:
    """Twin: no option, no ini: a fresh seed each session, printed so it can be passed back."""
    pytester.makepyfile(test_seeds=PRINTING_TESTS)
    first = run("-rP", "test_seeds.py")
    second = run("-rP", "test_seeds.py")
    assert session_seed(first) != session_seed(second)  # 1 in 2**32 to collide
    again = run("-rP", f"--graphflow-seed={session_seed(first)}", "test_seeds.py")
    assert seeds_of(again) == seeds_of(first)


def test_random_on_the_command_line_beats_the_ini(pytester: pytest.Pytester, run: Run) -> None:
    pytester.makeini("[pytest]\ngraphflow_seed = 42\n")
    pytester.makepyfile(test_seeds=PRINTING_TESTS)
    assert session_seed(run("test_seeds.py")) == 42
    assert session_seed(run("--graphflow-seed=7", "test_seeds.py")) == 7
    randoms = {session_seed(run("--graphflow-seed=random", "test_seeds.py")) for _ in range(2)}
    assert len(randoms) == 2


def test_ini_sets_the_session_seed(pytester: pytest.Pytester, run: Run) -> None:
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ngraphflow_seed = "99"\n')
    pytester.makepyfile(test_seeds=PRINTING_TESTS)
    result = run("-rP", "--strict-config", "test_seeds.py")
    assert session_seed(result) == 99
    assert seeds_of(result)["test_seeds.py::test_b"] == per_test_seed(99, "test_seeds.py::test_b")


def test_a_test_keeps_its_seed_when_others_are_added_or_deselected(
    pytester: pytest.Pytester, run: Run
) -> None:
    pytester.makepyfile(test_seeds=PRINTING_TESTS)
    full = seeds_of(run("-rP", "--graphflow-seed=5", "test_seeds.py"))
    only_b = seeds_of(run("-rP", "--graphflow-seed=5", "-k", "test_b", "test_seeds.py"))
    assert only_b == {"test_seeds.py::test_b": full["test_seeds.py::test_b"]}
    pytester.makepyfile(test_seeds=PRINTING_TESTS + dedent("""
        def test_0(graph_seed, request):
            print(f"SEED {request.node.nodeid} {graph_seed}")
    """))
    grown = seeds_of(run("-rP", "--graphflow-seed=5", "test_seeds.py"))
    assert {k: grown[k] for k in full} == full
    assert len(grown) == 4


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        pytest.param(["--graphflow-seed=abc"], None,
                     "ERROR: --graphflow-seed='abc' is not a valid graphflow seed: use an integer "
                     "from 0 to 4294967295, 'random' for a fresh session seed, or 'last' "
                     "(option only) for the previous session's",
                     id="option-text"),
        pytest.param(["--graphflow-seed=-3"], None, "ERROR: --graphflow-seed='-3' is not a valid*",
                     id="option-negative"),
        pytest.param(["--graphflow-seed=4294967296"], None,
                     "ERROR: --graphflow-seed='4294967296' is not a valid*", id="option-too-big"),
        pytest.param([], "graphflow_seed = 1.5",
                     "ERROR: graphflow_seed (ini)='1.5' is not a valid graphflow seed*",
                     id="ini-float"),
    ],
)
def test_bad_seeds_are_usage_errors(
    pytester: pytest.Pytester, run: Run, args: list[str], ini: str | None, message: str
) -> None:
    if ini is not None:
        pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(test_seeds=PRINTING_TESTS)
    result = run(*args, "test_seeds.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_the_options_are_in_their_own_help_group(pytester: pytest.Pytester, run: Run) -> None:
    result = run("--help")
    result.stdout.fnmatch_lines([
        "graphflow (deterministic graph runs):",
        "  --graphflow-seed=SEED*",
        "*--graphflow-store=STORE*",
    ])
    result.stdout.fnmatch_lines(["  graphflow_seed (string):*", "  graphflow_store (string):*"])
