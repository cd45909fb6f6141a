"""A join's hash is kept once computed (a fan-in of N sources looks its join up N times a
batch), but never carried into another process, where strings hash differently."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

from pytest_graphflow._graph._builder import Join

_CHILD = """
import pickle, sys
from pytest_graphflow._graph._builder import Join
join = pickle.loads(bytes.fromhex(sys.argv[1]))
fresh = Join("join", tuple(f"w{i}" for i in range(50)))
print({fresh: "found"}.get(join, "missing"), join == fresh)
"""


def test_equal_joins_hash_alike_and_find_each_other() -> None:
    sources = tuple(f"w{i}" for i in range(50))
    first, second = Join("join", sources), Join("join", sources)
    assert hash(first) == hash(first) == hash(second)
    assert {first: "found"}[second] == "found"
    assert Join("join", sources[:-1]) not in {first: "found"}


def test_a_join_unpickled_in_another_process_hashes_itself_there() -> None:
    join = Join("join", tuple(f"w{i}" for i in range(50)))
    hash(join)  # computed and kept in this process
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", _CHILD, pickle.dumps(join).hex()], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["found", "True"]
