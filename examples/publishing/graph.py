"""A publishing flow with an editorial review as a subgraph, as a user would write it.

parent:  draft ──► review (a subgraph) ──► publish ──► END
                      └─ (escalated) ──► legal ──► END
child:   polish ──► check ──► approve (asks an editor) ──► END
                       └─ (risky) Command(graph=PARENT, goto="legal")

The review graph has its own state (``text``, ``verdict``) mapped to the parent's
(``article``, ``decision``). The editor's question pauses the whole run; the parent's
``Resume`` answers it by the key the parent shows (``"<review task>/<child key>"``).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

import anyio
from pydantic import BaseModel

from pytest_graphflow import END, START, Command, Graph, Reducer, Subgraph, interrupt


class Review(BaseModel):
    text: str = ""
    verdict: str = ""


class Article(BaseModel):
    title: str = ""
    article: str = ""
    decision: str = ""
    log: Annotated[list[str], Reducer(operator.add)] = []


async def polish(state: Review) -> dict[str, Any]:
    await anyio.sleep(2)  # a slow spell checker: virtual time in tests
    return {"text": state.text.strip().capitalize()}


def check(state: Review) -> Command | None:
    if "lawsuit" in state.text.lower():
        return Command(graph=Command.PARENT, goto="legal", update={"log": ["escalated"]})
    return None


def approve(state: Review) -> dict[str, Any]:
    return {"verdict": interrupt({"text": state.text}, id="editor")}


def review_graph() -> Any:
    """The editorial review: its own graph and state."""
    g = Graph("review", Review)
    g.node("polish", polish).node("check", check).node("approve", approve, effect="human")
    g.edge(START, "polish").edge("polish", "check").edge("check", "approve")
    g.edge("approve", END)
    return g.compile()


def build() -> Any:
    """The publishing flow, with the review as its ``review`` node."""
    g = Graph("publishing", Article)
    g.node("draft", lambda s: {"article": f"  {s.title} is out  ", "log": ["draft"]})
    g.node("review", Subgraph(review_graph(), input={"text": "article"},
                              output={"article": "text", "decision": "verdict"}),
           destinations=["legal"])
    g.node("publish", lambda s: {"log": [f"published ({s.decision})"]}, effect="external")
    g.node("legal", lambda s: {"log": ["sent to legal"]})
    g.edge(START, "draft").edge("draft", "review").edge("review", "publish")
    g.edge("publish", END).edge("legal", END)
    return g.compile()
