"""Assertions over event streams (SPEC §8): :func:`assert_events` and its pattern language.

A pattern is a list of items, or one multi-line string with an item per non-empty line
(lines starting with ``#`` are comments). Each item matches one event, except gaps and groups:

=================================  ==========================================================
``"node_end:a"``                   an event of a type; the part after ``:`` is the ``node``
                                   (``node_start``, ``node_end``, ``interrupt``, ``error``,
                                   ``checkpoint_saved``), ``"*"`` for any
``"node_start"``                   any event of that type
``"edge_transition:a->b"``         an edge; either end may be ``*``; ``END`` means ``__end__``
``"run_end:completed"``            ``run_end`` with that ``status``
``"run_start:checkout"``           ``run_start`` of that ``graph_id``
``"custom:progress"``              ``custom`` on that ``channel``
``"*"``                            any one event
``"..."`` (or ``...``)             a gap: any number of events, possibly none
``{"node_end:a", "node_end:b"}``   a group: those events consecutively, in any order
``"{node_end:a, node_end:b}"``     the same group written as a string
``{"type": "node_end", ...}``      field matchers (below)
``"node_end:a replayed=True"``     a string item with trailing field matchers
``"error:x message~=.*boom.*"``    ``~=`` matches a regular expression (``fullmatch``)
an event                           exactly that event (``==``)
a callable                         a predicate on the event
=================================  ==========================================================

Field matchers compare an event's attribute with an expected value: a plain value (``==``;
``True``/``False`` only equal bools; a string also equals the JSON form of a non-string value,
so ``time="2025-01-01T00:00:00Z"`` works), a ``dict`` (partial match of its keys, recursively;
models compare by their fields), a ``list`` or ``tuple`` (same length, item by item), a ``type``
(``isinstance``), a compiled regex (``fullmatch`` on a string), a callable predicate, or any
object with its own ``__eq__`` (dirty-equals' ``IsInstance``, ``unittest.mock.ANY``). A predicate
or ``__eq__`` that raises counts as no match, so a pattern can scan events of every shape.
String values are Python or JSON literals (``3``, ``'a b'``, ``{'total': 3}``, ``true``); other
text is a plain string.

Without gaps a pattern must match the whole sequence; ``...`` at either end lets a prefix or a
suffix go unmatched. On a mismatch :class:`EventPatternMismatch` shows the pattern and the events
side by side and marks where they part.

:func:`format_events` (one compact line per event) and :func:`events_diff` (the first divergent
event of two sequences, in a window) are the renderings those messages use.
"""

from __future__ import annotations

from ._assert._patterns import (
    EventPatternError,
    match_elements,
    mismatch_message,
    parse_item,
    pattern_items,
)
from ._assert._repr import coerce_events, events_diff, format_event, format_events
from ._records._events import EventBase

__all__ = [
    "EventPatternError",
    "EventPatternMismatch",
    "assert_events",
    "events_diff",
    "format_event",
    "format_events",
]


class EventPatternMismatch(AssertionError):
    """Events did not match a pattern; the message shows both side by side.

    Attributes:
        pattern: the pattern items (a string pattern split into its lines).
        events: the events that were matched.
        position: the index of the first event after the longest matched prefix (equal to
            ``len(events)`` when the events ran out).
        pattern_index: the index of the pattern item expected there (equal to
            ``len(pattern)`` when the pattern ran out first).
    """

    def __init__(
        self,
        message: str,
        *,
        pattern: list[object],
        events: list[EventBase],
        position: int,
        pattern_index: int,
    ) -> None:
        super().__init__(message)
        self.pattern = pattern
        self.events = events
        self.position = position
        self.pattern_index = pattern_index


def assert_events(events: object, pattern: object) -> None:
    """Assert that ``events`` match ``pattern`` (the pattern language is in the module docs).

    Args:
        events: an iterable of events, or an object with ``.events`` (a ``Trace``).
        pattern: a list of items, or a string with one item per non-empty line.

    Raises:
        EventPatternMismatch: (an ``AssertionError``) when the events do not match; the
            message shows the pattern and the events side by side.
        EventPatternError: (a ``ValueError``) when the pattern is malformed.
        InvalidArgument: when ``events`` is not a sequence of events.

    Example::

        assert_events(trace, '''
            run_start
            ...
            {node_end:a, node_end:b}
            edge_transition:join->END
            ...
            run_end:completed
        ''')
    """
    __tracebackhide__ = True
    items = pattern_items(pattern)
    elements = [parse_item(item) for item in items]
    evs = coerce_events(events)
    failure = match_elements(elements, evs)
    if failure is not None:
        raise EventPatternMismatch(
            mismatch_message(elements, evs, failure),
            pattern=items,
            events=evs,
            position=failure.position,
            pattern_index=failure.pattern_index,
        )
