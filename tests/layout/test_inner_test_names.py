"""The suite's own in-process pytester runs never reuse a test module's name.

An inner ``test_checkers.py`` written by ``makepyfile`` and run in the same process as
``tests/properties/test_checkers.py`` fails to collect ("import file mismatch") on the xdist
worker that imported the outer module first: CI went red that way once, and only under ``-n 2``
when both landed on one worker. Each inner file a test writes must have a name of its own.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INNER = re.compile(r"makepyfile\(\s*(test_\w+)\s*=")


def test_no_inner_test_file_is_named_like_a_module_of_the_suite() -> None:
    modules = {p.stem for folder in ("tests", "examples")
               for p in (ROOT / folder).rglob("test_*.py")}
    clashes = sorted(
        f"{path.relative_to(ROOT)} writes {name}.py"
        for path in (ROOT / "tests").rglob("*.py")
        for name in INNER.findall(path.read_text(encoding="utf-8"))
        if name in modules
    )
    assert clashes == [], ("rename the inner file (a name no module of tests/ or examples/ "
                           "has):\n" + "\n".join(clashes))
