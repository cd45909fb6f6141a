"""Judging the effect ledger (``record_effect``) of a checker's runs.

Three rules, shared by the whole-run checkers:

* an effect recorded by a node declared ``pure`` or ``read`` is a finding: the runtime re-runs
  such nodes freely (on resume, on recovery), so an effect there is unprotected — the node
  must be declared ``write`` or ``external`` (:func:`undeclared_effects`);
* in one run, each ``(name, key)`` happens once: a ``Retry`` attempt repeating one is named
  (:func:`repeated_effects`);
* after a crash and recovery, a repeat is told apart by the checkpoint the recovery resumed
  from: the re-run of a task that completed before the crash but that no acknowledged
  checkpoint recorded is the documented *at-least-once window*; the same key recorded again
  by a task that checkpoint covers, or by another task, is a *real duplicate*
  (:func:`recovered_effects`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from typing import Any

from ..._graph._effects import Effect
from ._legs import Violation

__all__ = ["recovered_effects", "repeated_effects", "undeclared_effects"]

UNPROTECTED = ("pure", "read")
"""Effect classes the runtime re-runs without a second thought."""


def undeclared_effects(got: list[Effect], declared: Mapping[str, str], where: str,
                       example: Any = None) -> list[Violation]:
    """An effect recorded in a node declared ``pure``/``read`` (once per node and effect),
    unless it happened inside a recorded tool call (replayed, not repeated, on a re-run)."""
    out: list[Violation] = []
    seen: set[tuple[str, str]] = set()
    for e in got:
        effect = declared.get(e.node or "")
        if e.node is None or effect not in UNPROTECTED or (e.node, e.name) in seen \
                or e.tool is not None:
            continue
        seen.add((e.node, e.name))
        out.append(Violation(
            "effects", None, f"{where}: {effect} node {e.node!r} recorded effect {e.name!r} "
            f"(key {e.key}); a {effect} node is re-run freely (on resume, on recovery), so its "
            "effect is unprotected: declare it effect='external' (or 'write'), or make it in a "
            "call of an external tool (ctx.call_tool)",
            example=example))
    return out


def repeated_effects(got: list[Effect], where: str, example: Any = None) -> list[Violation]:
    """Each ``(name, key)`` once in one run; ``Retry`` attempts that repeated it are named."""
    out: list[Violation] = []
    for (name, key), n in Counter(e.identity for e in got).items():
        if n > 1:
            out.append(_twice(got, name, key, n, where, example))
    return out


def recovered_effects(got: list[Effect], want: list[Effect], where: str, example: Any, *,
                      window: Collection[str], allow_window: bool) -> list[Violation]:
    """After a crash and recovery: every effect of the fault-free run happened, once.

    ``window``: the tasks that completed before the crash and that no acknowledged checkpoint
    recorded (recovery re-ran them). A repeat by one of them is the at-least-once window:
    allowed with ``allow_window`` (``strict_effects``), else reported as such, with the fix.
    Any other repeat is a real duplicate.
    """
    out: list[Violation] = []
    counts = Counter(e.identity for e in got)
    for (name, key), n in counts.items():
        if n < 2:
            continue
        mine = [e for e in got if e.identity == (name, key)]
        tasks = Counter(e.task_id for e in mine)
        in_window = sum(k - 1 for t, k in tasks.items() if t in window and k > 1)
        duplicates = n - 1 - in_window
        if duplicates > 0:
            out.append(_twice(got, name, key, n, where, example,
                              "; a real duplicate: recorded again although the checkpoint "
                              "recovery resumed from covers it (or by another task)"))
        elif not allow_window:
            out.append(_twice(got, name, key, n, where, example,
                              "; repeated by the re-run of a task no acknowledged checkpoint "
                              "recorded when the process died (the at-least-once window): make "
                              "the effect idempotent (an idempotency key the re-run keeps)"))
    missing = sorted({e.identity for e in want} - set(counts))
    for name, key in missing:
        out.append(Violation("effects", None, f"{where}: effect {name!r} (key {key}) "
                             "never happened; without the crash it does", example=example))
    return out


def _twice(got: list[Effect], name: str, key: str, n: int, where: str, example: Any,
           why: str = "") -> Violation:
    attempts = sorted({e.attempt for e in got if e.identity == (name, key)
                       and e.attempt is not None})
    retried = (" (Retry attempts " + ", ".join(map(str, attempts)) + " each did it)"
               if len(attempts) > 1 else "")
    return Violation("effects", None, f"{where}: effect {name!r} (key {key}) happened {n} "
                     f"times; it must happen once{retried}{why}", example=example)
