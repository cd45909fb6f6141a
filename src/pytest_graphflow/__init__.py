"""pytest-graphflow: a deterministic graph runtime and pytest plugin for stateful graphs.

Build a graph with :class:`Graph`, run it with :class:`GraphRuntime` (a real clock for
production, a :class:`VirtualClock` and a seed for tests), and test it with the pytest plugin's
``graph_runtime`` fixture, :func:`assert_events` and the Hypothesis strategies in
:mod:`pytest_graphflow.strategies`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import errors
from ._engine._results import EventLog, GraphResult, RunLeg, RunRecord, Trace
from ._engine._runtime import GraphRuntime
from ._engine._stream import RunHandle, RunStream
from ._engine._upgrade import Incompatibility
from ._graph._builder import END, START, Command, CompiledGraph, Expand, Graph, Reducer, Retry
from ._graph._node import PAUSE, EdgeContext, NodeContext, Resume, emit, interrupt
from ._properties._explore import ExploreReport, explore
from ._records._checkpoint import FORMAT_VERSION, Checkpoint, TaskOutput, TaskRecord
from ._records._events import (
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
    NodeEnd,
    NodeStart,
    RunEnd,
    RunStart,
    StreamEvent,
    parse_event,
)
from ._replay._export import export_history
from ._replay._history import HISTORY_FORMAT_VERSION, History, load_history
from ._replay._replayer import aassert_replays, assert_replays
from ._replay._upgrade import UpgradeReport, check_upgrade
from ._stores._faulty import FaultyStore, StoreCall
from ._stores._memory import InMemoryCheckpointStore
from ._stores._plan import FaultPlan
from ._stores._protocol import CheckpointStore
from ._stores._sqlite import SQLiteCheckpointStore
from ._time._clock import DEFAULT_START, Clock, RealClock, VirtualClock
from ._time._vloop import virtual_anyio_backend
from .errors import (
    Cancelled,
    CheckpointNotFound,
    ConflictingWrites,
    EventsCompacted,
    ForkTargetExists,
    GraphExecutionError,
    GraphflowError,
    GraphValidationError,
    InvalidArgument,
    InvalidHistory,
    JoinStarved,
    MidExecution,
    NodeFailed,
    NothingToRecover,
    NotSuspended,
    ReplayDiverged,
    ResumeError,
    RunTimedOut,
    SimulatedCrash,
    SnapshotMismatch,
    StaleClaim,
    StoreFault,
    SuperstepLimit,
    TenantMismatch,
    ThreadBusy,
    ThreadSuspended,
    UndeclaredWrite,
    UnknownKey,
    UnknownRoute,
    UnsupportedFormat,
    UpdateRejected,
    VirtualDeadlock,
)

if TYPE_CHECKING:
    from ._assert._snapshot import GraphEventsExtension
    from .assertions import (
        EventPatternError,
        EventPatternMismatch,
        assert_events,
        events_diff,
        format_event,
        format_events,
    )

# Imported on first use: they pull in syrupy and the assertion machinery, which the pytest
# entry point should not pay for (and `assertions` must be imported after pytest registers
# it for assertion rewriting).
_LAZY = {
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
    if module is None:
        raise AttributeError(f"module 'pytest_graphflow' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


__version__ = "0.1.0"

__all__ = [
    "DEFAULT_START",
    "END",
    "FORMAT_VERSION",
    "HISTORY_FORMAT_VERSION",
    "PAUSE",
    "START",
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
    "EdgeContext",
    "EdgeTransition",
    "ErrorEvent",
    "EventBase",
    "EventLog",
    "EventPatternError",
    "EventPatternMismatch",
    "EventsCompacted",
    "Expand",
    "ExploreReport",
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
    "History",
    "InMemoryCheckpointStore",
    "Incompatibility",
    "Interrupt",
    "InterruptEvent",
    "InterruptEventData",
    "InvalidArgument",
    "InvalidHistory",
    "JoinStarved",
    "MidExecution",
    "NodeContext",
    "NodeEnd",
    "NodeFailed",
    "NodeStart",
    "NotSuspended",
    "NothingToRecover",
    "RealClock",
    "Reducer",
    "ReplayDiverged",
    "Resume",
    "ResumeError",
    "Retry",
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
    "StreamEvent",
    "SuperstepLimit",
    "TaskOutput",
    "TaskRecord",
    "TenantMismatch",
    "ThreadBusy",
    "ThreadSuspended",
    "Trace",
    "UndeclaredWrite",
    "UnknownKey",
    "UnknownRoute",
    "UnsupportedFormat",
    "UpdateRejected",
    "UpgradeReport",
    "VirtualClock",
    "VirtualDeadlock",
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
    "format_event",
    "format_events",
    "interrupt",
    "load_history",
    "parse_event",
    "virtual_anyio_backend",
]
