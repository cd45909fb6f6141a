"""Checking a runtime's arguments and a run's options, at once (SPEC §2).

The constructor's arguments, the run options every API takes (``max_supersteps``, ``timeout``,
``on_interrupt``, ``tenant_id``, breakpoints), the graph passed and a run's input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from pydantic import BaseModel

from .._assert._patterns import EventPatternError, event_test
from .._graph._builder import CompiledGraph, node_names
from .._records._checks import check_optional_id
from .._records._json import NotJSONError, to_json_value
from .._time._clock import RealClock, VirtualClock
from ..errors import InvalidArgument, UnknownKey, UpdateRejected

if TYPE_CHECKING:
    from .._records._events import EventBase, Interrupt
    from ._host import RunDefaults

__all__ = [
    "RunOptions",
    "breakpoints",
    "check_budget",
    "check_cancel_after",
    "check_cancel_at",
    "check_constructor",
    "check_graph",
    "run_options",
    "state_from_input",
]


class RunOptions(TypedDict, total=False):
    """The run options every run method of :class:`GraphRuntime` takes as keywords
    (``runtime.invoke(graph, input, timeout=30)``), typed for mypy and editors:
    ``**options: Unpack[RunOptions]``. An option left out takes the runtime's value.

    Attributes:
        max_supersteps: the superstep budget of this run (leg); ``SuperstepLimit`` beyond it;
            ``None`` for no budget.
        timeout: seconds, on the runtime's clock, this run (leg) may take; ``RunTimedOut``.
        on_interrupt: a hook answering interrupts at once (return ``PAUSE`` to pause).
        tenant_id: the tenant the run belongs to; a thread belongs to one tenant.
        interrupt_before: node name(s) to pause before, for this run (breakpoints).
        interrupt_after: node name(s) to pause after, for this run (breakpoints).
        cancel_after: seconds, on the runtime's clock, into this run (leg) at which it is
            cancelled, as ``RunHandle.cancel()`` would (status ``cancelled``, resumable).
        cancel_at: an event (one item of :func:`~pytest_graphflow.assert_events`'s pattern
            language: ``"node_end:search"``, ``"* seq=7"``, a dict of field matchers, an
            event, or a predicate on the event) at which this run (leg) is cancelled: the
            leg's first event that matches it is delivered, then the leg is cancelled as
            ``RunHandle.cancel()`` would cancel it there (status ``cancelled``, resumable).
    """

    max_supersteps: int | None
    timeout: float | None
    on_interrupt: Callable[[Interrupt], Any] | None
    tenant_id: str | None
    interrupt_before: str | Iterable[str]
    interrupt_after: str | Iterable[str]
    cancel_after: float | None
    cancel_at: str | Mapping[str, Any] | EventBase | Callable[[Any], object] | None


def check_graph(graph: Any) -> None:
    if not isinstance(graph, CompiledGraph):
        hint = " (call .compile() first)" if hasattr(graph, "compile") else ""
        raise InvalidArgument(f"expected a CompiledGraph, got {graph!r}{hint}")


_NO_NODES: frozenset[str] = frozenset()


def run_options(runtime: RunDefaults, options: Mapping[str, Any]) -> dict[str, Any]:
    if not options:  # every option the runtime's own (the usual call)
        max_supersteps, timeout = runtime.max_supersteps, runtime.timeout
        on_interrupt = runtime.on_interrupt
        if timeout is not None or type(max_supersteps) is not int or max_supersteps < 1:
            check_budget(max_supersteps, timeout)
        if on_interrupt is not None and not callable(on_interrupt):
            raise InvalidArgument(f"on_interrupt={on_interrupt!r} must be callable")
        return {"max_supersteps": max_supersteps, "timeout": timeout,
                "on_interrupt": on_interrupt, "tenant_id": runtime.tenant_id,
                "cancel_after": None, "cancel_at": None, "interrupt_before": _NO_NODES,
                "interrupt_after": _NO_NODES, "record_events": True, "recover": None}
    allowed = RunOptions.__optional_keys__
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise InvalidArgument(f"unknown run option(s) {unknown}; run options are "
                              f"{sorted(allowed)}")
    if "tenant_id" in options:
        check_optional_id(options["tenant_id"], "tenant_id", "run option")
    opts = {
        "max_supersteps": options.get("max_supersteps", runtime.max_supersteps),
        "timeout": options.get("timeout", runtime.timeout),
        "on_interrupt": options.get("on_interrupt", runtime.on_interrupt),
        "tenant_id": options.get("tenant_id", runtime.tenant_id),
        "cancel_after": check_cancel_after(options.get("cancel_after")),
        "cancel_at": check_cancel_at(options.get("cancel_at")),
        "record_events": True, "recover": None,
    }
    for name in ("interrupt_before", "interrupt_after"):
        opts[name] = frozenset(node_names(options.get(name, ()), name))
    check_budget(opts["max_supersteps"], opts["timeout"])
    if opts["on_interrupt"] is not None and not callable(opts["on_interrupt"]):
        raise InvalidArgument(f"on_interrupt={opts['on_interrupt']!r} must be callable")
    return opts


def state_from_input(
    graph: CompiledGraph, input: Mapping[str, Any] | BaseModel | None
) -> dict[str, Any]:
    if input is None or (type(input) is dict and not input):
        return {}
    if type(input) is dict:
        data: dict[str, Any] = dict(input)
    elif isinstance(input, BaseModel):
        data = input.model_dump(mode="json")  # sets put in order below
    elif isinstance(input, Mapping):
        data = dict(input)
    else:
        raise InvalidArgument(f"input={input!r}: pass a dict, a {graph.state_model.__name__} "
                              "or None")
    for key in data:
        if key not in graph.keys:
            raise UnknownKey("<input>", key, sorted(graph.keys))
    try:
        converted = graph.codec.converted
        codec = graph.codec
        return {k: codec.canonical(k, to_json_value(v, exact=k not in converted))
                for k, v in data.items()}
    except NotJSONError as exc:
        raise UpdateRejected("<input>", "<input>", f"input values must be JSON: {exc}") \
            from None


def breakpoints(
    graph: CompiledGraph, opts: dict[str, Any]
) -> tuple[frozenset[str], frozenset[str]]:
    """A run's own breakpoints (before, after), checked against ``graph``."""
    out: list[frozenset[str]] = []
    for name in ("interrupt_before", "interrupt_after"):
        nodes: frozenset[str] = opts.get(name, _NO_NODES)
        if not nodes:
            out.append(_NO_NODES)
            continue
        unknown = sorted(nodes - set(graph.nodes))
        if unknown:
            raise InvalidArgument(f"{name}={sorted(nodes)}: graph {graph.graph_id!r} has no "
                                  f"node {unknown[0]!r}; its nodes are {list(graph.nodes)}")
        out.append(nodes)
    return out[0], out[1]


