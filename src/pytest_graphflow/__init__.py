"""pytest-graphflow: a deterministic graph runtime and pytest plugin for stateful graphs.

Build a graph with :class:`Graph`, run it with :class:`GraphRuntime` (a real clock for
production, a :class:`VirtualClock` and a seed for tests), and test it with the pytest plugin's
``graph_runtime`` fixture, :func:`assert_events` and the Hypothesis strategies in
:mod:`pytest_graphflow.strategies`.
"""

from __future__ import annotations

import sys as _sys
from typing import TYPE_CHECKING, Any

from . import errors

if TYPE_CHECKING:
    from ._assert._snapshot import GraphEventsExtension
    from ._engine._results import EventLog, GraphResult, RunLeg, RunRecord, Trace
    from ._engine._runtime import GraphRuntime
    from ._engine._stream import RunHandle, RunStream
    from ._engine._upgrade import Incompatibility
    from ._graph._builder import END, START, Command, CompiledGraph, Expand, Graph, Reducer, Retry
    from ._graph._deadlines import TimeoutAnswer
    from ._graph._effects import record_effect
    from ._graph._middleware import Allow, Block, Guardrail, Middleware, Rewrite
    from ._graph._node import PAUSE, EdgeContext, NodeContext, Resume, emit, interrupt
    from ._graph._subgraph import Subgraph
    from ._graph._tools import Fatal, Tool, ToolCall, ToolResult, tool
    from ._html._page import render_run_html
    from ._properties._progress import Progress
    from ._properties.runs._explore import ExploreReport, explore
    from ._records._checkpoint import FORMAT_VERSION, Checkpoint, TaskOutput, TaskRecord
    from ._records._events import (
        Breakpoint,
        CheckpointSaved,
        CustomEvent,
        EdgeTransition,
        ErrorEvent,
        EventBase,
        FinalEventData,
        GraphEvent,
        Interrupt,
        InterruptEvent,
        InterruptEventData,
        InterruptExpired,
        NodeEnd,
        NodeStart,
        RunEnd,
        RunStart,
        StreamEvent,
        ToolCallEvent,
        parse_event,
    )
    from ._replay._export import export_history
    from ._replay._history import HISTORY_FORMAT_VERSION, History, load_history
    from ._replay._replayer import aassert_replays, assert_replays
    from ._replay._upgrade import UpgradeReport, check_upgrade
    from ._stores._deletion import DeletedThread
    from ._stores._features import StoreFeatures, features_of
    from ._stores._memory import InMemoryCheckpointStore
    from ._stores._plan import FaultPlan
    from ._stores._protocol import CheckpointStore
    from ._stores._waiting import Waiting
    from ._stores.faults._store import FaultyStore, StoreCall
    from ._stores.postgres._store import PostgresCheckpointStore
    from ._stores.sqlite._store import SQLiteCheckpointStore
    from ._time._clock import DEFAULT_START, Clock, RealClock, VirtualClock
    from ._time._vloop import virtual_anyio_backend
    from ._workers._worker import Worker, WorkerStats
    from .assertions import (
        EventPatternError,
        EventPatternMismatch,
        assert_events,
        events_diff,
        format_event,
        format_events,
    )
    from .errors import (
        BlockingSleepWarning,
        Cancelled,
        CheckpointNotFound,
        ConflictingWrites,
        DeadlineExpired,
        EventsCompacted,
        ExecutionMismatch,
        ForkTargetExists,
        GraphExecutionError,
        GraphflowError,
        GraphValidationError,
        GuardrailBlocked,
        InvalidArgument,
        InvalidHistory,
        JoinStarved,
        MalformedCommit,
        MiddlewareFailed,
        MidExecution,
        MissingExtra,
        NodeFailed,
        NothingToRecover,
        NotSuspended,
        ParentNotLatest,
        ReplayDiverged,
        ResumeError,
        RunTimedOut,
        SimulatedCrash,
        SnapshotMismatch,
        StaleClaim,
        StoreFault,
        StoreFileError,
        SuperstepLimit,
        SyncCallInEventLoop,
        TenantMismatch,
        ThreadBusy,
        ThreadSuspended,
        ToolFailed,
        UndeclaredWrite,
        UnexpectedError,
        UnknownKey,
        UnknownRoute,
        UnsupportedFormat,
        UpdateRejected,
        VirtualDeadlock,
    )

