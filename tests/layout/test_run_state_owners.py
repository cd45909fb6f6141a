"""Who may change a run leg's state, and what the runtime shows its collaborators.

A leg's :class:`~pytest_graphflow._engine._run_state.RunState` is in parts, each with an
owner (the table in ``_engine/_run_state.py``'s docstring and in docs/architecture.md). This
test reads the source with :mod:`ast` and refuses an assignment to a part's field — ``=``,
``+=``, ``del``, ``setattr`` — outside the part's own class and its owner modules. A part is
recognised where the code reaches it: ``run.pos.step = ...``, a local taken from it
(``pos = run.pos``, ``spec, pos = run.spec, run.pos``), or a parameter annotated with its
class. The frozen parts (``LegSpec``, ``LegOutcome``) have no owner: nothing assigns them.

It also refuses, in the modules that prepare, delete, step and replay legs, any use of the
runtime's private attributes (``runtime._runs``, ``runtime._run_sync``...): they get what
they need from ``_engine/_host.py`` (a ``LegHost``, a ``RunBook``) and ``_runtime``'s
functions (``use_run_ids``, ``run_sync``, ``child_runtime``).
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

import pytest_graphflow
from pytest_graphflow._engine._run_state import (
    Flight,
    LegOutcome,
    LegSpec,
    Numbering,
    Position,
    Progress,
    RunState,
)
from pytest_graphflow._engine._runtime import GraphRuntime

PACKAGE = Path(pytest_graphflow.__file__).parent
NAME = "pytest_graphflow"
DEFINED_IN = "_engine/_run_state.py"

# RunState attribute -> (the part's class, the modules that may assign its fields).
PARTS: dict[str, tuple[type, set[str]]] = {
    "spec": (LegSpec, set()),
    "pos": (Position, {"_engine/_commit.py", "_engine/_lean.py"}),
    "numbers": (Numbering, {"_engine/_lean.py"}),
    "progress": (Progress, {"_engine/_runner.py", "_engine/_lean.py"}),
    "flight": (Flight, {"_engine/_batch.py"}),
    "outcome": (LegOutcome, set()),
}
# RunState's own fields are assigned in its __init__ only, except these.
RUN_STATE_OWNERS: dict[str, set[str]] = {"outcome": {"_engine/_writer.py"}}
# How the code names a RunState: these expressions, locals taken from them, and parameters
# annotated ``RunState``.
RUN_NAMES = {"run", "self.run", "runner.run", "live.run", "ctx._leg", "self._leg"}
# The modules that must not touch the runtime's private attributes.
RUNTIME_CLIENTS = ("_engine/_legs.py", "_engine/_delete.py", "_engine/_step.py",
                   "_engine/_subgraph.py", "_engine/_write_update.py", "_replay")


def fields_of(cls: type) -> set[str]:
    """A part's fields: its slots (every part has ``__slots__``)."""
    return {name for klass in cls.__mro__ for name in getattr(klass, "__slots__", ())}


PART_FIELDS = {attr: fields_of(cls) for attr, (cls, _) in PARTS.items()}
PART_BY_CLASS = {cls.__name__: attr for attr, (cls, _) in PARTS.items()}
RUN_FIELDS = fields_of(RunState)