def check_constructor(
    clock: Any, on_interrupt: Any, tenant_id: Any, claim_ttl: Any, backend: Any, on_leg: Any
) -> None:
    """The constructor's arguments, checked at once (not at the first run)."""
    where = "GraphRuntime"
    if clock is not None and not isinstance(clock, (RealClock, VirtualClock)) and not (
        callable(getattr(clock, "now", None)) and callable(getattr(clock, "sleep", None))
    ):
        raise InvalidArgument(f"{where}(clock={clock!r:.80}): pass a RealClock(), a "
                              "VirtualClock() or None")
    if on_interrupt is not None and not callable(on_interrupt):
        raise InvalidArgument(f"{where}(on_interrupt={on_interrupt!r:.80}): pass a callable or "
                              "None")
    if on_leg is not None and not callable(on_leg):
        raise InvalidArgument(f"{where}(on_leg={on_leg!r:.80}): pass a callable or None")
    check_optional_id(tenant_id, "tenant_id", where)
    if claim_ttl is not None and (
            isinstance(claim_ttl, bool) or not isinstance(claim_ttl, (int, float))
            or not 0 < claim_ttl < float("inf")):
        raise InvalidArgument(f"{where}(claim_ttl={claim_ttl!r:.80}): claim_ttl must be a "
                              "positive number of seconds, or None for the store's")
    if backend not in ("asyncio", "trio"):
        raise InvalidArgument(f"{where}(backend={backend!r:.80}): backend is 'asyncio' or "
                              "'trio'")


def check_cancel_after(seconds: Any) -> float | None:
    """``cancel_after=``: seconds (of the runtime's clock) after the leg starts at which the
    leg is cancelled, as ``RunHandle.cancel()`` would (status ``cancelled``, resumable)."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or not 0 <= seconds < float("inf"):
        raise InvalidArgument(f"cancel_after={seconds!r} must be a number of seconds >= 0 "
                              "or None")
    return float(seconds)


def check_cancel_at(item: Any) -> Callable[[EventBase], bool] | None:
    """``cancel_at=``: the event at which the leg is cancelled, as one item of
    :func:`~pytest_graphflow.assert_events`'s pattern language; returns its test (``None``:
    no cancel).

    Raises:
        InvalidArgument: an item that is malformed, or matches no one event (a gap, a group).
    """
    if item is None:
        return None
    try:
        return event_test(item)
    except EventPatternError as exc:
        raise InvalidArgument(
            f"cancel_at={item!r:.80}: {exc.problem}; pass one "
            "event as an assert_events pattern item: 'node_end:NODE', 'TYPE:NODE field=value', "
            "'* seq=N', a dict of field matchers, an event, or a predicate on the event"
        ) from None


def check_budget(max_supersteps: Any, timeout: Any) -> None:
    if max_supersteps is not None and (not isinstance(max_supersteps, int)
                                       or isinstance(max_supersteps, bool) or max_supersteps < 1):
        raise InvalidArgument(f"max_supersteps={max_supersteps!r} must be an int >= 1 or None")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout > 0):
        raise InvalidArgument(f"timeout={timeout!r} must be a number of seconds > 0 or None "
                              "(float('inf') means no limit)")
