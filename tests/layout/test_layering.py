"""Imports run one way: plugin and property tools → runtime → graph/time/stores → records.

Each private subpackage of ``pytest_graphflow`` may import only the layers listed for it in
``ALLOWED`` (its own modules always). The check reads the source with :mod:`ast`, so a
function-level import counts as much as a module-level one, and ``TYPE_CHECKING`` imports are
allowed (they never run). A new subpackage must be added here with its allowed layers.
Inside a layer listed in ``ROOMS`` (``_properties``), each room (sub-subpackage) may import
only the rooms listed for it. No import cycle may join modules of one subpackage.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import pytest_graphflow

PACKAGE = Path(pytest_graphflow.__file__).parent
NAME = "pytest_graphflow"

# layer -> the layers it may import (besides itself). ``errors`` is the root of everything.
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "_records": {"errors"},
    "_time": {"_records", "errors"},
    "_graph": {"_time", "_records", "errors"},
    "_stores": {"_time", "_records", "errors"},
    # the engine reads one event pattern item (``cancel_at=``) with the assertions' language
    "_engine": {"_assert", "_graph", "_stores", "_time", "_records", "errors"},
    "_assert": {"_records", "errors"},
    "_properties": {"_assert", "_engine", "_graph", "_stores", "_time", "_records", "errors"},
    "_langgraph": {
        "_properties", "_assert", "_engine", "_graph", "_stores", "_time", "_records", "errors",
    },
    "_replay": {
        "_properties", "_assert", "_engine", "_graph", "_stores", "_time", "_records", "errors",
    },
    "_html": {"_engine", "_graph", "_records", "errors"},
    "_plugin": {
        "_html", "_langgraph", "_replay", "_properties", "_assert", "_engine", "_graph", "_stores",
        "_time", "_records", "errors",
    },
    "_workers": {"_engine", "_graph", "_stores", "_time", "_records", "errors"},
    "_cli": {
        "_html", "_replay", "_assert", "_workers", "_engine", "_graph", "_stores", "_time",
        "_records", "errors",
    },
}
# Rooms inside a layer (issue 27): room -> the rooms of the same layer it may import (besides
# itself); the layers it may import are its layer's. A module directly in the layer's folder is
# a room of its own, named by its module name.
ROOMS: dict[str, dict[str, set[str]]] = {
    "_properties": {
        "__init__": set(),
        # progress reports, sent by both the conformance machine and the whole-run tools
        "_progress": set(),
        "conformance": {"_progress"},
        # checkers judge what they are given (events, a reducer, node code); they run nothing
        "checks": set(),
        "strategies": set(),
        # whole-run tools: the one room that imports checks and strategies
        "runs": {"checks", "strategies", "_progress"},
        # the installed ``hypothesis`` entry point: its path is in every installed copy's
        # metadata, so it stays where it is; it registers the strategies
        "_hypothesis_entry": {"strategies"},
    },
}
# The engine knows stores only through the store seam (issue 25): the protocol, the features
# a store declares, the default-store factory and the shared rules; never a concrete store.
ENGINE_STORE_MODULES = {
    "_protocol", "_features", "_default", "_claims", "_deletion", "_args", "_waiting"}
# The public fronts (``__init__``, ``plugin``, ``strategies``, ...) may import any layer.
FRONTS = {p.stem for p in PACKAGE.glob("*.py")} - {"errors"}


def layer_of(module: str) -> str | None:
    """The layer a dotted module name inside the package belongs to, or None for a front."""
    parts = module.split(".")
    if parts[0] != NAME or len(parts) == 1:
        return None
    top = parts[1]
    return None if top in FRONTS and top not in ALLOWED else top


def room_of(module: str) -> str | None:
    """The room of a module inside a layer listed in ``ROOMS``, or None outside one."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] not in ROOMS:
        return None
    return parts[2] if len(parts) > 2 else "__init__"


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        parts = module.split(".")
        pkg = parts if is_package else parts[:-1]
        pkg = pkg[: len(pkg) - (node.level - 1)]
        base = ".".join(pkg + ([node.module] if node.module else []))
    if node.module is None:  # from . import a, b: each name may be a module
        return [f"{base}.{alias.name}" for alias in node.names]
    return [base]


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                for sub in ast.walk(child):
                    if hasattr(sub, "lineno"):
                        lines.add(sub.lineno)
    return lines


