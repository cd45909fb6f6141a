"""Property-testing a user's :class:`Reducer` for what parallel merges need.

The runtime folds a parallel batch's writes to a key in declared node order:
``fn(fn(current, w1), w2)...``, on JSON copies. For the result not to hang on that order the
reducer must give the same fold for every order of a batch's writes; a declared identity must
be one; and every result must be JSON that round-trips, since checkpoints are JSON. Each law is
searched with :func:`hypothesis.find`, so the counterexample reported is a shrunk, minimal one.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import HealthCheck, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

from ..._graph._builder import Reducer
from ..._records._json import NotJSONError, jcopy, to_json_value
from ...errors import InvalidArgument
from ._checks import Violation

__all__ = ["assert_reducer_laws", "check_reducer_laws"]

_UNSET: Any = object()


def _fn(reducer: Reducer | Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    if isinstance(reducer, Reducer):
        return reducer.fn
    if callable(reducer):
        return reducer
    raise InvalidArgument(f"check_reducer_laws(reducer={reducer!r}): pass a Reducer or a "
                          "function (current, update) -> new")


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _fold(fn: Callable[[Any, Any], Any], current: Any, writes: Sequence[Any]) -> Any:
    value = jcopy(current)
    for w in writes:
        value = to_json_value(fn(jcopy(value), jcopy(w)))
    return value


def check_reducer_laws(
    reducer: Reducer | Callable[[Any, Any], Any],
    values: st.SearchStrategy[Any],
    *,
    current: st.SearchStrategy[Any] | None = None,
    identity: Any = _UNSET,
    commutative: bool = True,
    max_batch: int = 4,
    max_examples: int = 100,
) -> list[Violation]:
    """Check the laws a reducer needs; return one violation per broken law, each with its
    minimal counterexample in ``example``.

    Laws (rule names):

    * ``reducer:order`` (with ``commutative``): folding a batch of 2..``max_batch`` writes onto
      a current value gives the same result in every order of the writes;
    * ``reducer:identity`` (when ``identity`` is given, or the reducer was made with
      ``Reducer.with_identity``): ``fn(identity, x) == x`` and ``fn(x, identity) == x``;
    * ``reducer:json``: every result has a JSON form that round-trips;
    * ``reducer:deterministic``: the same arguments give the same result (no hidden state);
    * ``reducer:raises``: the reducer raises on valid values.

    Args:
        reducer: the :class:`Reducer` (or its function).
        values: the updates nodes write (JSON values of the key's type).
        current: current values of the key (default: ``values``).
        identity: the identity element, if any.
        commutative: check ``reducer:order``.
        max_batch: the largest batch of writes folded.
        max_examples: the search budget per law.
    """
    fn = _fn(reducer)
    if identity is _UNSET and isinstance(reducer, Reducer) and reducer.has_identity:
        identity = reducer.identity
    if not isinstance(max_batch, int) or max_batch < 2:
        raise InvalidArgument(f"max_batch={max_batch!r} must be an int >= 2")
    json_values = values.map(to_json_value)
    currents = json_values if current is None else current.map(to_json_value)
    config = settings(max_examples=max_examples, database=None, deadline=None,
                      derandomize=True, suppress_health_check=list(HealthCheck))
    out: list[Violation] = []

    def search(rule: str, strategy: st.SearchStrategy[Any],
               broken: Callable[[Any], str | None]) -> None:
        def condition(example: Any) -> bool:
            try:
                return broken(example) is not None
            except Exception:  # each law reports only its own failure
                return False

        try:
            example = find(strategy, condition, settings=config)
        except (NoSuchExample, Unsatisfiable):
            return
        try:
            message = broken(example)
        except Exception as exc:
            message = f"raised {type(exc).__name__}: {exc}"
        out.append(Violation(rule, None, f"{message} (minimal example: {example!r})",
                             example=example))

    def raises(example: tuple[Any, list[Any]]) -> str | None:
        cur, writes = example
        try:
            _fold(fn, cur, writes)
        except NotJSONError:
            return None  # reported as reducer:json
        except Exception as exc:
            return f"fold({cur!r}, {writes!r}) raised {type(exc).__name__}: {exc}"
        return None

    batches = st.tuples(currents, st.lists(json_values, min_size=1, max_size=max_batch))
    search("reducer:raises", batches, raises)

    def not_json(example: tuple[Any, Any]) -> str | None:
        cur, w = example
        try:
            result = fn(jcopy(cur), jcopy(w))
        except Exception:
            return None
        try:
            value = to_json_value(result)
        except NotJSONError as exc:
            return f"fn({cur!r}, {w!r}) returned {result!r}, which has no JSON form ({exc})"
        if json.loads(json.dumps(value)) != value:
            return f"fn({cur!r}, {w!r}) returned {result!r}, which does not round-trip via JSON"
        return None

    search("reducer:json", st.tuples(currents, json_values), not_json)

    def nondeterministic(example: tuple[Any, Any]) -> str | None:
        cur, w = example
        try:
            first = _key(to_json_value(fn(jcopy(cur), jcopy(w))))
            second = _key(to_json_value(fn(jcopy(cur), jcopy(w))))
        except Exception:
            return None
        if first != second:
            return f"fn({cur!r}, {w!r}) gave {first} and then {second}"
        return None

    search("reducer:deterministic", st.tuples(currents, json_values), nondeterministic)

    if commutative:
        def order_dependent(example: tuple[Any, list[Any]]) -> str | None:
            cur, writes = example
            try:
                base = _key(_fold(fn, cur, writes))
                for perm in itertools.permutations(range(len(writes))):
                    other = _key(_fold(fn, cur, [writes[i] for i in perm]))
                    if other != base:
                        order = [writes[i] for i in perm]
                        return (f"folding {writes!r} onto {cur!r} gives {base}, but in the order "
                                f"{order!r} gives {other}: the merged value depends on the "
                                "order of the batch's writes (declaration order)")
            except Exception:
                return None
            return None

        search("reducer:order",
               st.tuples(currents, st.lists(json_values, min_size=2, max_size=max_batch)),
               order_dependent)

    if identity is not _UNSET:
        e = to_json_value(identity)

        def not_identity(x: Any) -> str | None:
            try:
                left = _key(to_json_value(fn(jcopy(e), jcopy(x))))
                right = _key(to_json_value(fn(jcopy(x), jcopy(e))))
            except Exception:
                return None
            if left != _key(x):
                return f"fn(identity={e!r}, {x!r}) = {left}, not {_key(x)}"
            if right != _key(x):
                return f"fn({x!r}, identity={e!r}) = {right}, not {_key(x)}"
            return None

        search("reducer:identity", json_values, not_identity)
    return out


def assert_reducer_laws(
    reducer: Reducer | Callable[[Any, Any], Any], values: st.SearchStrategy[Any], **kwargs: Any
) -> None:
    """:func:`check_reducer_laws`, raising ``AssertionError`` that lists each broken law."""
    broken = check_reducer_laws(reducer, values, **kwargs)
    if broken:
        raise AssertionError("reducer laws broken:\n" + "\n".join(f"- {v}" for v in broken))
