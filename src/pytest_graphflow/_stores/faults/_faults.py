"""The data of fault injection: rules (``Fault``, ``FaultRule``), plans and the call log.

:class:`FaultyStore` applies them; here they are plain values, so Hypothesis can draw fault
plans and a log can be compared.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ..._records._checkpoint import Checkpoint
from ...errors import InvalidArgument, SimulatedCrash, StoreFault

if TYPE_CHECKING:
    pass

__all__ = [
    "ErrorSpec", "Fault", "FaultRule", "Outcome", "StoreCall", "crash_error", "dead_error",
    "tally",
]

Outcome = Literal["pending", "ok", "rejected", "failed", "crashed", "dead", "cancelled"]
"""What became of a store call (see :class:`StoreCall`)."""

FaultKind = Literal["reject", "fail", "delay", "crash"]
CrashPhase = Literal["before", "after"]
ErrorSpec = BaseException | type[BaseException] | None

PROTOCOL_OPS = ("save", "get", "load", "latest", "list", "delete", "fork")
"""The operations of :class:`CheckpointStore`; any other coroutine method is an "extra"."""


@dataclass(frozen=True)
class StoreCall:
    """One call made to a :class:`FaultyStore`, as recorded in :attr:`FaultyStore.calls`.

    Attributes:
        index: the call's position in the log, from 0.
        op: the store method called (``"save"``, ``"get"``, ... or an extra such as ``"claim"``).
        args: a short readable summary of the arguments (checkpoint id and run, run id, ...).
        outcome: ``"ok"`` (the inner store answered), ``"rejected"`` (a ``reject_save`` rule
            fired), ``"failed"`` (a ``fail`` rule fired, or the inner store raised: see
            ``injected``), ``"crashed"`` (a ``crash_at`` rule fired here), ``"dead"`` (the
            store had crashed before; the call reached nothing), ``"cancelled"`` (the caller
            was cancelled while the call was in flight) or ``"pending"`` (still in flight).
        error: ``repr`` of the exception the caller saw, or ``None``.
        time: the store clock's time when the call was made, if a virtual clock is bound.
        delay: the seconds a ``delay`` rule made the call wait.
        injected: ``True`` when the outcome was decided by a rule, not by the inner store.
    """

    index: int
    op: str
    args: str
    outcome: Outcome
    error: str | None = None
    time: datetime | None = None
    delay: float = 0.0
    injected: bool = False

    def __str__(self) -> str:
        text = f"#{self.index} {self.op}({self.args}) -> {self.outcome}"
        if self.delay:
            text += f" after {self.delay:g}s"
        if self.error is not None:
            text += f": {self.error}"
        return text if self.time is None else f"{self.time.isoformat()} {text}"


@dataclass(frozen=True)
class Fault:
    """A description of one fault rule, as plain data (see :class:`~pytest_graphflow.FaultPlan`).

    Build them with the class methods (:meth:`reject_save`, :meth:`fail`, :meth:`delay`,
    :meth:`crash_at`), which mirror the methods of :class:`FaultyStore`.

    Which calls a rule fires on: the calls of ``op`` made since the rule was added are
    counted; when ``when`` is given, only calls for which ``when(*args, **kwargs)`` is true
    count (for ``save`` that is ``when(checkpoint)``). The rule then fires on the ``nth``
    counted call, or on every ``every``-th one, or (neither given) on every counted call, at
    most ``times`` times in all.

    Attributes:
        kind: ``"reject"``, ``"fail"``, ``"delay"`` or ``"crash"``.
        op: the store operation the rule watches.
        nth: fire on this counted call only (1-based).
        every: fire on every ``every``-th counted call.
        times: fire at most this many times.
        seconds: for ``delay``, how long the call waits on the store's clock.
        phase: for ``crash``, ``"before"`` (the call never reaches the inner store) or
            ``"after"`` (it does, but the caller never learns).
        error: the exception (instance or class) a ``reject``/``fail`` rule raises; ``None``
            for a :class:`~pytest_graphflow.errors.StoreFault` with a readable message.
        when: a predicate on the call's arguments, or ``None``.
    """

    kind: FaultKind
    op: str = "save"
    nth: int | None = None
    every: int | None = None
    times: int | None = None
    seconds: float = 0.0
    phase: CrashPhase = "before"
    error: ErrorSpec = None
    when: Callable[..., bool] | None = None

    def __post_init__(self) -> None:
        where = f"Fault({self.describe()})"
        if self.kind not in ("reject", "fail", "delay", "crash"):
            raise InvalidArgument(
                f"{where}: kind={self.kind!r} is not one of 'reject', 'fail', 'delay', 'crash'"
            )
        if not isinstance(self.op, str) or not self.op:
            raise InvalidArgument(f"{where}: op={self.op!r} must be a store method name")
        if self.kind == "reject" and self.op != "save":
            raise InvalidArgument(f"{where}: only save can be rejected; use fail({self.op!r})")
        if self.nth is not None and self.every is not None:
            raise InvalidArgument(f"{where}: give nth= or every=, not both")
        for name in ("nth", "every", "times"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 1):
                raise InvalidArgument(f"{where}: {name}={value!r} must be an int >= 1 or None")
        if not isinstance(self.seconds, int | float) or not (
            math.isfinite(self.seconds) and self.seconds >= 0
        ):
            raise InvalidArgument(f"{where}: seconds={self.seconds!r} must be finite and >= 0")
        if self.phase not in ("before", "after"):
            raise InvalidArgument(f"{where}: phase={self.phase!r} must be 'before' or 'after'")
        error = self.error
        if error is not None and not isinstance(error, BaseException) and not (
            isinstance(error, type) and issubclass(error, BaseException)
        ):
            raise InvalidArgument(
                f"{where}: error={error!r} must be an exception instance or class"
            )
        if self.when is not None and not callable(self.when):
            raise InvalidArgument(f"{where}: when={self.when!r} must be callable")

    @classmethod
    def reject_save(
        cls,
        nth: int | None = None,
        *,
        every: int | None = None,
        when: Callable[[Checkpoint], bool] | None = None,
        error: ErrorSpec = None,
        times: int | None = None,
    ) -> Fault:
        """A rule that makes ``save`` raise instead of saving (see :meth:`FaultyStore.reject_save`).

        Returns:
            The fault description.
        """
        return cls("reject", "save", nth=nth, every=every, when=when, error=error, times=times)

    @classmethod
    def fail(
        cls,
        op: str,
        nth: int | None = None,
        *,
        every: int | None = None,
        when: Callable[..., bool] | None = None,
        error: ErrorSpec = None,
        times: int | None = None,
    ) -> Fault:
        """A rule that makes ``op`` raise without reaching the store (see :meth:`FaultyStore.fail`).

        Returns:
            The fault description.
        """
        return cls("fail", op, nth=nth, every=every, when=when, error=error, times=times)

    @classmethod
    def delay(
        cls,
        op: str,
        seconds: float,
        *,
        nth: int | None = None,
        every: int | None = None,
        when: Callable[..., bool] | None = None,
        times: int | None = None,
    ) -> Fault:
        """A rule that makes ``op`` wait first (see :meth:`FaultyStore.delay`).

        Returns:
            The fault description.
        """
        return cls("delay", op, nth=nth, every=every, when=when, times=times, seconds=seconds)

    @classmethod
    def crash_at(
        cls,
        op: str = "save",
        nth: int | None = 1,
        *,
        when: Callable[..., bool] | None = None,
        phase: CrashPhase = "before",
    ) -> Fault:
        """A rule that simulates a process death at one call (see :meth:`FaultyStore.crash_at`).

        Returns:
            The fault description.
        """
        return cls("crash", op, nth=nth, when=when, phase=phase, times=1)

    def describe(self) -> str:
        """The rule as the :class:`FaultyStore` call that adds it, e.g. ``reject_save(nth=2)``."""
        if self.kind == "reject":
            head, parts = "reject_save", []
        elif self.kind == "fail":
            head, parts = "fail", [repr(self.op)]
        elif self.kind == "delay":
            head, parts = "delay", [repr(self.op), f"{self.seconds!r}"]
        else:
            head, parts = "crash_at", [repr(self.op)]
        for name in ("nth", "every"):
            if getattr(self, name) is not None:
                parts.append(f"{name}={getattr(self, name)!r}")
        if self.when is not None:
            parts.append(f"when={getattr(self.when, '__name__', repr(self.when))}")
        if self.kind == "crash":
            parts.append(f"phase={self.phase!r}")
        else:
            if self.error is not None:
                parts.append(f"error={self.error!r}")
            if self.times is not None:
                parts.append(f"times={self.times!r}")
        return f"{head}({', '.join(parts)})"


@dataclass(eq=False)
class FaultRule:
    """A fault rule added to a :class:`FaultyStore`, with its counters.

    Attributes:
        fault: what the rule does (its :class:`Fault` description).
        hits: how many times it has fired.
        seen: calls of its operation made since it was added.
        matched: of those, the calls its ``when`` predicate accepted (all, without one).
    """

    fault: Fault
    hits: int = 0
    seen: int = 0
    matched: int = 0

    @property
    def kind(self) -> FaultKind:
        """The rule's kind: ``"reject"``, ``"fail"``, ``"delay"`` or ``"crash"``."""
        return self.fault.kind

    @property
    def op(self) -> str:
        """The operation the rule watches."""
        return self.fault.op

    @property
    def exhausted(self) -> bool:
        """``True`` once the rule can fire no more (its ``times`` or its ``nth`` are past)."""
        f = self.fault
        if f.times is not None and self.hits >= f.times:
            return True
        return f.nth is not None and self.matched >= f.nth

    def _count(
        self,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        each: tuple[tuple[Any, ...], ...] | None = None,
    ) -> bool:
        """Count one call of the rule's operation; ``True`` if the rule fires on it.

        ``each`` gives several argument tuples for one call (a commit of several
        checkpoints, watched by a ``save`` rule): ``when`` holds if it holds for any.
        """
        f = self.fault
        self.seen += 1
        if f.when is not None and each is not None:
            if not any(f.when(*a) for a in each):
                return False
        elif f.when is not None and not f.when(*args, **kwargs):
            return False
        self.matched += 1
        if f.times is not None and self.hits >= f.times:
            return False
        if f.nth is not None:
            return self.matched == f.nth
        if f.every is not None:
            return self.matched % f.every == 0
        return True

    def __repr__(self) -> str:
        return f"<FaultRule {self.fault.describe()} hits={self.hits}>"


