"""Every public name stays importable where users import it from (trio's test_exports).

The lists are the public API as of the package-layout change; a name may be added (add it
here too) but never dropped or moved without a deprecation. Each name also needs a docstring.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

PUBLIC: dict[str, list[str]] = {
    'pytest_graphflow': [
        'DeadlineExpired',
        'InterruptExpired',
        'TimeoutAnswer',
        'Waiting',
        'BlockingSleepWarning',
        'Breakpoint',
        'HISTORY_FORMAT_VERSION',
        'History',
        'Incompatibility',
        'InvalidHistory',
        'ReplayDiverged',
        'UpgradeReport',
        'aassert_replays',
        'assert_replays',
        'check_upgrade',
        'export_history',
        'render_run_html',
        'load_history',
        'Cancelled',
        'Checkpoint',
        'CheckpointNotFound',
        'CheckpointSaved',
        'CheckpointStore',
        'Clock',
        'Command',
        'CompiledGraph',
        'ConflictingWrites',
        'CustomEvent',
        'DEFAULT_START',
        'DeletedThread',
        'END',
        'EdgeContext',
        'EdgeTransition',
        'ErrorEvent',
        'EventBase',
        'EventLog',
        'EventPatternError',
        'EventPatternMismatch',
        'EventsCompacted',
        'ExecutionMismatch',
        'Expand',
        'ExploreReport',
        'FORMAT_VERSION',
        'FaultPlan',
        'FaultyStore',
        'FinalEventData',
        'ForkTargetExists',
        'Graph',
        'GraphEvent',
        'GraphEventsExtension',
        'GraphExecutionError',
        'GraphResult',
        'GraphRuntime',
        'GraphValidationError',
        'GraphflowError',
        'InMemoryCheckpointStore',
        'Interrupt',
        'InterruptEvent',
        'InterruptEventData',
        'InvalidArgument',
        'JoinStarved',
        'MalformedCommit',
        'MiddlewareFailed',
        'GuardrailBlocked',
        'Rewrite',
        'Middleware',
        'Guardrail',
        'Block',
        'Allow',
        'MidExecution',
        'MissingExtra',
        'NodeContext',
        'NodeEnd',
        'NodeFailed',
        'NodeStart',
        'NotSuspended',
        'NothingToRecover',
        'ParentNotLatest',
        'PAUSE',
        'PostgresCheckpointStore',
        'RealClock',
        'Reducer',
        'Resume',
        'ResumeError',
        'Retry',
        'RunEnd',
        'RunHandle',
        'RunLeg',
        'RunRecord',
        'RunStart',
        'RunStream',
        'RunTimedOut',
        'SQLiteCheckpointStore',
        'START',
        'SimulatedCrash',
        'SnapshotMismatch',
        'StaleClaim',
        'StoreCall',
        'StoreFault',
        'StoreFileError',
        'StreamEvent',
        'Subgraph',
        'SuperstepLimit',
        'SyncCallInEventLoop',
        'TaskOutput',
        'TaskRecord',
        'TenantMismatch',
        'ThreadBusy',
        'ThreadSuspended',
        'Trace',
        'UndeclaredWrite',
        'UnexpectedError',
        'UnknownKey',
        'UnknownRoute',
        'UnsupportedFormat',
        'UpdateRejected',
        'VirtualClock',
        'VirtualDeadlock',
        'Worker',
        'WorkerStats',
        '__version__',
        'assert_events',
        'emit',
        'errors',
        'events_diff',
        'explore',
        'format_event',
        'format_events',
        'interrupt',
        'parse_event',
        'record_effect',
        'virtual_anyio_backend',
    ],
    'pytest_graphflow.errors': [
        'DeadlineExpired',
        'BlockingSleepWarning',
        'InvalidHistory',
        'ReplayDiverged',
        'Cancelled',
        'CheckpointNotFound',
        'ConflictingWrites',
        'EventsCompacted',
        'ExecutionMismatch',
        'ForkTargetExists',
        'GraphExecutionError',
        'GraphValidationError',
        'GraphflowError',
        'InvalidArgument',
        'JoinStarved',
        'MalformedCommit',
        'MiddlewareFailed',
        'GuardrailBlocked',
        'MidExecution',
        'MissingExtra',
        'NodeFailed',
        'NotSuspended',
        'NothingToRecover',
        'ParentNotLatest',
        'ResumeError',
        'RunTimedOut',
        'SimulatedCrash',
        'SnapshotMismatch',
        'StaleClaim',
        'StoreFault',
        'StoreFileError',
        'SuperstepLimit',
        'SyncCallInEventLoop',
        'TenantMismatch',
        'ThreadBusy',
        'ThreadSuspended',
        'UndeclaredWrite',
        'UnexpectedError',
        'UnknownKey',
        'UnknownRoute',
        'UnsupportedFormat',
        'UpdateRejected',
        'VirtualDeadlock',
    ],
    'pytest_graphflow.assertions': [
        'EventPatternError',
        'EventPatternMismatch',
        'assert_events',
        'events_diff',
        'format_event',
        'format_events',
    ],
    'pytest_graphflow.strategies': [
        'Failure',
        'GraphSpec',
        'JoinSpec',
        'PlannedFailure',
        'Schedule',
        'SpecNode',
        'fault_plans',
        'graph_inputs',
        'graphs',
        'resume_answers',
        'schedules',
    ],
    'pytest_graphflow.invariants': [
        'Mark',
        'Recording',
        'RecordingStore',
        'Violation',
        'assert_invariants',
        'assert_reducer_laws',
        'check_c1',
        'check_c10',
        'check_c2',
        'check_c3',
        'check_c4',
        'check_c5',
        'check_c6',
        'check_c7',
        'check_c8',
        'check_c9',
        'check_crash_recovery',
        'check_crash_recovery_across_processes',
        'check_determinism',
        'check_determinism_across_processes',
        'check_interrupt_resume_equivalence',
        'check_invariants',
        'check_node_code',
        'check_recording',
        'check_reducer_laws',
        'format_violations',
        'record_resume',
        'record_run',
        'record_run_sync',
    ],
    'pytest_graphflow.langgraph': [
        'FaultySaver',
        'HOLDING',
        'LangGraphHarness',
        'SaverOp',
        'assert_reducer_laws',
        'check_crash_recovery',
        'check_determinism',
        'check_interrupt_resume_equivalence',
        'check_invariants',
        'check_reducer_laws',
        'drive',
        'explore',
        'messages',
    ],
    'pytest_graphflow.conformance': [
        'StoreConformance',
        'run_store_conformance',
        'store_conformance_machine',
        'store_conformance_test',
    ],
    'pytest_graphflow.testing': [
        'GraphRuntimeFactory',
        'RecordingRuntime',
        'RunRecording',
        'make_graph_runtime',
        'register_profiles',
    ],
    'pytest_graphflow.plugin': [
        'checkpoint_store',
        'graph_runtime',
        'graph_runtime_factory',
        'graph_seed',
        'graph_snapshot',
        'pytest_addoption',
        'pytest_assertrepr_compare',
        'pytest_collection_modifyitems',
        'pytest_configure',
        'pytest_fixture_setup',
        'pytest_report_header',
        'pytest_runtest_call',
        'pytest_runtest_makereport',
        'pytest_runtest_protocol',
        'store_faults',
        'virtual_clock',
    ],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_every_public_name_is_importable(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [name for name in PUBLIC[module] if not hasattr(mod, name)]
    assert missing == [], f"{module} lost public names: {missing}"


@pytest.mark.parametrize("module", sorted(m for m in PUBLIC if m != "pytest_graphflow.plugin"))
def test_all_lists_exactly_the_public_names(module: str) -> None:
    mod = importlib.import_module(module)
    listed = list(mod.__all__)
    assert len(listed) == len(set(listed)), f"{module}.__all__ lists a name twice"
    assert set(PUBLIC[module]) <= set(listed), sorted(set(PUBLIC[module]) - set(listed))


@pytest.mark.parametrize("module", sorted(m for m in PUBLIC if m != "pytest_graphflow.plugin"))
def test_every_public_class_and_function_has_a_docstring(module: str) -> None:
    mod = importlib.import_module(module)
    bare = [
        name
        for name in mod.__all__
        if (inspect.isclass(getattr(mod, name)) or inspect.isfunction(getattr(mod, name)))
        and not inspect.getdoc(getattr(mod, name))
    ]
    assert bare == [], f"{module}: public names without a docstring: {bare}"


def test_entry_points_resolve() -> None:
    from importlib.metadata import entry_points

    found = {
        (ep.group, ep.name): ep
        for group in ("pytest11", "hypothesis", "console_scripts")
        for ep in entry_points(group=group)
        if ep.value.startswith("pytest_graphflow")
    }
    assert set(found) == {
        ("pytest11", "graphflow"), ("hypothesis", "graphflow"), ("console_scripts", "graphflow"),
    }
    for ep in found.values():
        assert callable(ep.load()) or inspect.ismodule(ep.load())

