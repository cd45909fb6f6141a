"""A checkpoint's ``visited`` path in PostgreSQL, kept as path blocks (schema version 4,
issue 29: a checkpoint costs the same at step 10,000 as at step 10).

A row of ``checkpoints`` does not hold its whole path: its ``data`` JSON keeps only the last
few nodes (its *tail*, fewer than :data:`TAIL`), and ``path_chain``/``path_len`` name the rest,
the first ``path_len`` nodes of a *chain* of ``paths`` rows (``chain``, ``upto``: the chain's
length after the block, ``nodes``: the JSON array of the nodes the block adds). A chain is
written by one store object for one run, block after block, as the run's path grows: the
prefix is cut at a multiple of :data:`TAIL`, so only every ``TAIL``-th step writes a block,
and the block rides in the step's own statement (a CTE; a new chain takes its id from the
``path_chains`` sequence there and the statement answers it). Rows written any other way (a
``save``, a fork, a commit of several checkpoints, the transaction path) keep their whole
path in ``data`` with ``path_chain = 0``, as every row of schema version 3 does: a read
gives the same checkpoint either way. A read gathers the prefix in the same statement
(:data:`PREFIX`). ``prune`` and ``delete`` leave the blocks (later checkpoints share them);
``delete_thread`` deletes its runs' blocks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

from ..._records._checkpoint import Checkpoint
from ...errors import UnsupportedFormat
from .._wire import nodes_array

__all__ = ["PREFIX", "TAIL", "Path", "PathBlocks", "joined"]

TAIL = 16
"""A row keeps at most ``TAIL - 1`` visited nodes itself; its path's prefix is a chain's."""

PREFIX = ("(SELECT string_agg(substr(nodes, 2, length(nodes) - 2), ',' ORDER BY upto) "
          "FROM paths WHERE chain = path_chain AND upto <= path_len)")
"""A checkpoint row's prefix nodes, read in its own statement: the texts of its chain's
blocks up to ``path_len`` (their JSON arrays without brackets), comma-joined; ``NULL`` for
a row without a chain."""

_KEPT_RUNS = 256

Path = tuple[int, list[Any], list[Any]]
"""A checkpoint's path in the step's statement: the ``pa`` shape (0: no block, 1: a block
of its run's chain, 2: a new chain's first block), the block's parameters, the row's path
parameters (``path_chain``, ``path_len``; a new chain's id is the statement's)."""


_NAME_JSON: dict[str, str] = {}
"""A node name's JSON string, as :func:`~.._wire.nodes_array` writes it inside an array
(names seen in tails; at most :data:`_NAMES_KEPT`)."""

_NAMES_KEPT = 4096


def _tail(names: Sequence[str]) -> str:
    """``nodes_array(names)``, noting each name's JSON text when the array is written by
    ``to_json`` (a name with a lone surrogate is never noted: a tail holding one is written
    by ``nodes_array`` whole, as before)."""
    text = nodes_array(names)
    try:
        parts = [to_json(name).decode() for name in names]
    except (PydanticSerializationError, UnicodeError, ValueError):
        return text
    if len(_NAME_JSON) + len(parts) > _NAMES_KEPT:
        _NAME_JSON.clear()
    _NAME_JSON.update(zip(names, parts, strict=True))
    return text


class PathBlocks:
    """Where a store object's checkpoints keep their paths: the last chain it wrote for each
    run (a bounded number of runs), extended when the next checkpoint's path is the runtime's
    snapshot of the same append-only log (``snapshot() -> (log, n)``: known in O(1));
    any other path (a tuple, a resume, time travel) starts a new chain."""

    def __init__(self) -> None:
        # run -> (log or tuple, chain id, the chain's length)
        self._last: dict[str, tuple[Sequence[str], int, int]] = {}

    def place(self, run_id: str, visited: Any) -> tuple[Sequence[str], int, int, str, Path]:
        """``(nodes, chain, cut, tail, path)`` of a checkpoint whose path is ``visited``: its
        prefix is the first ``cut`` nodes of ``chain`` (0: none yet), ``tail`` the JSON array
        of the rest (``""`` when ``cut`` is 0 or there is none: the row keeps its whole
        path, or no tail), and ``path`` what the step's statement writes (a block, a new
        chain's first block, or nothing; :data:`Path`). ``nodes``: the path's log (the
        runtime's snapshot) or tuple, which :meth:`wrote` remembers. :meth:`shape`, then
        :meth:`block`."""
        nodes, cut, tail = self.shape(visited)
        chain, path = self.block(run_id, nodes, cut)
        return nodes, chain, cut, tail, path

    @staticmethod
    def shape(visited: Any) -> tuple[Sequence[str], int, str]:
        """``(nodes, cut, tail)`` of :meth:`place`: what the path alone decides (the row's
        tail), whatever chains the store wrote."""
        nodes: Sequence[str]
        try:
            nodes, n = visited.snapshot()
        except AttributeError:
            nodes = visited if type(visited) is tuple else tuple(visited)
            n = len(nodes)
        cut = n - n % TAIL
        tail = ""
        if 0 < cut < n:  # nodes_array(nodes[cut:n]) from its names' JSON texts, no call a step
            tail = "["
            for name in nodes[cut:n]:
                try:
                    tail += _NAME_JSON[name] + ","
                except KeyError:
                    tail = _tail(nodes[cut:n])
                    break
            else:
                tail = tail[:-1] + "]"
        return nodes, cut, tail

    def block(self, run_id: str, nodes: Sequence[str], cut: int) -> tuple[int, Path]:
        """``(chain, path)`` of :meth:`place` for the path ``nodes`` cut at ``cut``
        (:meth:`shape`'s): by the chain the store last wrote for ``run_id``."""
        if cut == 0:
            return 0, (0, [], [0, 0])
        try:
            last = self._last[run_id]
        except KeyError:
            last = None
        if last is not None and last[2] <= cut and (
                last[0] is nodes or (type(nodes) is tuple and type(last[0]) is tuple
                                     and nodes[:last[2]] == last[0][:last[2]])):
            _, chain, upto = last
            if upto == cut:
                return chain, (0, [], [chain, cut])
            return chain, (1, [chain, cut, run_id, nodes_array(nodes[upto:cut])], [chain, cut])
        return 0, (2, [cut, run_id, nodes_array(nodes[:cut])], [cut])

    def seen(self, run_id: str) -> object:
        """What :meth:`block` places ``run_id``'s next path by (the chain last written for
        it): the same object until :meth:`wrote` or :meth:`forget` changes it, so a path
        placed ahead is still right while it is."""
        return self._last.get(run_id)

    def wrote(self, run_id: str, log: Sequence[str], chain: int, cut: int) -> None:
        """A statement placed by :meth:`place` was committed: ``chain`` ends at ``cut``."""
        if chain == 0:
            return
        self._last.pop(run_id, None)
        self._last[run_id] = (log, chain, cut)
        if len(self._last) > _KEPT_RUNS:
            del self._last[next(iter(self._last))]

    def forget(self, run_id: str) -> None:
        """Drop the run's chain (a statement that may or may not have written it failed)."""
        self._last.pop(run_id, None)


def joined(cp: Checkpoint, length: int, prefix: str | None) -> Checkpoint:
    """``cp`` (read from a row's ``data``) with the row's path prefix (:data:`PREFIX`'s
    text, ``length`` nodes) before its ``visited`` tail.

    Raises:
        UnsupportedFormat: the prefix is not ``length`` nodes (a damaged store).
    """
    nodes: list[str] = json.loads(f"[{prefix}]") if prefix else []
    if len(nodes) != length:
        raise UnsupportedFormat(
            f"checkpoint {cp.id!r}: its stored path prefix has {len(nodes)} nodes, the row "
            f"says {length} (a damaged store: delete the checkpoint, or restore a backup)")
    cp.visited = (*nodes, *cp.visited)
    return cp