def imports_of(path: Path, package: Path = PACKAGE) -> list[tuple[int, str]]:
    """(line, imported module) for every import in one source file of the package."""
    rel = path.relative_to(package.parent).with_suffix("")
    is_package = rel.name == "__init__"
    module = ".".join(rel.parts[:-1] if is_package else rel.parts)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_lines(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            found.extend((node.lineno, m) for m in _resolve(module, is_package, node))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return found


def violations(package: Path = PACKAGE) -> list[str]:
    """Every import in the package that goes against ``ALLOWED``, as readable lines."""
    bad: list[str] = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        own = layer_of(".".join(rel.parts))
        if own is None:
            continue
        if own not in ALLOWED:
            bad.append(f"{rel}: subpackage {own!r} has no entry in ALLOWED (add its layers)")
            continue
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        room = room_of(module)
        if room is not None and room not in ROOMS[own]:
            bad.append(f"{rel}: room {room!r} of {own} has no entry in ROOMS (add its rooms)")
            continue
        for line, imported in imports_of(path, package):
            target = layer_of(imported)
            if room is not None and target == own:
                other = room_of(imported)
                if other is not None and other != room and other not in ROOMS[own][room]:
                    bad.append(f"{rel}:{line}: {own}.{room} imports {imported}"
                               f" (room {other!r} is not below {room!r})")
                continue
            if imported.startswith(NAME) and target is None and imported != NAME + ".errors":
                bad.append(f"{rel}:{line}: {own} imports the public front {imported}")
            elif target is not None and target != own and target not in ALLOWED[own]:
                bad.append(f"{rel}:{line}: {own} imports {imported} ({target} is above it)")
            elif own == "_engine" and target == "_stores" and (
                    imported.split(".")[2:3] == [] or imported.split(".")[2]
                    not in ENGINE_STORE_MODULES):
                bad.append(f"{rel}:{line}: _engine imports the concrete store module {imported}"
                           f" (only {sorted(ENGINE_STORE_MODULES)} of _stores)")
    return bad


def store_probes(package: Path = PACKAGE) -> list[str]:
    """Every place in ``_engine`` that looks at a store's attributes itself (``getattr``,
    ``hasattr``, or ``inspect`` on a store) instead of reading its ``StoreFeatures``."""
    found: list[str] = []
    for path in sorted((package / "_engine").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = ast.unparse(node.func)
            if name in {"getattr", "hasattr", "inspect.getattr_static", "inspect.signature"} \
                    and "store" in ast.unparse(node.args[0]).lower():
                found.append(f"{path.relative_to(package)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_every_import_runs_down_the_layers() -> None:
    assert violations() == []


def test_the_engine_never_probes_a_store() -> None:
    assert store_probes() == []


def test_a_store_probe_in_the_engine_is_reported(tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / NAME
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "_engine" / "_bad.py").write_text(
        "def f(run):\n    return getattr(run.store, 'put_artifact', None)\n", encoding="utf-8")
    assert store_probes(copy) == [
        "_engine/_bad.py:2: getattr(run.store, 'put_artifact', None)"]


def test_every_subpackage_is_listed() -> None:
    subpackages = {p.parent.name for p in PACKAGE.glob("_*/__init__.py")}
    assert subpackages <= set(ALLOWED), sorted(subpackages - set(ALLOWED))


def test_every_subpackage_says_what_it_owns_and_may_import() -> None:
    for init in PACKAGE.glob("_*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "import" in doc, f"{init}: the docstring must say what the subpackage may import"


@pytest.mark.parametrize(
    ("where", "line", "expected"),
    [
        ("_records/_bad.py", "from .._engine._runtime import GraphRuntime", "_records imports"),
        ("_stores/_bad.py", "from .._graph._builder import Graph", "_stores imports"),
        ("_engine/_bad.py", "from .._plugin._seed import SEED_LIMIT", "_engine imports"),
        ("_time/_bad.py", "def f():\n    from pytest_graphflow._engine import _runner", "_time"),
        ("_graph/_bad.py", "from .. import strategies", "imports the public front"),
        ("_engine/_bad.py", "from .._stores._memory import InMemoryCheckpointStore",
         "concrete store module"),
        ("_engine/_bad.py", "from .._stores.faults._store import FaultyStore",
         "concrete store module"),
        ("_engine/_bad.py", "from .._stores import sqlite", "concrete store module"),
        ("_engine/_bad.py", "from .._stores.postgres import _conn", "concrete store module"),
        ("_stores/sqlite/_bad.py", "from ..._graph._builder import Graph", "_stores imports"),
        ("_properties/checks/_bad.py", "from ..runs._drive import drive", "checks imports"),
        ("_properties/strategies/_bad.py", "def f():\n    from ..checks import _legs",
         "strategies imports"),
        ("_properties/conformance/_bad.py", "from ..strategies._genspec import GraphSpec",
         "conformance imports"),
        ("_properties/runs/_bad.py", "from ..conformance._machine import StoreConformance",
         "runs imports"),
        ("_properties/_progress.py", "from .runs import _explore", "_progress imports"),
        ("_properties/_bad.py", "", "room '_bad' of _properties has no entry"),
    ],
    ids=["records->engine", "stores->graph", "engine->plugin", "lazy-absolute", "front",
         "engine->memory-store", "engine->faulty-store", "engine->sqlite-package",
         "engine->postgres-module", "sqlite->graph", "checks->runs", "strategies->checks",
         "conformance->strategies", "runs->conformance", "progress->runs", "unknown-room"],
)
def test_a_forbidden_import_is_reported(
    tmp_path: Path, where: str, line: str, expected: str
) -> None:
    import shutil

    copy = tmp_path / NAME
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / where).write_text(line + "\n", encoding="utf-8")
    found = violations(copy)
    assert any(expected in v and Path(where).stem in v for v in found), found


def module_imports(package: Path = PACKAGE, *, type_checking: bool = False
                   ) -> dict[str, set[str]]:
    """module -> the package's modules it imports, module-level and inside functions (what
    runs); with ``type_checking``, also the imports under ``if TYPE_CHECKING`` (which never
    run). ``from .pkg import mod`` counts as importing ``pkg.mod``."""
    modules: dict[str, Path] = {}
    for path in package.rglob("*.py"):
        rel = path.relative_to(package.parent).with_suffix("")
        modules[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = path
    graph: dict[str, set[str]] = {}
    for mod, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = set() if type_checking else _type_checking_lines(tree)
        found: set[str] = set()
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                for base in _resolve(mod, is_package, node):
                    for alias in node.names:
                        sub = base if node.module is None else f"{base}.{alias.name}"
                        found.add(sub if sub in modules else base)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[mod] = {m for m in found if m in modules and m != mod}
    return graph


def import_cycles(graph: dict[str, set[str]], within: str = NAME) -> list[list[str]]:
    """The import cycles among the modules of ``within`` (a dotted package), each once, as
    ``[a, b, ..., a]`` (Tarjan's strongly connected components, then one cycle through each
    component's first module)."""
    inside = {m: {n for n in graph[m] if n.startswith(within + ".")} for m in graph
              if m.startswith(within + ".")}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(inside[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(inside):
        if v not in index:
            connect(v)
    cycles = []
    for component in sorted(components):
        members, start = set(component), component[0]
        path, seen = [start], {start}
        while True:  # walk inside the component until it closes on a module already passed
            nxt = sorted(n for n in inside[path[-1]] if n in members)
            step = next((n for n in nxt if n not in seen), None) if start not in nxt else None
            if step is None:
                back = start if start in nxt else next(n for n in nxt if n in seen)
                cycles.append([*path[path.index(back):], back])
                break
            path.append(step)
            seen.add(step)
    return cycles


SUBPACKAGES = sorted(p.parent.name for p in PACKAGE.glob("_*/__init__.py"))


@functools.cache
def _package_imports(type_checking: bool = False) -> dict[str, set[str]]:
    return module_imports(type_checking=type_checking)

# Circles among the type-only imports (``if TYPE_CHECKING``): none is left. They never run,
# but each was two modules that knew each other; protocols ended them (``_graph/_specs``'s
# ``DeclaredGraph``/``DrawnGraph``, ``_graph/_tools.ToolContext``, ``_time/_wallclock.NodeClock``,
# the run-state protocols in ``_engine/_host``). A new one fails the test; if one must stay,
# list it here with why.
KNOWN_TYPE_CYCLES: set[str] = set()


@pytest.mark.parametrize("subpackage", SUBPACKAGES)
def test_no_import_cycle_inside_a_subpackage(subpackage: str) -> None:
    """Imports that run (module-level or inside a function) never go round in a circle
    between modules of one subpackage; ``TYPE_CHECKING`` imports are left out here (they
    never run; see the next test)."""
    cycles = import_cycles(_package_imports(), f"{NAME}.{subpackage}")
    assert cycles == [], "\n".join(" -> ".join(m.rsplit(".", 1)[1] for m in c) for c in cycles)


def test_no_new_circle_among_type_only_imports() -> None:
    graph = _package_imports(type_checking=True)
    found = {f"{sub}: " + " -> ".join(m.rsplit(".", 1)[1] for m in cycle)
             for sub in SUBPACKAGES for cycle in import_cycles(graph, f"{NAME}.{sub}")}
    assert sorted(found - KNOWN_TYPE_CYCLES) == [], "new circles"
    assert sorted(KNOWN_TYPE_CYCLES - found) == [], "gone: delete from KNOWN_TYPE_CYCLES"


def test_no_import_cycle_in_the_whole_package() -> None:
    cycles = import_cycles(_package_imports())
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)


def test_a_planted_import_cycle_is_listed(tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / NAME
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "_time" / "_gf_a.py").write_text("from . import _gf_b\n", encoding="utf-8")
    (copy / "_time" / "_gf_b.py").write_text(
        "def f():\n    from ._gf_a import x\n", encoding="utf-8")
    assert import_cycles(module_imports(copy), f"{NAME}._time") == [
        [f"{NAME}._time._gf_a", f"{NAME}._time._gf_b", f"{NAME}._time._gf_a"]]
