"""``--graphflow-seed=last`` reuses the previous session's seed (kept in pytest's cache)."""

from __future__ import annotations

import re

import pytest

TEST = """
def test_prints_its_seed(graph_seed):
    print("SEED", graph_seed)
"""


def _seed(result: pytest.RunResult) -> int:
    match = re.search(r"graphflow: session seed (\d+)", result.stdout.str())
    assert match, result.stdout.str()
    return int(match.group(1))


def test_last_reuses_the_previous_sessions_seed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TEST)
    first = pytester.runpytest("-p", "no:randomly", "--graphflow-seed=random")
    again = pytester.runpytest("-p", "no:randomly", "--graphflow-seed=last")
    assert _seed(again) == _seed(first)
    again.assert_outcomes(passed=1)


def test_last_without_an_earlier_session_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TEST)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider",
                                "--graphflow-seed=last")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--graphflow-seed=last: no seed of an earlier session*"])
