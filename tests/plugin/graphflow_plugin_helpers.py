"""Shared text and parsers of the plugin tests (imported by name: this folder is on sys.path)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable

import pytest

INNER_ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider")

# A module the inner tests import: a graph whose run depends on the seed (ids, and the
# interleaving of the parallel batch a/b), plus one that sleeps in virtual time.
GRAPHS = '''
from __future__ import annotations

import operator
from typing import Annotated

import anyio
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, Reducer


class State(BaseModel):
    n: int = 0
    log: Annotated[list[str], Reducer(operator.add)] = []


def fan():
    """START -> plan -> (a | b) -> join -> END."""
    g = Graph("fan", State)
    g.node("plan", lambda s: {"log": ["plan"]})
    g.node("a", lambda s: {"log": ["a"], "n": s.n + 1})
    g.node("b", lambda s: {"log": ["b"]})
    g.node("join", lambda s: {"log": ["join"]})
    g.edge(START, "plan")
    g.edge("plan", ["a", "b"])
    g.edge(["a", "b"], "join")
    g.edge("join", END)
    return g.compile()


async def _nap(s):
    await anyio.sleep(30)
    return {"n": s.n + 1}


def sleepy():
    """START -> nap (sleeps 30 virtual seconds) -> END."""
    g = Graph("sleepy", State)
    g.node("nap", _nap)
    g.edge(START, "nap")
    g.edge("nap", END)
    return g.compile()
'''

ANYIO_CONFTEST = '''
import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param
'''

SEED_LINE = re.compile(r"^SEED (\S+) (\d+)$", re.MULTILINE)


def seeds_of(result: pytest.RunResult) -> dict[str, int]:
    """``{node id: seed}`` from ``SEED <node id> <seed>`` lines the inner tests print."""
    return {m[1]: int(m[2]) for m in SEED_LINE.finditer(result.stdout.str())}


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


Run = Callable[..., pytest.RunResult]
"""What the ``run``/``run_subprocess`` fixtures are: run an inner pytest session."""