class _Scope(ast.NodeVisitor):
    """Walks one function, knowing which local names stand for a RunState or a part."""

    def __init__(self, rel: str, found: list[str]) -> None:
        self.rel = rel
        self.found = found
        self.runs: set[str] = set()
        self.parts: dict[str, str] = {}  # local name -> RunState attribute of its part

    # What an expression is: "run", a part's attribute ("pos", ...), or None.
    def kind(self, node: ast.expr) -> str | None:
        text = ast.unparse(node)
        if text in RUN_NAMES or (isinstance(node, ast.Name) and node.id in self.runs):
            return "run"
        if isinstance(node, ast.Name) and node.id in self.parts:
            return self.parts[node.id]
        if isinstance(node, ast.Attribute) and node.attr in PARTS \
                and self.kind(node.value) == "run":
            return node.attr
        return None

    def bind(self, target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
                and len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts, strict=True):
                self.bind(t, v)
            return
        if isinstance(target, ast.Name) and value is not None:
            kind = self.kind(value)
            if kind == "run":
                self.runs.add(target.id)
            elif kind is not None:
                self.parts[target.id] = kind

    def check(self, target: ast.Attribute, line: int) -> None:
        kind = self.kind(target.value)
        if kind == "run" and target.attr in RUN_FIELDS:
            if self.rel != DEFINED_IN and self.rel not in RUN_STATE_OWNERS.get(target.attr, ()):
                self.found.append(f"{self.rel}:{line}: assigns RunState.{target.attr}")
        elif kind in PARTS and target.attr in PART_FIELDS[kind]:
            cls, owners = PARTS[kind]
            if self.rel not in owners:
                self.found.append(f"{self.rel}:{line}: assigns {cls.__name__}.{target.attr} "
                                  f"(owned by {sorted(owners) or 'nobody: frozen'})")

    def visit_arguments(self, node: ast.arguments) -> None:
        for arg in [*node.posonlyargs, *node.args, *node.kwonlyargs]:
            hint = "" if arg.annotation is None else ast.unparse(arg.annotation).strip("'\"")
            if hint == "RunState":
                self.runs.add(arg.arg)
            elif hint in PART_BY_CLASS:
                self.parts[arg.arg] = PART_BY_CLASS[hint]

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        for target in node.targets:
            self.bind(target, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.generic_visit(node)
        self.bind(node.target, node.value)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.generic_visit(node)
        self.bind(node.target, node.value)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.check(node, node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = ast.unparse(node.func)
        if name in {"setattr", "object.__setattr__", "delattr"} and len(node.args) >= 2 \
                and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str):
            target = ast.Attribute(value=node.args[0], attr=node.args[1].value, ctx=ast.Store())
            self.check(target, node.lineno)
        self.generic_visit(node)


def _in_part_class(rel: str, tree: ast.Module) -> set[int]:
    """Lines of the parts' own class bodies (their methods may assign their fields)."""
    if rel != DEFINED_IN:
        return set()
    own = {cls.__name__ for cls, _ in PARTS.values()} | {"RunState"}
    return {sub.lineno for node in tree.body if isinstance(node, ast.ClassDef)
            and node.name in own for sub in ast.walk(node) if hasattr(sub, "lineno")}


def run_state_writers(package: Path = PACKAGE) -> list[str]:
    """Every assignment to a run-state part's field outside its owners, as readable lines."""
    found: list[str] = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _in_part_class(rel, tree)
        here: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and node.lineno not in skip:
                _Scope(rel, here).visit(node)
        found.extend(dict.fromkeys(here))  # a nested function is walked with its parent too
    return sorted(set(found))


def runtime_privates() -> set[str]:
    """The runtime's private attribute names (its instance's and its class's)."""
    runtime = GraphRuntime()
    names = set(vars(runtime)) | {n for k in type(runtime).__mro__ for n in vars(k)}
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def runtime_private_uses(package: Path = PACKAGE) -> list[str]:
    """Every use of a runtime private attribute in the runtime's collaborators."""
    private = runtime_privates()
    found: list[str] = []
    for client in RUNTIME_CLIENTS:
        where = package / client
        paths = sorted(where.rglob("*.py")) if where.is_dir() else [where]
        for path in paths:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr in private:
                    rel = path.relative_to(package).as_posix()
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_only_the_owners_assign_the_run_state_parts() -> None:
    assert run_state_writers() == []


def test_every_part_is_slotted_and_the_frozen_ones_refuse_assignment() -> None:
    for cls, _ in PARTS.values():
        assert "__dict__" not in fields_of(cls), cls
    outcome = LegOutcome("completed")
    with pytest.raises(AttributeError):
        outcome.status = "failed"  # type: ignore[misc]
    # The spec is frozen for mypy --strict: every field is declared Final where it is set.
    annotations = field_annotations()
    final = {name.removeprefix("LegSpec.self.") for name, hint in annotations.items()
             if name.startswith("LegSpec.self.") and hint == "Final"}
    assert final == fields_of(LegSpec)


def field_annotations(path: Path = PACKAGE / DEFINED_IN) -> dict[str, str]:
    """``Class.field`` -> its annotation, for the run state's classes: class-level fields, the
    ``self.x: T`` of their methods, and the ``__init__`` parameters fields are made from."""
    own = {cls.__name__ for cls, _ in PARTS.values()} | {"RunState"}
    found: dict[str, str] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.ClassDef) or node.name not in own:
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.AnnAssign):
                found[f"{node.name}.{ast.unparse(sub.target)}"] = ast.unparse(sub.annotation)
            elif isinstance(sub, ast.FunctionDef) and sub.name == "__init__":
                for arg in [*sub.args.args, *sub.args.kwonlyargs]:
                    if arg.annotation is not None:
                        found[f"{node.name}.__init__({arg.arg})"] = ast.unparse(arg.annotation)
    return found


