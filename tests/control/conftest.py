"""Fixtures of the run-control acceptance tests (issue 3): both anyio backends."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every test runs on asyncio and on trio (sync tests pass it as ``backend=``)."""
    return str(request.param)
