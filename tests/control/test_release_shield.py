"""A thread's claim is released even when the caller's scope is cancelled (seed 004: a run
that ends gives its thread up). The release runs shielded; on the in-memory store it never
suspends, so the shield is only opened when the release does suspend (a store doing I/O)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from pytest_graphflow._time._shield import shielded

pytestmark = pytest.mark.anyio


async def test_a_release_that_never_suspends_runs_to_its_end_in_a_cancelled_scope() -> None:
    done: list[str] = []

    async def release() -> str:
        done.append("released")
        return "ok"

    with anyio.CancelScope() as scope:
        scope.cancel()
        assert await shielded(release()) == "ok"
    assert done == ["released"]


async def test_a_release_that_suspends_is_shielded_from_a_cancellation() -> None:
    done: list[str] = []

    async def release() -> str:
        await anyio.sleep(0)  # suspends: the cancellation would be delivered here
        await anyio.sleep(0)
        done.append("released")
        return "ok"

    with anyio.CancelScope() as scope:
        scope.cancel()
        assert await shielded(release()) == "ok"
        await anyio.sleep(0)  # outside the shield the scope's cancellation comes through
        done.append("not reached")
    assert scope.cancelled_caught
    assert done == ["released"]


async def test_errors_of_the_release_reach_the_caller() -> None:
    async def fails_at_once() -> Any:
        raise OSError("store gone")

    async def fails_later() -> Any:
        await anyio.sleep(0)
        raise OSError("store gone later")

    with pytest.raises(OSError, match="store gone"):
        await shielded(fails_at_once())
    with pytest.raises(OSError, match="store gone later"):
        await shielded(fails_later())


async def test_any_awaitable_is_awaited_shielded() -> None:
    class Later:
        def __await__(self) -> Any:
            yield from anyio.sleep(0).__await__()
            return 5

    with anyio.CancelScope() as scope:
        scope.cancel()
        assert await shielded(Later()) == 5
