"""Every public name stays importable where users import it from (trio's test_exports).

The package's own names are its table (``_PUBLIC`` in ``pytest_graphflow/__init__.py``):
``__getattr__``, ``__all__``, ``__dir__`` and the list below derive from it, and the tests here
check that it lists each name once and that the TYPE_CHECKING imports type checkers read say
the same. The other fronts' lists are the public API as of the package-layout change; a name
may be added (add it here too) but never dropped or moved without a deprecation. Each name
also needs a docstring.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import pytest_graphflow

PUBLIC: dict[str, list[str]] = {
    # the package's own names come from its one table (``_PUBLIC`` in ``__init__.py``)
    'pytest_graphflow': list(pytest_graphflow.__all__),
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
        'ToolFailed',
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
        'check_clock_start',
        'check_crash_recovery',
        'check_crash_recovery_across_processes',
        'check_determinism',
        'check_determinism_across_processes',
        'check_interrupt_resume_equivalence',
        'check_invariants',
        'check_node_code',
        'check_recording',
        'check_reducer_laws',
        'check_tool_replays',
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
        'check_clock_start',
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
    'pytest_graphflow.stores': [
        'Waiting',
        'check_waiting',
        'waiting_row',
        'DEFAULT_CLAIM_TTL',
        'CheckpointStore',
        'Claim',
        'ClaimingStore',
        'DeletedThread',
        'DeletingStore',
        'Fence',
        'StoreFeatures',
        'artifact_bytes',
        'check_after_seq',
        'check_before_seq',
        'check_commit',
        'check_deletable',
        'check_delete_args',
        'check_keep_last',
        'check_lineage',
        'check_token',
        'check_ttl',
        'checks_fencing',
        'current_or_stale',
        'event_seq',
        'events_compacted',
        'features_of',
        'fence_token',
        'fork_target_exists',
        'normalise_event',
        'normalise_run_record',
        'renewed',
        'take_claim',
        'utc_now',
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
        'pytest_report_header',
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



INIT = Path(pytest_graphflow.__file__)


def _table_source() -> ast.Dict:
    for node in ast.parse(INIT.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "_PUBLIC":
            assert isinstance(node.value, ast.Dict)
            return node.value
    raise AssertionError(f"{INIT}: no _PUBLIC table")


def listed_twice(table: ast.Dict) -> list[str]:
    """Names (and modules) the table's source lists more than once: a dict literal would
    silently keep only the last of two equal keys, so this reads the source."""
    seen: set[str] = set()
    twice: list[str] = []
    modules = [ast.literal_eval(k) for k in table.keys if k is not None]
    names = [n for v in table.values for n in ast.literal_eval(v)]
    for item in [*(f"module {m}" for m in modules), *names]:
        if item in seen:
            twice.append(item)
        seen.add(item)
    return twice


def type_checking_imports(source: str) -> dict[str, list[str]]:
    """module -> names, for the ``from m import X as X`` lines under ``if TYPE_CHECKING``."""
    found: dict[str, list[str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom), ast.unparse(imp)
                module = "." * imp.level + (imp.module or "")
                for alias in imp.names:
                    # ``X as X``: mypy --strict treats only that (or __all__) as a re-export
                    assert alias.asname == alias.name, f"{module}: write {alias.name} as " \
                        f"{alias.name}, not as {alias.asname}"
                    found.setdefault(module, []).append(alias.name)
    return found


def test_the_table_lists_every_public_name_once() -> None:
    assert listed_twice(_table_source()) == []


def test_a_name_listed_twice_is_found() -> None:
    table = ast.parse('{"._a": ("X", "Y"), "._b": ("Y",), "._a": ("Z",)}', mode="eval").body
    assert isinstance(table, ast.Dict)
    assert listed_twice(table) == ["module ._a", "Y"]


def test_the_type_checking_imports_say_what_the_table_says() -> None:
    table = {m: sorted(names) for m, names in pytest_graphflow._PUBLIC.items()}
    imported = {m: sorted(names) for m, names in
                type_checking_imports(INIT.read_text(encoding="utf-8")).items()}
    assert imported == table


def test_a_type_checking_import_the_table_lacks_is_found() -> None:
    source = "if TYPE_CHECKING:\n    from ._a import X as X, Y as Y\n"
    assert type_checking_imports(source) != {"._a": ["X"]}
    with pytest.raises(AssertionError, match="write Y as Y"):
        type_checking_imports("if TYPE_CHECKING:\n    from ._a import Y as Z\n")


def test_all_and_dir_derive_from_the_table() -> None:
    names = [n for group in pytest_graphflow._PUBLIC.values() for n in group]
    assert pytest_graphflow.__all__ == sorted([*names, "__version__", "errors"])
    assert dir(pytest_graphflow) == sorted(pytest_graphflow.__all__)


@pytest.mark.parametrize("front", ["pytest_graphflow.errors", "pytest_graphflow.assertions"])
def test_the_package_exports_every_name_of_the_errors_and_assertions(front: str) -> None:
    missing = sorted(set(importlib.import_module(front).__all__)
                     - set(pytest_graphflow.__all__))
    assert missing == [], f"{front} names the package does not export: {missing}"
