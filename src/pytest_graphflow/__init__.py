"""pytest-graphflow: a deterministic graph runtime and pytest plugin for stateful graphs.

Build a graph with :class:`Graph`, run it with :class:`GraphRuntime` (a real clock for
production, a :class:`VirtualClock` and a seed for tests), and test it with the pytest plugin's
``graph_runtime`` fixture, :func:`assert_events` and the Hypothesis strategies in
:mod:`pytest_graphflow.strategies`.
"""

from __future__ import annotations

import sys as _sys
from typing import TYPE_CHECKING, Any

from . import errors as errors

if TYPE_CHECKING:
    # The names of _PUBLIC below, for type checkers and editors (``X as X`` marks a
    # re-export under mypy --strict); tests/layout/test_exports.py checks they agree.
    # isort: off
    from ._assert._snapshot import GraphEventsExtension as GraphEventsExtension
    from ._engine._options import RunOptions as RunOptions
    from ._engine._results import (
        EventLog as EventLog, GraphResult as GraphResult, RunLeg as RunLeg, RunRecord as RunRecord,
        Trace as Trace,
    )
    from ._engine._runtime import GraphRuntime as GraphRuntime
    from ._engine._stream import RunHandle as RunHandle, RunStream as RunStream
    from ._engine._upgrade import Incompatibility as Incompatibility
    from ._graph._builder import (
        END as END, START as START, Command as Command, CompiledGraph as CompiledGraph,
        Expand as Expand, Graph as Graph, Reducer as Reducer, Retry as Retry,
    )
    from ._graph._deadlines import TimeoutAnswer as TimeoutAnswer
    from ._graph._effects import record_effect as record_effect
    from ._graph._middleware import (
        Allow as Allow, Block as Block, Guardrail as Guardrail, Middleware as Middleware,
        Rewrite as Rewrite,
    )
    from ._graph._node import (
        PAUSE as PAUSE, EdgeContext as EdgeContext, NodeContext as NodeContext, Resume as Resume,
        emit as emit, interrupt as interrupt,
    )
    from ._graph._subgraph import Subgraph as Subgraph
    from ._graph._tools import (
        Fatal as Fatal, Tool as Tool, ToolCall as ToolCall, ToolResult as ToolResult, tool as tool,
    )
    from ._html._page import render_run_html as render_run_html
    from ._properties._progress import Progress as Progress
    from ._properties.runs._explore import ExploreReport as ExploreReport, explore as explore
    from ._records._checkpoint import (
        FORMAT_VERSION as FORMAT_VERSION, Checkpoint as Checkpoint, TaskOutput as TaskOutput,
        TaskRecord as TaskRecord,
    )
    from ._records._events import (
        Breakpoint as Breakpoint, CheckpointSaved as CheckpointSaved, CustomEvent as CustomEvent,
        EdgeTransition as EdgeTransition, ErrorEvent as ErrorEvent, EventBase as EventBase,
        FinalEventData as FinalEventData, GraphEvent as GraphEvent, Interrupt as Interrupt,
        InterruptEvent as InterruptEvent, InterruptEventData as InterruptEventData,
        InterruptExpired as InterruptExpired, NodeEnd as NodeEnd, NodeStart as NodeStart,
        RunEnd as RunEnd, RunStart as RunStart, StreamEvent as StreamEvent,
        ToolCallEvent as ToolCallEvent, parse_event as parse_event,
    )
    from ._replay._export import export_history as export_history
    from ._replay._history import (
        HISTORY_FORMAT_VERSION as HISTORY_FORMAT_VERSION, History as History,
        load_history as load_history,
    )
    from ._replay._replayer import (
        aassert_replays as aassert_replays, assert_replays as assert_replays,
    )
    from ._replay._upgrade import UpgradeReport as UpgradeReport, check_upgrade as check_upgrade
    from ._stores._deletion import DeletedThread as DeletedThread
    from ._stores.faults._store import FaultyStore as FaultyStore, StoreCall as StoreCall
    from ._stores._features import StoreFeatures as StoreFeatures, features_of as features_of
    from ._stores._memory import InMemoryCheckpointStore as InMemoryCheckpointStore
    from ._stores._plan import FaultPlan as FaultPlan
    from ._stores.postgres._store import PostgresCheckpointStore as PostgresCheckpointStore
    from ._stores._protocol import CheckpointStore as CheckpointStore
    from ._stores.sqlite._store import SQLiteCheckpointStore as SQLiteCheckpointStore
    from ._stores._waiting import Waiting as Waiting
    from ._time._clock import (
        DEFAULT_START as DEFAULT_START, Clock as Clock, RealClock as RealClock,
        VirtualClock as VirtualClock,
    )
    from ._time._vloop import virtual_anyio_backend as virtual_anyio_backend
    from ._workers._worker import Worker as Worker, WorkerStats as WorkerStats
    from .assertions import (
        EventPatternError as EventPatternError, EventPatternMismatch as EventPatternMismatch,
        assert_events as assert_events, events_diff as events_diff, format_event as format_event,
        format_events as format_events,
    )
    from .errors import (
        BlockingSleepWarning as BlockingSleepWarning, Cancelled as Cancelled,
        CheckpointNotFound as CheckpointNotFound, ConflictingWrites as ConflictingWrites,
        EventsCompacted as EventsCompacted, ExecutionMismatch as ExecutionMismatch,
        ForkTargetExists as ForkTargetExists, GraphExecutionError as GraphExecutionError,
        GraphflowError as GraphflowError, GraphValidationError as GraphValidationError,
        GuardrailBlocked as GuardrailBlocked, InvalidArgument as InvalidArgument,
        InvalidHistory as InvalidHistory, JoinStarved as JoinStarved,
        MalformedCommit as MalformedCommit, MiddlewareFailed as MiddlewareFailed,
        DeadlineExpired as DeadlineExpired, MidExecution as MidExecution,
        MissingExtra as MissingExtra, NodeFailed as NodeFailed,
        NothingToRecover as NothingToRecover, ParentNotLatest as ParentNotLatest,
        NotSuspended as NotSuspended, ReplayDiverged as ReplayDiverged, ResumeError as ResumeError,
        RunTimedOut as RunTimedOut, SimulatedCrash as SimulatedCrash,
        SnapshotMismatch as SnapshotMismatch, StaleClaim as StaleClaim, StoreFault as StoreFault,
        StoreFileError as StoreFileError, SuperstepLimit as SuperstepLimit,
        SyncCallInEventLoop as SyncCallInEventLoop, TenantMismatch as TenantMismatch,
        ThreadBusy as ThreadBusy, ThreadSuspended as ThreadSuspended, ToolFailed as ToolFailed,
        UndeclaredWrite as UndeclaredWrite, UnexpectedError as UnexpectedError,
        UnknownKey as UnknownKey, UnknownRoute as UnknownRoute,
        UnsupportedFormat as UnsupportedFormat, UpdateRejected as UpdateRejected,
        VirtualDeadlock as VirtualDeadlock,
    )
    # isort: on

