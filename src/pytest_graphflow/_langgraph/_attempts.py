"""A LangGraph node task's attempts, one by one, for the harness's events.

LangGraph retries a failed node inside one task (``RetryPolicy``) and reports only the last
attempt's result. The harness hands LangGraph's retry loop a copy of the task whose runnable
is an :class:`Attempts`: it reports each failed attempt LangGraph will retry and each new
attempt's start to the leg's :class:`AttemptLog` (the recorder), which logs them as
``error(will_retry=True)`` and ``node_start(attempt=n)``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

__all__ = ["AttemptLog", "Attempts"]


class AttemptLog(Protocol):
    """Where a node task's retried attempts are reported (the leg's recorder)."""

    def retry_error(self, namespace: tuple[str, ...], task_id: str, node: str, attempt: int,
                    error: BaseException | None) -> None:
        """Attempt ``attempt`` failed and LangGraph will run the task again."""

    def retry_start(self, namespace: tuple[str, ...], task_id: str, node: str,
                    attempt: int) -> None:
        """Attempt ``attempt`` (2 or more) of the task began."""


class Attempts:
    """A node task's runnable, counting the attempts LangGraph's retry loop makes of it.

    LangGraph retries inside one task and reports only the last attempt's result; this
    reports each failed attempt it will retry (decided with LangGraph's own rule: the first
    policy whose ``retry_on`` matches, while attempts remain) and each new attempt's start.
    """

    def __init__(self, task: Any, policies: Any, log: AttemptLog,
                 namespace: tuple[str, ...]) -> None:
        self._proc = task.proc
        self._policies = list(policies)
        self._log = log
        self._namespace = namespace
        self._task_id = str(task.id)
        self._node = str(task.name)
        self._attempt = 0
        self._reported = 0  # the last attempt whose retry error was reported

    def __getattr__(self, name: str) -> Any:
        return getattr(self._proc, name)

    def _begin(self) -> None:
        self._attempt += 1
        if self._attempt == 1:
            return
        if self._reported < self._attempt - 1:  # failed where the runnable did not see it
            self._log.retry_error(self._namespace, self._task_id, self._node,
                                  self._attempt - 1, None)
        self._log.retry_start(self._namespace, self._task_id, self._node, self._attempt)

    def _failed(self, exc: Exception) -> None:
        from langgraph.errors import GraphBubbleUp, ParentCommand
        from langgraph.pregel._retry import _should_retry_on

        if isinstance(exc, (GraphBubbleUp, ParentCommand)):
            return
        policy = next((p for p in self._policies if _should_retry_on(p, exc)), None)
        if policy is not None and self._attempt < policy.max_attempts:
            self._reported = self._attempt
            self._log.retry_error(self._namespace, self._task_id, self._node, self._attempt,
                                  exc)

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """One attempt (``proc.ainvoke``)."""
        self._begin()
        try:
            return await self._proc.ainvoke(input, config, **kwargs)
        except Exception as exc:
            self._failed(exc)
            raise

    async def astream(self, input: Any, config: Any = None, **kwargs: Any
                      ) -> AsyncIterator[Any]:
        """One attempt (``proc.astream``)."""
        self._begin()
        try:
            async for chunk in self._proc.astream(input, config, **kwargs):
                yield chunk
        except Exception as exc:
            self._failed(exc)
            raise
