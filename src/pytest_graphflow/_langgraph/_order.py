"""A LangGraph graph's set orders made stable, so ``PYTHONHASHSEED`` decides no byte.

``StateGraph`` keeps its edges and waiting edges in *sets* of strings, and ``compile()``
attaches them in set order, which follows the interpreter's string hashes
(``PYTHONHASHSEED``). That order reaches what a run records:

* a node's edge writers (``branch:to:X``, ``join:...:X``) run in it, so a task's writes — the
  rows ``put_writes`` saves, the order channels enter ``channel_versions`` in each saved
  checkpoint, and the order of the harness's ``edge_transition`` events — follow it;
* a node reached by two waiting edges lists its triggers, and so the inputs of its task id,
  in it;
* join channels enter the graph's channel table in it;
* a join's ``NamedBarrierValue`` stores the *set* of nodes it has seen, which the serializer
  writes in hash order.

:func:`stable_order` sorts the first three in place, in the graph and every subgraph (by
channel name: deterministic, and no order LangGraph promises is lost, since a set promised
none), once per graph object. :func:`install_order_hooks` makes LangGraph's serializer write
a set or frozenset sorted while a harness run is active (``ID_SOURCE`` set); anywhere else
it writes them as LangGraph does.
"""

from __future__ import annotations

from typing import Any

from ._ids import ID_SOURCE

__all__ = ["install_order_hooks", "stable_order"]

_MARK = "_graphflow_stable_order"
_EDGE_PREFIXES = ("branch:to:", "join:")
_installed = False


def stable_order(graph: Any) -> None:
    """Sort the edge writers, triggers and join channels of ``graph`` and its subgraphs
    (in place; idempotent)."""
    graphs = [graph, *(sub for _, sub in graph.get_subgraphs(recurse=True))]
    for g in graphs:
        if getattr(g, _MARK, False):
            continue
        for node in getattr(g, "nodes", {}).values():
            _sort_node(node)
        channels = getattr(g, "channels", None)
        if isinstance(channels, dict):
            joins = sorted(k for k in channels if k.startswith("join:"))
            for key in joins:
                channels[key] = channels.pop(key)
        setattr(g, _MARK, True)


def _edge_channel(writer: Any) -> str | None:
    """The channel of a writer ``attach_edge`` made (one entry to an edge channel)."""
    writes = getattr(writer, "writes", None)
    if type(writer).__name__ != "ChannelWrite" or not writes or len(writes) != 1:
        return None
    channel = getattr(writes[0], "channel", None)
    if isinstance(channel, str) and channel.startswith(_EDGE_PREFIXES):
        return channel
    return None


def _sort_node(node: Any) -> None:
    writers = getattr(node, "writers", None)
    changed = False
    if isinstance(writers, list):
        i = 0
        while i < len(writers):
            if _edge_channel(writers[i]) is None:
                i += 1
                continue
            j = i
            while j < len(writers) and _edge_channel(writers[j]) is not None:
                j += 1
            run = sorted(writers[i:j], key=lambda w: str(_edge_channel(w)))
            if run != writers[i:j]:
                writers[i:j] = run
                changed = True
            i = j
    triggers = getattr(node, "triggers", None)
    if isinstance(triggers, list) and triggers != sorted(triggers):
        triggers.sort()
        changed = True
    if changed:
        # PregelNode caches the runnable it builds from its writers
        for cached in ("flat_writers", "node", "input_cache_key"):
            node.__dict__.pop(cached, None)


def install_order_hooks() -> None:
    """Make LangGraph's msgpack serializer write sets sorted during harness runs
    (idempotent)."""
    global _installed
    if _installed:
        return
    import langgraph.checkpoint.serde.jsonplus as jsonplus
    import ormsgpack

    original = jsonplus._msgpack_default

    def ordered_default(obj: Any) -> Any:
        if ID_SOURCE.get() is not None and isinstance(obj, (set, frozenset)):
            try:
                items = tuple(sorted(obj))
            except TypeError:  # unorderable members: LangGraph's own (hash) order
                return original(obj)
            return ormsgpack.Ext(
                jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG,
                jsonplus._msgpack_enc((type(obj).__module__, type(obj).__name__, items)))
        return original(obj)

    ordered_default.__wrapped__ = original  # type: ignore[attr-defined]
    jsonplus._msgpack_default = ordered_default
    _installed = True