# The public names, each listed once, by the module that defines (or re-exports) it: the one
# table ``__getattr__``, ``__all__``, ``__dir__`` and tests/layout/test_exports.py derive from.
# A new public name goes here and into the TYPE_CHECKING imports above (for type checkers and
# editors; the exports test fails while the two disagree), with a docstring.
_PUBLIC: dict[str, tuple[str, ...]] = {
    "._assert._snapshot": ("GraphEventsExtension",),
    "._engine._options": ("RunOptions",),
    "._engine._results": ("EventLog", "GraphResult", "RunLeg", "RunRecord", "Trace"),
    "._engine._runtime": ("GraphRuntime",),
    "._engine._stream": ("RunHandle", "RunStream"),
    "._engine._upgrade": ("Incompatibility",),
    "._graph._builder": (
        "END", "START", "Command", "CompiledGraph", "Expand", "Graph", "Reducer", "Retry",
    ),
    "._graph._deadlines": ("TimeoutAnswer",),
    "._graph._effects": ("record_effect",),
    "._graph._middleware": ("Allow", "Block", "Guardrail", "Middleware", "Rewrite"),
    "._graph._node": ("PAUSE", "EdgeContext", "NodeContext", "Resume", "emit", "interrupt"),
    "._graph._subgraph": ("Subgraph",),
    "._graph._tools": ("Fatal", "Tool", "ToolCall", "ToolResult", "tool"),
    "._html._page": ("render_run_html",),
    "._properties._progress": ("Progress",),
    "._properties.runs._explore": ("ExploreReport", "explore"),
    "._records._checkpoint": ("FORMAT_VERSION", "Checkpoint", "TaskOutput", "TaskRecord"),
    "._records._events": (
        "Breakpoint", "CheckpointSaved", "CustomEvent", "EdgeTransition", "ErrorEvent",
        "EventBase", "FinalEventData", "GraphEvent", "Interrupt", "InterruptEvent",
        "InterruptEventData", "InterruptExpired", "NodeEnd", "NodeStart", "RunEnd", "RunStart",
        "StreamEvent", "ToolCallEvent", "parse_event",
    ),
    "._replay._export": ("export_history",),
    "._replay._history": ("HISTORY_FORMAT_VERSION", "History", "load_history"),
    "._replay._replayer": ("aassert_replays", "assert_replays"),
    "._replay._upgrade": ("UpgradeReport", "check_upgrade"),
    "._stores._deletion": ("DeletedThread",),
    "._stores.faults._store": ("FaultyStore", "StoreCall"),
    "._stores._features": ("StoreFeatures", "features_of"),
    "._stores._memory": ("InMemoryCheckpointStore",),
    "._stores._plan": ("FaultPlan",),
    "._stores.postgres._store": ("PostgresCheckpointStore",),  # needs the `postgres` extra
    "._stores._protocol": ("CheckpointStore",),
    "._stores.sqlite._store": ("SQLiteCheckpointStore",),
    "._stores._waiting": ("Waiting",),
    "._time._clock": ("DEFAULT_START", "Clock", "RealClock", "VirtualClock"),
    "._time._vloop": ("virtual_anyio_backend",),
    "._workers._worker": ("Worker", "WorkerStats"),
    ".assertions": (
        "EventPatternError", "EventPatternMismatch", "assert_events", "events_diff",
        "format_event", "format_events",
    ),
    ".errors": (
        "BlockingSleepWarning", "Cancelled", "CheckpointNotFound", "ConflictingWrites",
        "EventsCompacted", "ExecutionMismatch", "ForkTargetExists", "GraphExecutionError",
        "GraphflowError", "GraphValidationError", "GuardrailBlocked", "InvalidArgument",
        "InvalidHistory", "JoinStarved", "MalformedCommit", "MiddlewareFailed", "DeadlineExpired",
        "MidExecution", "MissingExtra", "NodeFailed", "NothingToRecover", "ParentNotLatest",
        "NotSuspended", "ReplayDiverged", "ResumeError", "RunTimedOut", "SimulatedCrash",
        "SnapshotMismatch", "StaleClaim", "StoreFault", "StoreFileError", "SuperstepLimit",
        "SyncCallInEventLoop", "TenantMismatch", "ThreadBusy", "ThreadSuspended", "ToolFailed",
        "UndeclaredWrite", "UnexpectedError", "UnknownKey", "UnknownRoute", "UnsupportedFormat",
        "UpdateRejected", "VirtualDeadlock",
    ),
}
_LAZY = {name: module for module, names in _PUBLIC.items() for name in names}

# Every public name is imported on first use (PEP 562): importing the package, which pytest's
# entry point and Hypothesis's entry point do in every session of a process where it is merely
# installed, costs almost nothing and patches nothing. ``assertions`` must anyway be imported
# after pytest registers it for assertion rewriting. ``__dir__`` lists the lazy names without
# importing them. A tool that walks every module's ``dir()`` and reads each attribute
# (freezegun's start does) would import the whole package halfway through its own patching, so
# a read from freezegun's module walk is refused (an ``AttributeError``, which it skips).
# Each read also shows the public classes and functions of every module imported so far under
# ``pytest_graphflow`` (``_exports.show_public``: reprs, tracebacks and pickles name
# ``pytest_graphflow.GraphRuntime``, not the private module that defines it).


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None or _sys._getframe(1).f_globals.get("__name__") == "freezegun.api":
        raise AttributeError(f"module 'pytest_graphflow' has no attribute {name!r}")
    from importlib import import_module

    from ._exports import show_loaded

    value = getattr(import_module(module, __name__), name)
    show_loaded()
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (``__all__``), imported or not: listing them imports nothing."""
    return sorted(__all__)


__version__ = "0.1.0"

__all__ = sorted([*_LAZY, "__version__", "errors"])
