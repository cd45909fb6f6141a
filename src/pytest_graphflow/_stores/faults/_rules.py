"""The rules API of :class:`~._store.FaultyStore`: ``add_fault`` and its shorthands
(``reject_save``, ``fail``, ``delay``, ``crash_at``), ``clear_rules``, ``revive`` and
``bind_clock``. Each returns the store, for chaining.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Self

from ..._records._checkpoint import Checkpoint
from ..._time._clock import Clock
from ...errors import InvalidArgument
from ._calls import FaultyCalls
from ._faults import PROTOCOL_OPS, CrashPhase, ErrorSpec, Fault, FaultRule

__all__ = ["FaultyRules"]


class FaultyRules(FaultyCalls):
    """The methods that add and clear the fault rules of a :class:`~._store.FaultyStore`."""

    # ------------------------------------------------------------------------ rules

    def bind_clock(self, clock: Clock, *, replace: bool = False) -> None:
        """Use ``clock`` for delays and call times, unless a clock is already bound.

        The runtime calls this when it starts a run, so delays happen in the run's (virtual)
        time; a clock given to the constructor wins unless ``replace=True``.
        """
        if self._clock is None or replace:
            self._set_clock(clock)

    def add_fault(self, fault: Fault) -> Self:
        """Add a rule described by ``fault``.

        Returns:
            This store, for chaining; the new rule is :attr:`last_rule`.

        Raises:
            InvalidArgument: when the inner store has no coroutine method ``fault.op``.
        """
        if not isinstance(fault, Fault):
            raise InvalidArgument(f"add_fault({fault!r}): expected a Fault")
        if fault.op not in PROTOCOL_OPS and not inspect.iscoroutinefunction(
            getattr(self._inner, fault.op, None)
        ):
            raise InvalidArgument(
                f"{fault.describe()}: {type(self._inner).__name__} has no coroutine method "
                f"{fault.op!r}; store operations: {sorted(self._async_ops())}"
            )
        self._rules.append(FaultRule(fault))
        return self

    def reject_save(
        self,
        nth: int | None = None,
        *,
        every: int | None = None,
        when: Callable[[Checkpoint], bool] | None = None,
        error: ErrorSpec = None,
        times: int | None = None,
    ) -> Self:
        """Make ``save`` raise, without saving anything, on chosen calls.

        Args:
            nth: reject the nth save made after this rule was added (1-based).
            every: reject every ``every``-th save.
            when: count only saves whose checkpoint satisfies ``when(checkpoint)``; alone, it
                rejects every such save.
            error: the exception (instance or class) to raise; by default a
                :class:`~pytest_graphflow.errors.StoreFault` naming the save and checkpoint.
            times: reject at most this many saves.

        Returns:
            This store, for chaining.
        """
        return self.add_fault(
            Fault.reject_save(nth, every=every, when=when, error=error, times=times)
        )

    def fail(
        self,
        op: str,
        nth: int | None = None,
        *,
        every: int | None = None,
        when: Callable[..., bool] | None = None,
        error: ErrorSpec = None,
        times: int | None = None,
    ) -> Self:
        """Make operation ``op`` raise, without reaching the inner store, on chosen calls.

        Args:
            op: ``"get"``, ``"load"``, ``"latest"``, ``"list"``, ``"delete"``, ``"fork"``,
                ``"save"`` or any coroutine method of the inner store (``"claim"``, ...).
            nth: fail the nth call of ``op`` made after this rule was added (1-based).
            every: fail every ``every``-th call.
            when: count only calls for which ``when(*args, **kwargs)`` is true.
            error: the exception (instance or class); by default a ``StoreFault``.
            times: fail at most this many calls.

        Returns:
            This store, for chaining.
        """
        return self.add_fault(Fault.fail(op, nth, every=every, when=when, error=error, times=times))

    def delay(
        self,
        op: str,
        seconds: float,
        *,
        nth: int | None = None,
        every: int | None = None,
        when: Callable[..., bool] | None = None,
        times: int | None = None,
    ) -> Self:
        """Make calls of ``op`` wait ``seconds`` on the store's clock before anything else.

        Under a :class:`~pytest_graphflow.VirtualClock` the wait is virtual (``clock.sleep``);
        with no clock bound it is real (``anyio.sleep``). Without ``nth``/``every``/``when``
        every call waits.

        Returns:
            This store, for chaining.
        """
        return self.add_fault(
            Fault.delay(op, seconds, nth=nth, every=every, when=when, times=times)
        )

    def crash_at(
        self,
        op: str = "save",
        nth: int | None = 1,
        *,
        when: Callable[..., bool] | None = None,
        phase: CrashPhase = "before",
    ) -> Self:
        """Simulate a process death at the ``nth`` call of ``op`` (that satisfies ``when``).

        The call raises :class:`~pytest_graphflow.errors.SimulatedCrash` (a ``BaseException``,
        so no ``except Exception`` swallows it). With ``phase="before"`` the call does not
        reach the inner store; with ``phase="after"`` it does, and the crash comes after the
        inner store answered, so the caller never learns the outcome. From then on the store
        is dead: every call raises ``SimulatedCrash`` and reaches nothing, until
        :meth:`revive`. To recover the way a real deployment would, open a fresh runtime over
        :attr:`inner`.

        Returns:
            This store, for chaining.
        """
        return self.add_fault(Fault.crash_at(op, nth, when=when, phase=phase))

    def clear_rules(self) -> Self:
        """Remove every rule (the log, the saves and a crash are kept).

        Returns:
            This store, for chaining.
        """
        self._rules.clear()
        return self

    def revive(self) -> Self:
        """Bring a crashed store back to life (its rules stay; a fired crash does not re-fire).

        Returns:
            This store, for chaining.
        """
        self._crash = None
        return self
