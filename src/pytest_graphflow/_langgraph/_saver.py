"""``FaultySaver``: FaultyStore's fault rules over a LangGraph checkpoint saver.

The wrapper is a ``BaseCheckpointSaver`` that owns no data: every call goes to the saver it
wraps (``InMemorySaver``, ``SqliteSaver``, any saver with sync methods) unless a rule decides
otherwise. The rules are FaultyStore's own :class:`~pytest_graphflow.Fault` values, so a
``FaultPlan`` or the ``store_faults`` fixture's vocabulary carries over: reject a save by
number or predicate, fail any operation, delay it (virtual time under the harness), crash at
an operation (:class:`~pytest_graphflow.errors.SimulatedCrash`, after which the saver is dead
until a fresh harness opens :attr:`FaultySaver.inner`), and a call log of
:class:`~pytest_graphflow.StoreCall` entries.

Operations are LangGraph's method names: ``put`` (a checkpoint save; FaultyStore's
``"save"`` means the same), ``put_writes``, ``get_tuple`` (also ``"get"``), ``list`` and
``delete_thread`` (also ``"delete"``). The async methods (what LangGraph calls under the
harness) call the inner saver's *sync* methods, so the order of saver calls is decided by the
run, never by a database thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, CheckpointTuple

from .._stores.faults._faults import (
    CrashPhase,
    ErrorSpec,
    Fault,
    FaultRule,
    Outcome,
    StoreCall,
    crash_error,
    dead_error,
    tally,
)
from .._time._clock import Clock
from ..errors import InvalidArgument, SimulatedCrash, StoreFault
from ._ids import ID_SOURCE

__all__ = ["FaultySaver", "SaverOp"]

OPS = ("put", "put_writes", "get_tuple", "list", "delete_thread")
_ALIASES = {"save": "put", "get": "get_tuple", "load": "get_tuple", "latest": "get_tuple",
            "delete": "delete_thread"}


def _canon(op: str) -> str:
    return _ALIASES.get(op, op)


@dataclass(frozen=True)
class SaverOp:
    """What a fault rule's ``when`` predicate is given: one saver call, summarised.

    Attributes:
        op: the operation (``"put"``, ``"put_writes"``, ``"get_tuple"``, ``"list"``,
            ``"delete_thread"``).
        thread_id: the thread of the call's config.
        checkpoint_id: for ``put``, the checkpoint being saved; otherwise the config's.
        step: for ``put``, the checkpoint's step (LangGraph's, ``-1`` for the input).
        source: for ``put``, ``"input"``, ``"loop"``, ``"update"`` or ``"fork"``.
        task_id: for ``put_writes``, the task whose writes are saved.
        channels: for ``put_writes``, the channels written.
        node: for ``put_writes``, the node of the task, when the harness knows it.
        checkpoint_ns: LangGraph's checkpoint namespace of the call: ``""`` for the graph
            itself, ``"<subgraph node>:<task id>"`` (``|``-joined when nested) for a
            subgraph's own checkpoints.
    """

    op: str
    thread_id: str | None = None
    checkpoint_id: str | None = None
    step: int | None = None
    source: str | None = None
    task_id: str | None = None
    channels: tuple[str, ...] = ()
    node: str | None = None
    checkpoint_ns: str = ""

    @property
    def id(self) -> str | None:
        """The checkpoint id (so a ``reject_save(when=lambda cp: ...)`` predicate reads it)."""
        return self.checkpoint_id

    def summary(self) -> str:
        """A short readable form for the call log."""
        parts = [f"thread {self.thread_id}"]
        if self.checkpoint_ns:
            parts.append(f"namespace {self.checkpoint_ns}")
        if self.checkpoint_id:
            parts.append(f"checkpoint {self.checkpoint_id}")
        if self.step is not None:
            parts.append(f"step {self.step}")
        if self.task_id:
            parts.append(f"task {self.node + ' ' if self.node else ''}{self.task_id}")
        if self.channels:
            parts.append("writes " + ",".join(self.channels))
        return ", ".join(parts)


def _configurable(config: Any) -> Mapping[str, Any]:
    return (config or {}).get("configurable") or {}


class FaultySaver(BaseCheckpointSaver[Any]):
    """A LangGraph checkpoint saver that rejects, fails, delays and crashes on command.

    Without rules it is transparent. Rules are matched as in
    :class:`~pytest_graphflow.FaultyStore`: in the order added; every rule of the call's
    operation counts the call; delays add up; the first other rule that fires decides.

    Example:
        >>> saver = FaultySaver(InMemorySaver())
        >>> saver.reject_save(nth=2).delay("get_tuple", 1.5)

    Args:
        inner: the saver to wrap (its sync methods are used).
        clock: the clock ``delay`` waits on outside a harness run and that call times are
            read from; the harness binds its virtual clock.
    """

    def __init__(self, inner: BaseCheckpointSaver[Any], *, clock: Clock | None = None) -> None:
        if not isinstance(inner, BaseCheckpointSaver):
            raise InvalidArgument(
                f"FaultySaver(inner={inner!r}): inner must be a LangGraph BaseCheckpointSaver "
                "(InMemorySaver(), SqliteSaver(conn), ...)"
            )
        serde = inner.serde
        if hasattr(serde, "dumps_typed") and hasattr(serde, "loads_typed"):
            self.serde = serde  # made ready by the inner saver (no protocol check again)
        else:
            super().__init__(serde=serde)
        self._inner = inner
        self._clock = clock
        self._rules: list[FaultRule] = []
        self._calls: list[StoreCall] = []
        self._crash: StoreCall | None = None
        self._raised: list[BaseException] = []
        self.task_nodes: dict[str, str] = {}
        self.listeners: list[Any] = []
        self._linked: Any = None

    # ----------------------------------------------------------------- introspection

    @property
    def inner(self) -> BaseCheckpointSaver[Any]:
        """The wrapped saver (after a crash, a fresh harness over it recovers)."""
        return self._inner

    @property
    def calls(self) -> list[StoreCall]:
        """Every call made to this saver, in order (a copy)."""
        return list(self._calls)

    @property
    def rules(self) -> list[FaultRule]:
        """The rules, in the order added (a copy; linked rules not included)."""
        return list(self._rules)

    @property
    def last_rule(self) -> FaultRule:
        """The rule added last.

        Raises:
            LookupError: when the saver has no rules.
        """
        if not self._rules:
            raise LookupError("this FaultySaver has no rules; add one first")
        return self._rules[-1]

    @property
    def dead(self) -> bool:
        """``True`` after a ``crash_at`` rule fired, until :meth:`revive`."""
        return self._crash is not None

    def raised(self, exc: BaseException) -> bool:
        """Whether ``exc`` (or an exception in its cause/context chain) came from this saver."""
        seen: set[int] = set()
        current: BaseException | None = exc
        while current is not None and id(current) not in seen:
            if any(current is r for r in self._raised):
                return True
            seen.add(id(current))
            current = current.__cause__ or current.__context__
        return False

    def calls_since(self, index: int) -> list[StoreCall]:
        """The calls made from position ``index`` of the log on (what one harness leg made,
        without copying the whole log)."""
        return self._calls[index:]

    @property
    def call_count(self) -> int:
        """How many calls the log holds."""
        return len(self._calls)

    def format_calls(self) -> str:
        """The call log as text, one call per line."""
        return "\n".join(map(str, self._calls)) or "(no saver calls)"

    def link(self, faults: Any) -> FaultySaver:
        """Also apply the rules of ``faults`` (a :class:`~pytest_graphflow.FaultyStore`, such
        as the ``store_faults`` fixture), read at every call: ``save`` rules watch ``put``,
        ``get``/``load``/``latest`` watch ``get_tuple``, ``delete`` watches
        ``delete_thread``, ``list`` watches ``list``. The rule objects are shared, so
        ``faults.last_rule.hits`` counts what fired here.

        Returns:
            This saver, for chaining.
        """
        self._linked = faults
        return self

    def bind_clock(self, clock: Clock) -> None:
        """Use ``clock`` for call times and delays (the harness binds its virtual clock)."""
        self._clock = clock

    def __repr__(self) -> str:
        dead = " dead" if self._crash is not None else ""
        return (f"<FaultySaver over {type(self._inner).__name__}{dead}: "
                f"{len(self._rules)} rule(s), {len(self._calls)} call(s)>")

    # ------------------------------------------------------------------------ rules

    def add_fault(self, fault: Fault) -> FaultySaver:
        """Add a rule described by ``fault`` (its ``op`` is a saver operation or an alias).

        Returns:
            This saver, for chaining.

        Raises:
            InvalidArgument: for an operation the saver does not have.
        """
        if not isinstance(fault, Fault):
            raise InvalidArgument(f"add_fault({fault!r}): expected a Fault")
        if _canon(fault.op) not in OPS:
            raise InvalidArgument(
                f"{fault.describe()}: a checkpoint saver has no operation {fault.op!r}; "
                f"use one of {list(OPS)} (or 'save', 'get', 'delete')"
            )
        self._rules.append(FaultRule(fault))
        return self

    def reject_save(self, nth: int | None = None, *, every: int | None = None,
                    when: Callable[[SaverOp], bool] | None = None, error: ErrorSpec = None,
                    times: int | None = None) -> FaultySaver:
        """Make ``put`` raise, saving nothing, on the nth (or every ``every``-th, or each
        ``when``-matching) checkpoint save; see :meth:`FaultyStore.reject_save`.

        Returns:
            This saver, for chaining.
        """
        check: Any = when  # called with a SaverOp (it has the checkpoint's ``id``)
        return self.add_fault(
            Fault.reject_save(nth, every=every, when=check, error=error, times=times))

    def fail(self, op: str, nth: int | None = None, *, every: int | None = None,
             when: Callable[[SaverOp], bool] | None = None, error: ErrorSpec = None,
             times: int | None = None) -> FaultySaver:
        """Make ``op`` raise without reaching the inner saver on chosen calls.

        Returns:
            This saver, for chaining.
        """
        return self.add_fault(Fault.fail(op, nth, every=every, when=when, error=error,
                                         times=times))

    def delay(self, op: str, seconds: float, *, nth: int | None = None,
              every: int | None = None, when: Callable[[SaverOp], bool] | None = None,
              times: int | None = None) -> FaultySaver:
        """Make calls of ``op`` wait ``seconds`` first (virtual time under the harness).

        Returns:
            This saver, for chaining.
        """
        return self.add_fault(Fault.delay(op, seconds, nth=nth, every=every, when=when,
                                          times=times))

    def crash_at(self, op: str = "put", nth: int | None = 1, *,
                 when: Callable[[SaverOp], bool] | None = None,
                 phase: CrashPhase = "before") -> FaultySaver:
        """Simulate a process death at the ``nth`` call of ``op``: the call raises
        :class:`~pytest_graphflow.errors.SimulatedCrash` (``phase="before"``: it never reaches
        the inner saver; ``"after"``: it does, and the caller never learns), and every later
        call raises it too, reaching nothing.

        Returns:
            This saver, for chaining.
        """
        return self.add_fault(Fault.crash_at(op, nth, when=when, phase=phase))

    def clear_rules(self) -> FaultySaver:
        """Remove every rule (the log and a crash are kept).

        Returns:
            This saver, for chaining.
        """
        self._rules.clear()
        return self

    def revive(self) -> FaultySaver:
        """Bring a crashed saver back to life.

        Returns:
            This saver, for chaining.
        """
        self._crash = None
        return self

    # ------------------------------------------------------------- machinery

    def _decide(self, info: SaverOp) -> tuple[int, float, FaultRule | None]:
        index = len(self._calls)
        now = None if self._clock is None or not self._clock.virtual else self._clock.now()
        self._calls.append(_call(index, info.op, info.summary(), "pending", None, now, 0.0,
                                 False))
        if self._crash is not None:
            dead = dead_error(self._crash, info.op, info.summary(), subject="checkpoint saver",
                              recover="Recover with a fresh harness over FaultySaver.inner")
            self._finish(index, "dead", dead, injected=True)
            raise dead
        linked = () if self._linked is None else self._linked.rules
        if not self._rules and not linked:
            return index, 0.0, None  # no rule to count the call or decide it
        wait, decider = tally(rule for rule in [*self._rules, *linked]
                              if _canon(rule.op) == info.op and rule._count((info,), {}))
        if wait:
            self._calls[index] = replace(self._calls[index], delay=wait)
        return index, wait, decider

    def _finish(self, index: int, outcome: Outcome, error: BaseException | None = None,
                injected: bool = False) -> None:
        call = self._calls[index]
        self._calls[index] = _call(call.index, call.op, call.args, outcome,
                                   None if error is None else repr(error), call.time,
                                   call.delay, injected)
        if error is not None:
            self._raised.append(error)

    def _before(self, index: int, info: SaverOp, decider: FaultRule | None) -> None:
        fault = None if decider is None else decider.fault
        if fault is None:
            return
        if fault.kind == "crash" and fault.phase == "before":
            raise self._die(index, decider, info)
        if fault.kind in ("reject", "fail"):
            assert decider is not None
            error = _error(decider, info)
            self._finish(index, "rejected" if fault.kind == "reject" else "failed", error,
                         injected=True)
            raise error

    def _after(self, index: int, info: SaverOp, decider: FaultRule | None) -> None:
        if decider is not None and decider.fault.kind == "crash":
            raise self._die(index, decider, info)
        self._finish(index, "ok")

    def _die(self, index: int, rule: FaultRule | None, info: SaverOp) -> SimulatedCrash:
        assert rule is not None
        crash = crash_error(rule, info.op, info.summary(), target="saver",
                            recover="Recover with a fresh harness over FaultySaver.inner.")
        self._finish(index, "crashed", crash, injected=True)
        self._crash = self._calls[index]
        return crash

    def _sync(self, info: SaverOp, fn: Callable[[], Any], payload: Any = None) -> Any:
        index, wait, decider = self._decide(info)
        if wait:
            if self._clock is not None and self._clock.virtual:
                self._clock.advance(wait)  # type: ignore[attr-defined]
            else:
                time.sleep(wait)
        return self._run(index, info, decider, fn, payload)

    async def _async(self, info: SaverOp, fn: Callable[[], Any], payload: Any = None) -> Any:
        index, wait, decider = self._decide(info)
        if wait:
            if ID_SOURCE.get() is None and self._clock is not None and self._clock.virtual:
                await self._clock.sleep(wait)
            else:  # on the harness's virtual loop this sleep is virtual
                await asyncio.sleep(wait)
        return self._run(index, info, decider, fn, payload)

    def _run(self, index: int, info: SaverOp, decider: FaultRule | None,
             fn: Callable[[], Any], payload: Any = None) -> Any:
        try:
            self._before(index, info, decider)
            try:
                result = fn()
            except Exception as exc:
                if decider is not None and decider.fault.kind == "crash":
                    raise self._die(index, decider, info) from exc
                self._finish(index, "failed", exc)
                raise
            self._after(index, info, decider)
        except BaseException as exc:
            if self._calls[index].outcome == "pending":
                self._finish(index, "failed", exc)
            raise
        for listener in self.listeners:
            listener(info, result if payload is None else payload)
        return result

    # ---------------------------------------------------------- the saver protocol

    def _put_info(self, config: Any, checkpoint: Any, metadata: Any) -> SaverOp:
        conf = _configurable(config)
        return SaverOp("put", conf.get("thread_id"), checkpoint.get("id"),
                       (metadata or {}).get("step"), (metadata or {}).get("source"),
                       checkpoint_ns=str(conf.get("checkpoint_ns") or ""))

    def _writes_info(self, config: Any, writes: Sequence[tuple[str, Any]],
                     task_id: str) -> SaverOp:
        conf = _configurable(config)
        return SaverOp("put_writes", conf.get("thread_id"), conf.get("checkpoint_id"),
                       task_id=task_id, channels=tuple([c for c, _ in writes]),
                       node=self.task_nodes.get(task_id),
                       checkpoint_ns=str(conf.get("checkpoint_ns") or ""))

    def _config_info(self, op: str, config: Any) -> SaverOp:
        conf = _configurable(config)
        return SaverOp(op, conf.get("thread_id"), conf.get("checkpoint_id"),
                       checkpoint_ns=str(conf.get("checkpoint_ns") or ""))

    def get_tuple(self, config: Any) -> CheckpointTuple | None:
        """``get_tuple`` through the rules."""
        return self._sync(self._config_info("get_tuple", config),  # type: ignore[no-any-return]
                          lambda: self._inner.get_tuple(config))

    async def aget_tuple(self, config: Any) -> CheckpointTuple | None:
        """``aget_tuple`` through the rules (calls the inner saver's ``get_tuple``)."""
        return await self._async(  # type: ignore[no-any-return]
            self._config_info("get_tuple", config), lambda: self._inner.get_tuple(config))

    def list(self, config: Any, *, filter: dict[str, Any] | None = None,
             before: Any = None, limit: int | None = None) -> Iterator[CheckpointTuple]:
        """``list`` through the rules (the listing is read at once)."""
        items = self._sync(self._config_info("list", config), lambda: list(
            self._inner.list(config, filter=filter, before=before, limit=limit)))
        return iter(items)

    async def alist(self, config: Any, *, filter: dict[str, Any] | None = None,
                    before: Any = None, limit: int | None = None
                    ) -> AsyncIterator[CheckpointTuple]:
        """``alist`` through the rules."""
        items = await self._async(self._config_info("list", config), lambda: list(
            self._inner.list(config, filter=filter, before=before, limit=limit)))
        for item in items:
            yield item

    def put(self, config: Any, checkpoint: Any, metadata: Any,
            new_versions: ChannelVersions) -> Any:
        """``put`` (a checkpoint save) through the rules."""
        return self._sync(self._put_info(config, checkpoint, metadata),
                          lambda: self._inner.put(config, checkpoint, metadata, new_versions))

    async def aput(self, config: Any, checkpoint: Any, metadata: Any,
                   new_versions: ChannelVersions) -> Any:
        """``aput`` through the rules (calls the inner saver's ``put``)."""
        return await self._async(
            self._put_info(config, checkpoint, metadata),
            lambda: self._inner.put(config, checkpoint, metadata, new_versions))

    def put_writes(self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        """``put_writes`` through the rules."""
        self._sync(self._writes_info(config, writes, task_id),
                   lambda: self._inner.put_writes(config, writes, task_id, task_path), writes)

    async def aput_writes(self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        """``aput_writes`` through the rules (calls the inner saver's ``put_writes``)."""
        await self._async(self._writes_info(config, writes, task_id),
                          lambda: self._inner.put_writes(config, writes, task_id, task_path),
                          writes)

    def delete_thread(self, thread_id: str) -> None:
        """``delete_thread`` through the rules."""
        self._sync(SaverOp("delete_thread", thread_id),
                   lambda: self._inner.delete_thread(thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        """``adelete_thread`` through the rules."""
        await self._async(SaverOp("delete_thread", thread_id),
                          lambda: self._inner.delete_thread(thread_id))

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The inner saver's next channel version; under the harness its random part (if
        any, as ``InMemorySaver`` adds) comes from the seed."""
        version = self._inner.get_next_version(current, channel)
        source = ID_SOURCE.get()
        if source is not None and isinstance(version, str) and "." in version:
            head = version.split(".", 1)[0]
            version = f"{head}.{source.versions.random():016}"
        return version


_new = object.__new__


def _call(index: int, op: str, args: str, outcome: Outcome, error: str | None,
          time: Any, delay: float, injected: bool) -> StoreCall:
    """A :class:`StoreCall` of trusted values, without the frozen dataclass's ``__init__``
    (a ``setattr`` a field; two calls a saver call, on every harness step)."""
    call: StoreCall = _new(StoreCall)
    call.__dict__.update(index=index, op=op, args=args, outcome=outcome, error=error,
                         time=time, delay=delay, injected=injected)
    return call


def _check_call() -> None:
    """The fields :func:`_call` fills are exactly :class:`StoreCall`'s (checked once)."""
    expected = [f.name for f in dataclasses.fields(StoreCall)]
    made = list(_call(0, "put", "", "ok", None, None, 0.0, False).__dict__)
    if made != expected or getattr(StoreCall, "__slots__", None):  # pragma: no cover
        raise ImportError(f"StoreCall's fields changed ({expected}); update _saver._call")


_check_call()


def _error(rule: FaultRule, info: SaverOp) -> BaseException:
    fault = rule.fault
    if isinstance(fault.error, BaseException):
        return fault.error
    verb = "rejected" if fault.kind == "reject" else "failed"
    message = f"injected: {info.op} #{rule.seen} ({info.summary()}) {verb}"
    if fault.error is None:
        return StoreFault(message)
    try:
        return fault.error(message)
    except TypeError:
        return fault.error()
