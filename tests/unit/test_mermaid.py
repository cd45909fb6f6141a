"""Mermaid diagrams of compiled graphs."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow._graph._builder import END, START, CompiledGraph, Graph
from pytest_graphflow._graph._mermaid import render


class State(BaseModel):
    n: int = 0


def step(state: Any) -> None:
    return None


def route(state: Any) -> str:
    return "ok"


def checkout() -> CompiledGraph:
    g = Graph("checkout", State)
    g.node("plan", step, destinations=["refund", "a"])
    g.node("a", step)
    g.node("b", step, effect="read")
    g.node("join", step)
    g.node("charge", step, effect="external", on_error="refund")
    g.node("refund", step, effect="write")
    g.edge(START, "plan")
    g.edge("plan", ["a", "b"])
    g.edge(["a", "b"], "join")
    g.branch("join", route, {"ok": "charge", "stop": END, "halt": END})
    g.edge("charge", END)
    g.edge("refund", END)
    return g.compile()


EXPECTED = """\
flowchart TD
    START([START])
    n_plan["plan"]
    n_a["a"]
    n_b["b (read)"]
    n_join["join"]
    n_charge["charge (external)"]
    n_refund["refund (write)"]
    END([END])
    START --> n_plan
    n_plan --> n_a
    n_plan --> n_b
    n_plan -.-> n_refund
    n_join -.->|"ok"| n_charge
    n_join -.->|"stop, halt"| END
    n_charge --> END
    n_charge -->|"on_error"| n_refund
    n_refund --> END
    n_a -->|"join"| n_join
    n_b -->|"join"| n_join
    linkStyle 3 stroke-dasharray:2 3
    linkStyle 4,5 stroke-dasharray:6 4"""


def test_the_whole_diagram() -> None:
    assert render(checkout()) == EXPECTED


def test_compiled_graph_mermaid_is_render() -> None:
    graph = checkout()
    path = [(START, "plan")]
    assert graph.mermaid() == render(graph)
    assert graph.mermaid(path=path) == render(graph, path=path)


def test_output_is_deterministic() -> None:
    assert render(checkout()) == render(checkout())


def test_path_edges_are_bold_and_keep_their_own_style() -> None:
    path = [(START, "plan"), ("plan", "a"), ("plan", "b"), ("a", "join"), ("b", "join"),
            ("join", "charge"), ("charge", "refund"), ("refund", END), ("nowhere", "x")]
    lines = render(checkout(), path=path).splitlines()
    assert lines[-4:] == [
        "    linkStyle 0,1,2,7,8,9,10 stroke-width:4px",
        "    linkStyle 3 stroke-dasharray:2 3",
        "    linkStyle 4 stroke-dasharray:6 4,stroke-width:4px",
        "    linkStyle 5 stroke-dasharray:6 4",
    ]


def test_an_empty_path_changes_nothing() -> None:
    assert render(checkout(), path=[]) == EXPECTED


def test_list_branches_are_labelled_with_their_targets() -> None:
    g = Graph("g", State)
    g.node("a", step)
    g.node("b", step)
    g.node("c", step)
    g.branch(START, route, ["a", "b"])
    g.edge("a", "c")
    g.edge("b", "c")
    g.edge("c", END)
    text = render(g.compile())
    assert 'START -.->|"a"| n_a' in text
    assert 'START -.->|"b"| n_b' in text


def test_route_keys_are_escaped_and_non_strings_shown_as_repr() -> None:
    g = Graph("g", State)
    g.node("a", step)
    g.node("b", step)
    g.edge(START, "a")
    g.branch("a", route, {'say "hi" <now> #1': "b", True: END, 3: END})
    g.edge("b", END)
    text = render(g.compile())
    assert 'n_a -.->|"say #quot;hi#quot; #lt;now#gt; #35;1"| n_b' in text
    assert 'n_a -.->|"True, 3"| END' in text


def test_node_ids_are_safe_and_unique() -> None:
    g = Graph("g", State)
    for name in ("a.b", "a_b", "a-b", "end"):
        g.node(name, step)
    g.edge(START, "a.b")
    g.edge("a.b", "a_b")
    g.edge("a_b", "a-b")
    g.edge("a-b", "end")
    g.edge("end", END)
    text = render(g.compile())
    assert 'n_a_b["a.b"]' in text
    assert 'n_a_b_2["a_b"]' in text
    assert 'n_a_b_3["a-b"]' in text
    assert 'n_end["end"]' in text
    assert "n_a_b --> n_a_b_2" in text


def test_destinations_already_drawn_are_not_repeated() -> None:
    g = Graph("g", State)
    g.node("a", step, destinations=["b", END])
    g.node("b", step)
    g.edge(START, "a")
    g.edge("a", "b")
    g.edge("b", END)
    edges = [line.strip() for line in render(g.compile()).splitlines() if "-" in line]
    assert edges[:4] == ["START --> n_a", "n_a --> n_b", "n_a -.-> END", "n_b --> END"]


@pytest.mark.parametrize("effect", ["read", "write", "external", "human"])
def test_effect_classes_other_than_pure_are_shown(effect: Any) -> None:
    g = Graph("g", State)
    g.node("x", step, effect=effect)
    g.edge(START, "x")
    g.edge("x", END)
    assert f'n_x["x ({effect})"]' in render(g.compile())
