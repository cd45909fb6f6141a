"""No import circle inside the engine (``_engine/``), counting every import.

``test_layering.py``'s cycle check leaves out ``TYPE_CHECKING`` imports (they never run);
this one counts them too, with function-level ones: a circle a type checker must untangle is
still two modules that cannot be read one without the other. The engine breaks its old
circles with protocols (``_host.LegHost``, ``_subgraph.ChildRuntime``, ``_node.TaskLeg``) and
small modules (``_outcome``, ``_write_update``) instead.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

import pytest_graphflow

PACKAGE = Path(pytest_graphflow.__file__).parent
SUBPACKAGES = ["_engine"]


def _module_of(path: Path, package: Path) -> tuple[str, bool]:
    rel = path.relative_to(package.parent).with_suffix("")
    is_package = rel.name == "__init__"
    return ".".join(rel.parts[:-1] if is_package else rel.parts), is_package


def _targets(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        parts = module.split(".")
        pkg = parts if is_package else parts[:-1]
        pkg = pkg[: len(pkg) - (node.level - 1)]
        base = ".".join(pkg + ([node.module] if node.module else []))
    if node.module is None:
        return [f"{base}.{alias.name}" for alias in node.names]
    return [base]


def import_graph(subpackage: str, package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules of the same subpackage it imports (any import, anywhere)."""
    graph: dict[str, set[str]] = {}
    for path in sorted((package / subpackage).glob("*.py")):
        module, is_package = _module_of(path, package)
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                found.update(_targets(module, is_package, node))
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[module] = found
    for module in graph:
        graph[module] = {m for m in graph[module] if m in graph and m != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle, as the modules of each (strongly connected, more than one)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part: list[str] = []
            while True:
                top = stack.pop()
                on.discard(top)
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("subpackage", SUBPACKAGES)
def test_no_import_circle_inside(subpackage: str) -> None:
    assert circles(import_graph(subpackage)) == []


def test_a_planted_circle_is_reported(tmp_path: Path) -> None:
    copy = tmp_path / "pytest_graphflow"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    runner = copy / "_engine" / "_runner.py"
    # A type-only import back up: the runtime imports the runner, the runner the runtime.
    runner.write_text(runner.read_text(encoding="utf-8") + (
        "\n\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from ._runtime import GraphRuntime\n"), encoding="utf-8")
    found = circles(import_graph("_engine", copy))
    assert any({"pytest_graphflow._engine._runner", "pytest_graphflow._engine._runtime"}
               <= set(c) for c in found), found