def test_no_run_state_field_is_typed_any() -> None:
    found = field_annotations()
    assert "Position.__init__(state)" in found
    assert "LegOutcome.status" in found
    assert {name: hint for name, hint in found.items() if "Any" in hint} == {}


def test_the_runtime_collaborators_use_no_runtime_private() -> None:
    assert {"_book", "_legs", "_run_sync", "_features"} <= runtime_privates()
    assert runtime_private_uses() == []


def _copy(tmp_path: Path) -> Path:
    copy = tmp_path / NAME
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


@pytest.mark.parametrize(
    ("where", "code", "expected"),
    [
        ("_engine/_bad.py", "def f(run):\n    run.pos.step = 3\n", "assigns Position.step"),
        ("_engine/_bad.py", "def f(run):\n    pos = run.pos\n    pos.tasks = []\n",
         "assigns Position.tasks"),
        ("_engine/_bad.py", "def f(self):\n    self.run.numbers.seq += 1\n",
         "assigns Numbering.seq"),
        ("_engine/_bad.py", "def f(run):\n    spec, progress = run.spec, run.progress\n"
         "    progress.started = True\n", "assigns Progress.started"),
        ("_engine/_bad.py", "def f(p: Flight):\n    p.cancel_requested = True\n",
         "assigns Flight.cancel_requested"),
        ("_engine/_bad.py", "def f(run: RunState):\n    run.outcome = None\n",
         "assigns RunState.outcome"),
        ("_graph/_bad.py", "def f(ctx):\n    leg = ctx._leg\n    leg.answers = {}\n",
         "assigns RunState.answers"),
        ("_engine/_bad.py", "def f(run):\n    setattr(run.spec, 'graph', None)\n",
         "assigns LegSpec.graph"),
        ("_engine/_runner.py", "def f(run):\n    run.pos.step = 3\n", "assigns Position.step"),
    ],
    ids=["through-run", "local-alias", "augmented", "tuple-alias", "annotated-part",
         "outcome-outside-writer", "task-context", "setattr", "owner-of-another-part"],
)
def test_a_planted_assignment_from_a_non_owner_is_reported(
    tmp_path: Path, where: str, code: str, expected: str
) -> None:
    copy = _copy(tmp_path)
    path = copy / where
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    path.write_text(old + "\n\n" + code, encoding="utf-8")
    found = run_state_writers(copy)
    assert any(where in line and expected in line for line in found), found


@pytest.mark.parametrize(
    ("where", "code"),
    [
        ("_engine/_commit.py", "def f(run):\n    run.pos.step = 3\n"),
        ("_engine/_writer.py", "def f(run):\n    run.outcome = None\n"),
        ("_engine/_batch.py", "def f(run):\n    flight = run.flight\n    flight.batch = None\n"),
    ],
    ids=["committer-moves-position", "writer-ends-leg", "batch-runner-flight"],
)
def test_an_owner_assigning_its_part_is_not_reported(
    tmp_path: Path, where: str, code: str
) -> None:
    copy = _copy(tmp_path)
    path = copy / where
    path.write_text(path.read_text(encoding="utf-8") + "\n\n" + code, encoding="utf-8")
    assert run_state_writers(copy) == []


def test_a_planted_runtime_private_use_is_reported(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    (copy / "_replay" / "_bad.py").write_text(
        "def f(replay):\n    return replay.runtime._run_sync(replay.run)\n", encoding="utf-8")
    (copy / "_engine" / "_legs.py").write_text(
        (copy / "_engine" / "_legs.py").read_text(encoding="utf-8")
        + "\n\ndef g(self):\n    return self.rt._book.records\n", encoding="utf-8")
    found = runtime_private_uses(copy)
    assert any(line.startswith("_replay/_bad.py:2: replay.runtime._run_sync") for line in found)
    assert any(line.startswith("_engine/_legs.py:") and "self.rt._book" in line
               for line in found), found