def _make_error(
    rule: FaultRule, op: str, summary: str, args: tuple[Any, ...]
) -> BaseException:
    fault = rule.fault
    if isinstance(fault.error, BaseException):
        return fault.error
    if op == "save" and args and isinstance(args[0], Checkpoint):
        message = f"injected: save #{rule.seen} of checkpoint {args[0].id} "
        message += "rejected" if fault.kind == "reject" else "failed"
    elif op == "commit" and fault.op == "save":
        message = f"injected: save #{rule.seen} (commit {summary}) "
        message += "rejected" if fault.kind == "reject" else "failed"
    else:
        message = f"injected: {op} #{rule.seen} ({summary}) failed"
    if fault.error is None:
        return StoreFault(message)
    try:
        return fault.error(message)
    except TypeError:
        return fault.error()


def _pending_outcome(exc: BaseException) -> Outcome:
    return "cancelled" if isinstance(exc, anyio.get_cancelled_exc_class()) else "failed"


def _summarize(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    """A short readable rendering of a call's arguments (``None`` keyword values omitted)."""
    parts = [_short(a) for a in args]
    while parts and parts[-1] == "None":
        parts.pop()
    parts += [f"{k}={_short(v)}" for k, v in kwargs.items() if v is not None]
    return ", ".join(parts)


def _short(value: Any) -> str:
    if isinstance(value, Checkpoint):
        return f"{value.id} of run {value.run_id}"
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "{" + ", ".join(map(str, value)) + "}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."



def tally(fired: Iterable[FaultRule]) -> tuple[float, FaultRule | None]:
    """What the rules firing on one call do, in the order they were added: every ``delay``
    adds its seconds, and the first other rule decides the call (each counts a hit)."""
    wait = 0.0
    decider: FaultRule | None = None
    for rule in fired:
        if rule.kind == "delay":
            rule.hits += 1
            wait += rule.fault.seconds
        elif decider is None:
            rule.hits += 1
            decider = rule
    return wait, decider


def crash_error(rule: FaultRule, op: str, summary: str, *, target: str,
                recover: str) -> SimulatedCrash:
    """The error of the simulated crash ``rule`` decided at a call of ``op`` (``summary``: its
    arguments). ``target`` names what the wrapper calls (``"store"``, ``"saver"``), and
    ``recover`` how to go on."""
    phase = rule.fault.phase
    outcome = (f"It did not reach the {target}" if phase == "before"
               else f"It reached the {target}, but the caller never learned the outcome")
    return SimulatedCrash(
        f"simulated crash {phase} {op} #{rule.seen} ({summary}): {rule.fault.describe()}. "
        f"{outcome}; nothing after it reaches the {target}. {recover}")


def dead_error(crash: StoreCall, op: str, summary: str, *, subject: str,
               recover: str) -> SimulatedCrash:
    """The error of a call of ``op`` after the simulated crash at call ``crash``: it reached
    nothing. ``subject`` names what is dead (``"store"``, ``"checkpoint saver"``), and
    ``recover`` how to go on."""
    return SimulatedCrash(
        f"{subject} is dead: the process crashed at call #{crash.index} "
        f"({crash.op} {crash.args}); {op}({summary}) reached nothing. {recover}")
