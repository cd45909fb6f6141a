"""The LangGraph bridge's tests need the ``langgraph`` extra (part of ``test``, so CI has it).

Without LangGraph installed they are left out of collection locally; under ``CI`` they are
collected anyway, so a missing LangGraph fails loudly instead of skipping.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

collect_ignore_glob = (
    ["test_*.py"] if importlib.util.find_spec("langgraph") is None and not os.environ.get("CI")
    else []
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:  # the example agent is tested here too (differential)
    sys.path.insert(0, str(EXAMPLES))


@pytest.fixture(autouse=True)
def _wall_clock_patch_held() -> Iterator[None]:
    """Hold the wall-clock patch for the whole test, as the plugin's graph fixtures do, so
    each harness leg does not start freezegun again (~70 ms a leg)."""
    from pytest_graphflow._time import _wallclock

    driver = _wallclock.activate()
    yield
    _wallclock.deactivate(driver)


@pytest.fixture
def anyio_backend() -> str:
    """The harness runs LangGraph on its own loop; the test's own loop is asyncio."""
    return "asyncio"
