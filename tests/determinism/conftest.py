"""Fixtures of the determinism acceptance tests (issue 4): both anyio backends."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every test runs on asyncio and on trio (sync tests pass it as ``backend=``)."""
    return str(request.param)
