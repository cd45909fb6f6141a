"""A leg's last commit that releases its claim (``commit(..., release=True)``,
``StoreFeatures.folded_claims``): the release rides in the commit's own statement (or its
transaction), a round trip fewer a leg (issue 29)."""

from __future__ import annotations

from typing import Any

from ._claims import RELEASE
from ._conn import Cursor

__all__ = ["release_in", "releasing"]

_RELEASE_CTE = (", rel AS (UPDATE claims SET run_id = NULL, expires_us = NULL, ttl = NULL "
                "WHERE thread_id = %s AND token = %s AND run_id IS NOT NULL "
                "AND EXISTS (SELECT 1 FROM fence WHERE ok))")
"""The release a leg's last commit carries (``commit(..., release=True)``): it frees the
claim row when the commit's fence held and it wrote (the ``fence`` row's ``ok``), in the
same statement; the commit's answer is the same (the CTE's update is not seen by the
statement's reads)."""

_RELEASING: dict[str, str] = {}


def releasing(sql: str, params: list[Any], thread_id: str, token: int, answer: str
              ) -> tuple[str, list[Any]]:
    """A fenced commit statement of :mod:`._commit` (``sql`` with ``params``) that also
    releases the claim ``token`` on ``thread_id`` when it writes: :data:`_RELEASE_CTE` after
    its last CTE, before its final ``SELECT`` (``answer``, which takes no parameter), its two
    parameters last."""
    found = _RELEASING.get(sql)
    if found is None:
        at = sql.rindex(answer)
        found = _RELEASING[sql] = sql[:at] + _RELEASE_CTE + sql[at:]
    return found, [*params, thread_id, token]


async def release_in(cur: Cursor, thread_id: str, token: int) -> None:
    """Release the claim ``token`` inside a commit's transaction (its row share-locked by
    the transaction, the token checked): the transaction path of ``commit(release=True)``."""
    await cur.execute(RELEASE, (thread_id, token))