# Every public name is imported on first use (PEP 562): importing the package, which pytest's
# entry point and Hypothesis's entry point do in every session of a process where it is merely
# installed, costs almost nothing and patches nothing. ``assertions`` must anyway be imported
# after pytest registers it for assertion rewriting. ``__dir__`` lists the lazy names without
# importing them. A tool that walks every module's ``dir()`` and reads each attribute
# (freezegun's start does) would import the whole package halfway through its own patching, so
# a read from freezegun's module walk is refused (an ``AttributeError``, which it skips).
_LAZY = {
    "EventLog": "._engine._results",
    "GraphResult": "._engine._results",
    "RunLeg": "._engine._results",
    "RunRecord": "._engine._results",
    "Trace": "._engine._results",
    "GraphRuntime": "._engine._runtime",
    "RunHandle": "._engine._stream",
    "RunStream": "._engine._stream",
    "Incompatibility": "._engine._upgrade",
    "END": "._graph._builder",
    "START": "._graph._builder",
    "Command": "._graph._builder",
    "CompiledGraph": "._graph._builder",
    "Expand": "._graph._builder",
    "Graph": "._graph._builder",
    "Reducer": "._graph._builder",
    "Retry": "._graph._builder",
    "PAUSE": "._graph._node",
    "EdgeContext": "._graph._node",
    "NodeContext": "._graph._node",
    "Resume": "._graph._node",
    "TimeoutAnswer": "._graph._deadlines",
    "emit": "._graph._node",
    "Fatal": "._graph._tools",
    "Tool": "._graph._tools",
    "ToolCall": "._graph._tools",
    "ToolResult": "._graph._tools",
    "tool": "._graph._tools",
    "interrupt": "._graph._node",
    "record_effect": "._graph._effects",
    "Allow": "._graph._middleware",
    "Block": "._graph._middleware",
    "Guardrail": "._graph._middleware",
    "Middleware": "._graph._middleware",
    "Rewrite": "._graph._middleware",
    "Subgraph": "._graph._subgraph",
    "Breakpoint": "._records._events",
    "ExploreReport": "._properties.runs._explore",
    "explore": "._properties.runs._explore",
    "Progress": "._properties._progress",
    "FORMAT_VERSION": "._records._checkpoint",
    "Checkpoint": "._records._checkpoint",
    "TaskOutput": "._records._checkpoint",
    "TaskRecord": "._records._checkpoint",
    "CheckpointSaved": "._records._events",
    "CustomEvent": "._records._events",
    "EdgeTransition": "._records._events",
    "ErrorEvent": "._records._events",
    "EventBase": "._records._events",
    "FinalEventData": "._records._events",
    "GraphEvent": "._records._events",
    "Interrupt": "._records._events",
    "InterruptEvent": "._records._events",
    "InterruptEventData": "._records._events",
    "InterruptExpired": "._records._events",
    "NodeEnd": "._records._events",
    "NodeStart": "._records._events",
    "RunEnd": "._records._events",
    "RunStart": "._records._events",
    "StreamEvent": "._records._events",
    "ToolCallEvent": "._records._events",
    "parse_event": "._records._events",
    "export_history": "._replay._export",
    "render_run_html": "._html._page",
    "HISTORY_FORMAT_VERSION": "._replay._history",
    "History": "._replay._history",
    "load_history": "._replay._history",
    "aassert_replays": "._replay._replayer",
    "assert_replays": "._replay._replayer",
    "UpgradeReport": "._replay._upgrade",
    "check_upgrade": "._replay._upgrade",
    "DeletedThread": "._stores._deletion",
    "StoreFeatures": "._stores._features",
    "features_of": "._stores._features",
    "Waiting": "._stores._waiting",
    "FaultyStore": "._stores.faults._store",
    "StoreCall": "._stores.faults._store",
    "InMemoryCheckpointStore": "._stores._memory",
    "FaultPlan": "._stores._plan",
    "CheckpointStore": "._stores._protocol",
    "SQLiteCheckpointStore": "._stores.sqlite._store",
    "PostgresCheckpointStore": "._stores.postgres._store",  # needs the `postgres` extra (psycopg)
    "Worker": "._workers._worker",
    "WorkerStats": "._workers._worker",
    "DEFAULT_START": "._time._clock",
    "Clock": "._time._clock",
    "RealClock": "._time._clock",
    "VirtualClock": "._time._clock",
    "virtual_anyio_backend": "._time._vloop",
    "BlockingSleepWarning": ".errors",
    "Cancelled": ".errors",
    "CheckpointNotFound": ".errors",
    "ConflictingWrites": ".errors",
    "EventsCompacted": ".errors",
    "ExecutionMismatch": ".errors",
    "ForkTargetExists": ".errors",
    "GraphExecutionError": ".errors",
    "GraphflowError": ".errors",
    "GraphValidationError": ".errors",
    "GuardrailBlocked": ".errors",
    "InvalidArgument": ".errors",
    "InvalidHistory": ".errors",
    "JoinStarved": ".errors",
    "MalformedCommit": ".errors",
    "MiddlewareFailed": ".errors",
    "DeadlineExpired": ".errors",
    "MidExecution": ".errors",
    "MissingExtra": ".errors",
    "NodeFailed": ".errors",
    "NothingToRecover": ".errors",
    "ParentNotLatest": ".errors",
    "NotSuspended": ".errors",
    "ReplayDiverged": ".errors",
    "ResumeError": ".errors",
    "RunTimedOut": ".errors",
    "SimulatedCrash": ".errors",
    "SnapshotMismatch": ".errors",
    "StaleClaim": ".errors",
    "StoreFault": ".errors",
    "StoreFileError": ".errors",
    "SuperstepLimit": ".errors",
    "SyncCallInEventLoop": ".errors",
    "TenantMismatch": ".errors",
    "ThreadBusy": ".errors",
    "ThreadSuspended": ".errors",
    "ToolFailed": ".errors",
    "UndeclaredWrite": ".errors",
    "UnexpectedError": ".errors",
    "UnknownKey": ".errors",
    "UnknownRoute": ".errors",
    "UnsupportedFormat": ".errors",
    "UpdateRejected": ".errors",
    "VirtualDeadlock": ".errors",
    "GraphEventsExtension": "._assert._snapshot",
    "EventPatternError": ".assertions",
    "EventPatternMismatch": ".assertions",
    "assert_events": ".assertions",
    "events_diff": ".assertions",
    "format_event": ".assertions",
    "format_events": ".assertions",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None or _sys._getframe(1).f_globals.get("__name__") == "freezegun.api":
        raise AttributeError(f"module 'pytest_graphflow' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value



def __dir__() -> list[str]:
    """The public names (``__all__``), imported or not: listing them imports nothing."""
    return sorted(__all__)


__version__ = "0.1.0"

__all__ = [
    "DEFAULT_START",
    "END",
    "FORMAT_VERSION",
    "HISTORY_FORMAT_VERSION",
    "PAUSE",
    "START",
    "Allow",
    "Block",
    "BlockingSleepWarning",
    "Breakpoint",
    "Cancelled",
    "Checkpoint",
    "CheckpointNotFound",
    "CheckpointSaved",
    "CheckpointStore",
    "Clock",
    "Command",
    "CompiledGraph",
    "ConflictingWrites",
    "CustomEvent",
    "DeadlineExpired",
    "DeletedThread",
    "EdgeContext",
    "EdgeTransition",
    "ErrorEvent",
    "EventBase",
    "EventLog",
    "EventPatternError",
    "EventPatternMismatch",
    "EventsCompacted",
    "ExecutionMismatch",
    "Expand",
    "ExploreReport",
    "Fatal",
    "FaultPlan",
    "FaultyStore",
    "FinalEventData",
    "ForkTargetExists",
    "Graph",
    "GraphEvent",
    "GraphEventsExtension",
    "GraphExecutionError",
    "GraphResult",
    "GraphRuntime",
    "GraphValidationError",
    "GraphflowError",
    "Guardrail",
    "GuardrailBlocked",
    "History",
    "InMemoryCheckpointStore",
    "Incompatibility",
    "Interrupt",
    "InterruptEvent",
    "InterruptEventData",
    "InterruptExpired",
    "InvalidArgument",
    "InvalidHistory",
    "JoinStarved",
    "MalformedCommit",
    "MidExecution",
    "Middleware",
    "MiddlewareFailed",
    "MissingExtra",
    "NodeContext",
    "NodeEnd",
    "NodeFailed",
    "NodeStart",
    "NotSuspended",
    "NothingToRecover",
    "ParentNotLatest",
    "PostgresCheckpointStore",
    "Progress",
    "RealClock",
    "Reducer",
    "ReplayDiverged",
    "Resume",
    "ResumeError",
    "Retry",
    "Rewrite",
    "RunEnd",
    "RunHandle",
    "RunLeg",
    "RunRecord",
    "RunStart",
    "RunStream",
    "RunTimedOut",
    "SQLiteCheckpointStore",
    "SimulatedCrash",
    "SnapshotMismatch",
    "StaleClaim",
    "StoreCall",
    "StoreFault",
    "StoreFeatures",
    "StoreFileError",
    "StreamEvent",
    "Subgraph",
    "SuperstepLimit",
    "SyncCallInEventLoop",
    "TaskOutput",
    "TaskRecord",
    "TenantMismatch",
    "ThreadBusy",
    "ThreadSuspended",
    "TimeoutAnswer",
    "Tool",
    "ToolCall",
    "ToolCallEvent",
    "ToolFailed",
    "ToolResult",
    "Trace",
    "UndeclaredWrite",
    "UnexpectedError",
    "UnknownKey",
    "UnknownRoute",
    "UnsupportedFormat",
    "UpdateRejected",
    "UpgradeReport",
    "VirtualClock",
    "VirtualDeadlock",
    "Waiting",
    "Worker",
    "WorkerStats",
    "__version__",
    "aassert_replays",
    "assert_events",
    "assert_replays",
    "check_upgrade",
    "emit",
    "errors",
    "events_diff",
    "explore",
    "export_history",
    "features_of",
    "format_event",
    "format_events",
    "interrupt",
    "load_history",
    "parse_event",
    "record_effect",
    "render_run_html",
    "tool",
    "virtual_anyio_backend",
]
