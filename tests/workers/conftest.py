"""Worker tests: graphs in ``wgraphs`` (importable by worker processes), both anyio backends."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run every ``@pytest.mark.anyio`` worker test on asyncio and on trio."""
    return str(request.param)
