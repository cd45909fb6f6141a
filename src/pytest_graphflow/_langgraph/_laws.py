"""Laws for the reducers of a LangGraph state (``Annotated[T, reducer]``, ``add_messages``).

LangGraph folds a step's writes into a reducer channel one by one, in task-path order, and a
resumed step re-applies the pending writes its finished tasks saved. The laws below are what
that needs (or, for ``order``, what a graph relying on "parallel" meaning "any order" needs);
each is searched with Hypothesis and reported with a minimal counterexample.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable
from langgraph.graph import StateGraph

from .._properties.checks._checks import Violation
from .._time._clock import VirtualClock
from ..errors import InvalidArgument
from ._convert import jsonable
from ._ids import ID_SOURCE, IdSource, install_id_hooks

__all__ = ["assert_reducer_laws", "check_reducer_laws", "messages", "reducers_of"]


def messages(*, max_size: int = 3, ids: int = 4) -> st.SearchStrategy[list[Any]]:
    """Lists of LangChain messages (human and AI) with ids from a small pool, so that
    ``add_messages``' replace-by-id path is exercised; shrinks towards short lists of one
    id and empty text.

    Args:
        max_size: the longest list drawn.
        ids: how many distinct message ids are drawn from.
    """
    from langchain_core.messages import AIMessage, HumanMessage

    def build(kind: str, mid: int, text: str) -> Any:
        cls = HumanMessage if kind == "human" else AIMessage
        return cls(content=text, id=f"m{mid}")

    one = st.builds(build, st.sampled_from(["human", "ai"]), st.integers(0, ids - 1),
                    st.text("ab", max_size=2))
    return st.lists(one, max_size=max_size)


def _is_add_messages(fn: Any) -> bool:
    return "add_messages" in getattr(fn, "__qualname__", "")


def reducers_of(graph: Any) -> dict[str, Callable[[Any, Any], Any]]:
    """The reducer of every reducer channel of ``graph`` (compiled or a builder), by key."""
    compiled = graph.compile() if isinstance(graph, StateGraph) else graph
    channels = getattr(compiled, "channels", None)
    if not isinstance(channels, Mapping):
        raise InvalidArgument(f"check_reducer_laws(graph={graph!r}): pass a compiled LangGraph "
                              "graph or a StateGraph builder")
    return {k: ch.operator for k, ch in channels.items()
            if callable(getattr(ch, "operator", None)) and not k.startswith("__")}


@contextmanager
def _seeded() -> Any:
    token = ID_SOURCE.set(IdSource(VirtualClock(), "reducer-laws"))
    try:
        yield
    finally:
        ID_SOURCE.reset(token)


def _key(value: Any) -> str:
    return json.dumps(jsonable(value), sort_keys=True)


def _call(fn: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    with _seeded():
        return fn(copy.deepcopy(a), copy.deepcopy(b))


def check_reducer_laws(
    graph: Any,
    values: Mapping[str, st.SearchStrategy[Any]] | None = None,
    *,
    keys: list[str] | None = None,
    commutative: bool = False,
    idempotent: bool | None = None,
    max_examples: int = 100,
) -> list[Violation]:
    """Check the laws of a LangGraph state's reducers; one violation per broken law and key.

    Laws (rule names, each ``reducer:<law>`` with the key in the message):

    * ``reducer:associative``: ``r(r(s, a), b) == r(s, r(a, b))`` — folding writes one at a
      time equals folding their combination (what replaying pending writes relies on);
    * ``reducer:deterministic``: the same arguments give the same result;
    * ``reducer:mutates``: the reducer leaves its arguments unchanged (LangGraph hands it the
      channel's own value and the node's own write);
    * ``reducer:raises``: the reducer raises on values of the key's strategy;
    * ``reducer:idempotent`` (default on for ``add_messages`` only):
      ``r(r(s, a), a) == r(s, a)`` — re-delivering a write changes nothing;
    * ``reducer:order`` (with ``commutative=True``): ``r(r(s, a), b) == r(r(s, b), a)`` —
      parallel writers may be folded in any order. LangGraph folds them by task path, so
      without it the result hangs on node names, not on timing.

    Args:
        graph: a compiled graph or a ``StateGraph`` builder.
        values: a Hypothesis strategy per key for the values nodes write (and the current
            value); ``add_messages`` keys default to :func:`messages`.
        keys: check only these keys (default: every reducer key).
        commutative: check ``reducer:order`` too.
        idempotent: check ``reducer:idempotent`` (default: for ``add_messages`` keys).
        max_examples: the search budget per law.

    Raises:
        InvalidArgument: a key has no strategy, or names no reducer key.
    """
    install_id_hooks()
    found = reducers_of(graph)
    chosen = list(found) if keys is None else keys
    strategies = dict(values or {})
    unknown = [k for k in chosen if k not in found]
    if unknown:
        raise InvalidArgument(f"check_reducer_laws(keys={unknown!r}): not reducer keys of the "
                              f"graph; reducer keys: {sorted(found)}")
    missing = [k for k in chosen if k not in strategies and not _is_add_messages(found[k])]
    if missing:
        raise InvalidArgument(
            f"check_reducer_laws: no values strategy for {missing}; pass values={{key: "
            "strategy}} (e.g. st.lists(st.integers()) for operator.add on a list)")
    config = settings(max_examples=max_examples, database=None, deadline=None,
                      derandomize=True, suppress_health_check=list(HealthCheck))
    out: list[Violation] = []
    for key in chosen:
        fn = found[key]
        vals = strategies[key] if key in strategies else messages()
        triple = st.tuples(vals, vals, vals)
        laws: list[tuple[str, Callable[[Any], str | None]]] = []

        def raises(ex: Any, fn: Any = fn) -> str | None:
            s, a, _ = ex
            try:
                _call(fn, s, a)
            except Exception as exc:
                return f"raised {type(exc).__name__}: {exc}"
            return None

        def associative(ex: Any, fn: Any = fn) -> str | None:
            s, a, b = ex
            left = _call(fn, _call(fn, s, a), b)
            right = _call(fn, s, _call(fn, a, b))
            return None if _key(left) == _key(right) else (
                f"r(r(s, a), b) = {_key(left)} but r(s, r(a, b)) = {_key(right)}")

        def deterministic(ex: Any, fn: Any = fn) -> str | None:
            s, a, _ = ex
            one, two = _call(fn, s, a), _call(fn, s, a)
            return None if _key(one) == _key(two) else f"{_key(one)} then {_key(two)}"

        def mutates(ex: Any, fn: Any = fn) -> str | None:
            s, a, _ = ex
            before = (_key(s), _key(a))
            with _seeded():
                fn(s, a)
            after = (_key(s), _key(a))
            return None if before == after else (
                f"the arguments changed: {before[0]}, {before[1]} became {after[0]}, {after[1]}")

        laws += [("raises", raises), ("associative", associative),
                 ("deterministic", deterministic), ("mutates", mutates)]
        if idempotent or (idempotent is None and _is_add_messages(fn)):
            def idem(ex: Any, fn: Any = fn) -> str | None:
                s, a, _ = ex
                once = _call(fn, s, a)
                twice = _call(fn, once, a)
                return None if _key(once) == _key(twice) else (
                    f"r(s, a) = {_key(once)} but r(r(s, a), a) = {_key(twice)}")
            laws.append(("idempotent", idem))
        if commutative:
            def order(ex: Any, fn: Any = fn) -> str | None:
                s, a, b = ex
                ab = _call(fn, _call(fn, s, a), b)
                ba = _call(fn, _call(fn, s, b), a)
                return None if _key(ab) == _key(ba) else (
                    f"a then b gives {_key(ab)}, b then a gives {_key(ba)}")
            laws.append(("order", order))
        for name, broken in laws:
            out.extend(_search(f"reducer:{name}", key, triple, broken, config,
                               guarded=name != "raises"))
    return out


def _search(rule: str, key: str, strategy: st.SearchStrategy[Any],
            broken: Callable[[Any], str | None], config: settings,
            guarded: bool) -> list[Violation]:
    def condition(example: Any) -> bool:
        try:
            return broken(copy.deepcopy(example)) is not None
        except Exception:
            return not guarded
    try:
        example = find(strategy, condition, settings=config)
    except (NoSuchExample, Unsatisfiable):
        return []
    try:
        message = broken(copy.deepcopy(example))
    except Exception as exc:
        message = f"raised {type(exc).__name__}: {exc}"
    return [Violation(rule, None, f"key {key!r}: {message} (minimal example s, a, b = "
                      f"{jsonable(example)!r})", example=example)]


def assert_reducer_laws(graph: Any, values: Mapping[str, st.SearchStrategy[Any]] | None = None,
                        **kwargs: Any) -> None:
    """:func:`check_reducer_laws`, raising ``AssertionError`` that lists each broken law."""
    broken = check_reducer_laws(graph, values, **kwargs)
    if broken:
        raise AssertionError("reducer laws broken:\n" + "\n".join(f"- {v}" for v in broken))
