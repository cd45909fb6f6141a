"""The call machinery of :class:`~._store.FaultyStore`: every call is logged, counted by the
rules of its operation, delayed, rejected, failed or crashed as the first rule that fires
decides, and otherwise passed on to the inner store.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

import anyio

from ..._time._clock import Clock
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

__all__ = ["FaultyCalls", "LoggedCall"]


class LoggedCall:
    """A call logged on the fast path (no rules, store alive): its arguments are summarised
    and its :class:`StoreCall` built only when the log is read (most tests never read it)."""

    __slots__ = ("args", "error", "index", "kwargs", "op", "outcome", "summary", "time")

    def __init__(self, index: int, op: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                 summary: Summary, time: datetime | None) -> None:
        self.index = index
        self.op = op
        self.args = args
        self.kwargs = kwargs
        self.summary = summary
        self.time = time
        self.outcome: Outcome = "pending"
        self.error: BaseException | None = None

    def record(self) -> StoreCall:
        """The :class:`StoreCall` this entry stands for."""
        return StoreCall(self.index, self.op, summary_of(self.summary, self.args, self.kwargs),
                         self.outcome,
                         error=None if self.error is None else repr(self.error),
                         time=self.time)


Summary = str | Callable[[], str] | None
"""A call's argument summary: given, made on demand, or ``None`` (made from the arguments)."""


def summary_of(summary: Summary, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    """The summary text of a call."""
    if summary is None:
        return _summarize(args, kwargs)
    return summary if isinstance(summary, str) else summary()


def as_record(call: StoreCall | LoggedCall) -> StoreCall:
    """The :class:`StoreCall` of a log entry."""
    return call if type(call) is StoreCall else call.record()  # type: ignore[union-attr]


class FaultyCalls:
    """The state of a :class:`~._store.FaultyStore` (rules, call log, saves, crash) and how
    one call goes through the rules (the base of the wrapper)."""

    _inner: CheckpointStore
    _clock: Clock | None
    _rules: list[FaultRule]
    _calls: list[StoreCall | LoggedCall]
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

    def _now(self) -> datetime | None:
        clock = self._clock
        return clock.now() if clock is not None and getattr(clock, "virtual", False) else None

    def _finish(
        self, index: int, outcome: Outcome, error: BaseException | None = None, **more: Any
    ) -> None:
        # A copy with the outcome filled in (what ``dataclasses.replace`` does, without its
        # per-field work: this runs twice per store call of every test run).
        done = object.__new__(StoreCall)
        fields = dict(as_record(self._calls[index]).__dict__)
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
            # The fast path (no rule to consult: logged, passed on, its outcome noted),
            # written out here: it runs for every store call of every test's runs.
            calls = self._calls
            clock = self._clock
            call = LoggedCall(len(calls), op, args, kwargs, summary,
                              clock.now() if clock is not None and getattr(clock, "virtual", False)
                              else None)
            calls.append(call)
            try:
                result = await fn(*args, **kwargs)
            except Exception as exc:
                call.outcome, call.error = "failed", exc
                raise
            except BaseException as exc:
                call.outcome, call.error = _pending_outcome(exc), exc
                raise
            if op == "save" or op == "commit":
                self._note_saves(op, args, kwargs)
            if self._crash is not None:  # a rule added meanwhile crashed the store
                raise self._dead(call.index, op, as_record(call).args)
            call.outcome = "ok"
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
            if as_record(self._calls[index]).outcome == "pending":
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
            self._calls[index] = replace(as_record(self._calls[index]), delay=wait)
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
        self._crash = as_record(self._calls[index])
        return crash
