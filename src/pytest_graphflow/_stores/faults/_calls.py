"""The call machinery of :class:`~._store.FaultyStore`: every call is logged, counted by the
rules of its operation, delayed, rejected, failed or crashed as the first rule that fires
decides, and otherwise passed on to the inner store.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import anyio

from ..._time._clock import Clock, VirtualClock
from ...errors import SimulatedCrash
from .._protocol import CheckpointStore
from ._faults import (
    PROTOCOL_OPS,
    FaultRule,
    Outcome,
    StoreCall,
    _make_error,
    _pending_outcome,
    _summarize,
    crash_error,
    dead_error,
    tally,
)

__all__ = ["FaultyCalls", "LoggedCall", "as_record", "record_of"]


LoggedCall = list[Any]
"""A call logged on the fast path (no rules, store alive): a plain list
``[op, args, kwargs, summary, when, outcome, error]`` (building it costs no Python call);
its arguments are summarised and its :class:`StoreCall` built only when the log is read
(most tests never read it). ``when`` is ``None`` (no virtual clock), the call's time, or
``(clock, nanoseconds)`` of a plain :class:`VirtualClock`, turned into the time on reading."""

OP, ARGS, KWARGS, SUMMARY, WHEN, OUTCOME, ERROR = range(7)


def _time_of(when: Any) -> datetime | None:
    """The time of a logged call's ``when``: what the clock's ``now()`` said then."""
    if type(when) is tuple:
        clock, ns = when
        time: datetime = clock.start + timedelta(microseconds=ns // 1000)  # its now()
        return time
    return when  # type: ignore[no-any-return]


def record_of(index: int, entry: list[Any]) -> StoreCall:
    """The :class:`StoreCall` a fast-path entry at position ``index`` stands for."""
    error = entry[ERROR]
    return StoreCall(index, entry[OP], summary_of(entry[SUMMARY], entry[ARGS], entry[KWARGS]),
                     entry[OUTCOME], error=None if error is None else repr(error),
                     time=_time_of(entry[WHEN]))


Summary = str | Callable[[], str] | tuple[str, str] | None
"""A call's argument summary: given, made on demand, a save's ``(checkpoint id, run id)``
(made on demand: a tuple costs a save less than a closure), or ``None`` (made from the
arguments)."""


def summary_of(summary: Summary, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None) -> str:
    """The summary text of a call."""
    if summary is None:
        return _summarize(args, kwargs or {})
    if type(summary) is tuple:  # a save's checkpoint and run
        return f"{summary[0]} of run {summary[1]}"
    return summary if isinstance(summary, str) else summary()  # type: ignore[operator]


def as_record(index: int, call: StoreCall | list[Any]) -> StoreCall:
    """The :class:`StoreCall` of the log entry at position ``index``."""
    return call if type(call) is StoreCall else record_of(index, call)  # type: ignore[arg-type]


class FaultyCalls:
    """The state of a :class:`~._store.FaultyStore` (rules, call log, saves, crash) and how
    one call goes through the rules (the base of the wrapper)."""

    _inner: CheckpointStore
    _clock: Clock | None
    _vclock: VirtualClock | None  # _clock when it is exactly a VirtualClock
    _rules: list[FaultRule]
    _calls: list[StoreCall | list[Any]]
    _saves: list[str]
    _crash: StoreCall | None

    # ------------------------------------------------------------- machinery

    def _async_ops(self) -> set[str]:
        ops = set(PROTOCOL_OPS)
        for name in dir(self._inner):
            if not name.startswith("_") and inspect.iscoroutinefunction(
                getattr(self._inner, name, None)
            ):
                ops.add(name)
        return ops

    def _set_clock(self, clock: Clock | None) -> None:
        self._clock = clock
        self._vclock = clock if type(clock) is VirtualClock else None

    def _now(self) -> datetime | None:
        clock = self._clock
        return clock.now() if clock is not None and getattr(clock, "virtual", False) else None

    def _when(self) -> Any:
        """A plain-list call's time as :meth:`_call`'s fast path logs it (a virtual clock and
        its reading, turned into a time only when the log is read; else :meth:`_now`)."""
        clock = self._vclock
        return (clock, clock._ns) if clock is not None else self._now()

    def _finish(
        self, index: int, outcome: Outcome, error: BaseException | None = None, **more: Any
    ) -> None:
        # A copy with the outcome filled in (what ``dataclasses.replace`` does, without its
        # per-field work: this runs twice per store call of every test run).
        done = object.__new__(StoreCall)
        fields = dict(as_record(index, self._calls[index]).__dict__)
        fields["outcome"] = outcome
        fields["error"] = None if error is None else repr(error)
        fields.update(more)
        object.__setattr__(done, "__dict__", fields)
        self._calls[index] = done

    def _dead(self, index: int, op: str, summary: str) -> SimulatedCrash:
        """Call ``index`` reached nothing: the store died before it (logged so)."""
        assert self._crash is not None
        dead = dead_error(self._crash, op, summary, subject="store",
                          recover="Recover with a fresh runtime over the inner store "
                                  "(FaultyStore.inner), or call revive()")
        self._finish(index, "dead", dead, injected=True)
        return dead

    def _note_saves(self, op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Remember the checkpoints a successful ``save`` or ``commit`` wrote."""
        if op == "save":
            self._saves.append(args[0].id)
        elif op == "commit":
            self._saves.extend(cp.id for cp in kwargs["checkpoints"])

    async def _call(
        self,
        op: str,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        summary: Summary = None,
        watch: Mapping[str, tuple[tuple[Any, ...], ...]] | None = None,
    ) -> Any:
        if not self._rules and self._crash is None:
            # The fast path (no rule to consult: logged as a plain list, passed on, its
            # outcome noted), written out here: it runs for every store call of every test.
            clock = self._vclock
            when = (clock, clock._ns) if clock is not None else self._now()
            call: list[Any] = [op, args, kwargs, summary, when, "pending", None]
            self._calls.append(call)
            try:
                result = await fn(*args, **kwargs)
            except Exception as exc:
                call[OUTCOME], call[ERROR] = "failed", exc
                raise
            except BaseException as exc:
                call[OUTCOME], call[ERROR] = _pending_outcome(exc), exc
                raise
            if op == "save" or op == "commit":
                self._note_saves(op, args, kwargs)
            if self._crash is not None:  # a rule added meanwhile crashed the store
                index = next(i for i, c in enumerate(self._calls) if c is call)
                raise self._dead(index, op, as_record(index, call).args)
            call[OUTCOME] = "ok"
            return result
        index = len(self._calls)
        text = summary_of(summary, args, kwargs)
        self._calls.append(StoreCall(index, op, text, "pending", time=self._now()))
        if self._crash is not None:
            raise self._dead(index, op, text)
        try:
            wait, decider = tally(rule for rule in list(self._rules)
                                  if self._fires(rule, op, args, kwargs, watch))
            return await self._run(index, op, text, fn, args, kwargs, wait, decider)
        except BaseException as exc:
            if as_record(index, self._calls[index]).outcome == "pending":
                # Cancelled while waiting, or a rule's own ``when`` predicate raised.
                self._finish(index, _pending_outcome(exc), exc)
            raise

    @staticmethod
    def _fires(rule: FaultRule, op: str, args: tuple[Any, ...], kwargs: dict[str, Any],
               watch: Mapping[str, tuple[tuple[Any, ...], ...]] | None) -> bool:
        """Whether ``rule`` counts this call and fires on it."""
        if rule.op == op:
            return rule._count(args, kwargs)
        if watch and rule.op in watch:  # e.g. a save rule watching a commit's checkpoints
            return rule._count((), {}, each=watch[rule.op])
        return False

    async def _run(
        self,
        index: int,
        op: str,
        summary: str,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        wait: float,
        decider: FaultRule | None,
    ) -> Any:
        if wait:
            self._calls[index] = replace(as_record(index, self._calls[index]), delay=wait)
            if self._clock is not None:
                await self._clock.sleep(wait)
            else:
                await anyio.sleep(wait)
            if self._crash is not None:  # another call crashed the store meanwhile
                raise self._dead(index, op, summary)
        fault = None if decider is None else decider.fault
        if fault is not None and fault.kind == "crash" and fault.phase == "before":
            raise self._die(index, decider, op, summary)
        if fault is not None and fault.kind in ("reject", "fail"):
            assert decider is not None
            error = _make_error(decider, op, summary, args)
            self._finish(index, "rejected" if fault.kind == "reject" else "failed", error,
                         injected=True)
            raise error.with_traceback(None)
        try:
            result = await fn(*args, **kwargs)
        except Exception as exc:
            if fault is not None and fault.kind == "crash":
                raise self._die(index, decider, op, summary) from exc
            self._finish(index, "failed", exc)
            raise
        self._note_saves(op, args, kwargs)
        if fault is not None and fault.kind == "crash":
            raise self._die(index, decider, op, summary)
        if self._crash is not None:  # the process died while the inner store worked
            raise self._dead(index, op, summary)
        self._finish(index, "ok")
        return result

    def _die(
        self, index: int, rule: FaultRule | None, op: str, summary: str
    ) -> SimulatedCrash:
        assert rule is not None
        crash = crash_error(rule, op, summary, target="store",
                            recover="Recover with a fresh runtime over the inner store "
                                    "(FaultyStore.inner).")
        self._finish(index, "crashed", crash, injected=True)
        self._crash = as_record(index, self._calls[index])
        return crash
