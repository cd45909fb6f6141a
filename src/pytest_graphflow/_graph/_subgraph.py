"""A compiled graph used as a node of another graph (the engine runs it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..errors import InvalidArgument

if TYPE_CHECKING:
    from ._builder import CompiledGraph

__all__ = ["Subgraph"]

StateMap = Mapping[str, str] | Callable[[Any], Mapping[str, Any]] | None


class Subgraph:
    """A compiled graph run as one node of a parent graph, with its own state schema.

    ``g.node("review", child)`` wraps a :class:`CompiledGraph` with the defaults; pass
    ``g.node("review", Subgraph(child, input=..., output=...))`` to map the states.

    The child runs as a run of its own on the parent's store, on the thread
    ``"<parent thread>/<task_id>"`` (its checkpoints are namespaced under the parent task; time
    travel on the parent gives the task a fresh child thread). Interrupts in the child pause
    the parent: every pending one surfaces as an interrupt of the subgraph node whose key is
    the child's key prefixed with ``"<task_id>/"``; answering those keys in the parent's
    ``Resume`` (all, or some with ``partial=True``) resumes the child where it paused. A
    child's breakpoint pauses the parent too (resume it with no answer). A child node may
    return ``Command(graph=Command.PARENT, goto=...)`` to end the child (completed) and route
    the *parent*. A child whose store refuses a save (or whose edge function throws) ends the
    parent's run with that same exception.

    Args:
        graph: the child graph.
        input: how the child's input is built from the parent's state: ``None`` copies the
            keys both schemas define; a mapping ``{child_key: parent_key}``; or a function of
            the parent's state returning the child's input dict. A task of an expansion
            (``Expand``, LangGraph's ``Send``) passes its item as the child's input instead:
            a dict of the child's state keys.
        output: how the child's final state becomes the subgraph node's patch: ``None`` writes
            the keys both schemas define; a mapping ``{parent_key: child_key}``; or a function
            of the child's final state returning the patch.
    """

    def __init__(self, graph: CompiledGraph, *, input: StateMap = None,
                 output: StateMap = None) -> None:
        # Duck-typed: the builder imports this module, so it cannot import the builder.
        if not all(hasattr(graph, a) for a in ("graph_id", "codec", "keys", "nodes")):
            raise InvalidArgument(f"Subgraph(graph={graph!r}): pass a CompiledGraph "
                                  "(call .compile() first)")
        for name, value in (("input", input), ("output", output)):
            if value is not None and not (callable(value) or isinstance(value, Mapping)):
                raise InvalidArgument(f"Subgraph({name}={value!r}): pass None, a mapping of "
                                      "keys or a function")
        self.graph = graph
        self.input = input
        self.output = output

    def child_input(self, parent: BaseModel, parent_keys: frozenset[str]) -> dict[str, Any]:
        """The child's input from the parent's state."""
        return _map(self.input, parent, parent_keys, self.graph.keys)

    def item_input(self, node: str, item: Any) -> dict[str, Any]:
        """The child's input for a task of an expansion (``Expand``, LangGraph's ``Send``):
        the task's item itself, a dict of the child's state keys (``input=`` maps the
        parent's state for the tasks without an item).

        Raises:
            InvalidArgument: an item that is not such a dict, naming the node and the keys.
        """
        keys = sorted(self.graph.keys)
        where = f"node {node!r} runs subgraph {self.graph.graph_id!r}"
        if not isinstance(item, Mapping):
            raise InvalidArgument(
                f"{where}: an Expand item sent to it is the child's input, so it must be a "
                f"dict of the child's state keys {keys}; got {item!r:.80}")
        unknown = sorted(str(k) for k in item if k not in self.graph.keys)
        if unknown:
            raise InvalidArgument(
                f"{where}: the Expand item sent to it is the child's input, but "
                f"{unknown[0]!r} is not a key of the child's state; its keys are {keys}")
        return dict(item)

    def patch(self, child: BaseModel, parent_keys: frozenset[str]) -> dict[str, Any]:
        """The subgraph node's patch from the child's final state."""
        return _map(self.output, child, self.graph.keys, parent_keys)

    async def __call__(self, state: BaseModel, ctx: Any) -> Any:
        return await ctx._leg.run_subgraph(self, state, ctx)

    def __repr__(self) -> str:
        return f"Subgraph({self.graph.graph_id!r})"


def _map(how: StateMap, source: BaseModel, source_keys: frozenset[str],
         target_keys: frozenset[str]) -> dict[str, Any]:
    if how is None:
        return {k: getattr(source, k) for k in sorted(source_keys & target_keys)}
    if isinstance(how, Mapping):
        return {target: getattr(source, key) for target, key in how.items()}
    return dict(how(source))
