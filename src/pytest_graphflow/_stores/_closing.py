"""A mixin giving a store ``with`` and ``async with`` support around its ``close()``."""

from __future__ import annotations

from types import TracebackType
from typing import Any, TypeVar

__all__ = ["ClosingStore"]

StoreT = TypeVar("StoreT", bound="ClosingStore")


class ClosingStore:
    """``with store:`` / ``async with store:`` close the store on exit."""

    def close(self) -> None:
        """Release what the store holds (nothing, by default)."""

    def __enter__(self: StoreT) -> StoreT:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self: StoreT) -> StoreT:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Any:
        self.close()
