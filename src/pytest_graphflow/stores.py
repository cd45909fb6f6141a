"""The public contract for store authors: the protocols, the features a store declares, and
the shared rules the built-in stores keep, for a new backend to reuse.

A store implements :class:`CheckpointStore` (seven async methods) and declares what else it
supports in one frozen :class:`StoreFeatures` value::

    from pytest_graphflow.stores import StoreFeatures

    class MyStore:
        features = StoreFeatures(artifacts=True)
        ...

The runtime reads :func:`features_of` once per store and uses a capability only when it is
declared; a store that declares nothing gets the features its methods show.

The rules decide what a store with claims, commits or thread deletion answers, so a new
backend agrees with the built-in ones on every answer and error: read the rows in the write
transaction, ask the rule, write its answer in the same transaction (see
:class:`ClaimingStore` and :class:`DeletingStore`).
"""

from __future__ import annotations

from ._exports import show_public as _show_public
from ._stores._claims import (
    DEFAULT_CLAIM_TTL,
    Claim,
    artifact_bytes,
    check_after_seq,
    check_before_seq,
    check_commit,
    check_keep_last,
    check_lineage,
    check_token,
    check_ttl,
    current_or_stale,
    event_seq,
    events_compacted,
    fence_token,
    fork_target_exists,
    normalise_event,
    normalise_run_record,
    renewed,
    take_claim,
    utc_now,
)
from ._stores._deletion import DeletedThread, check_deletable, check_delete_args
from ._stores._features import StoreFeatures, features_of
from ._stores._protocol import (
    CheckpointStore,
    ClaimingStore,
    DeletingStore,
    Fence,
    checks_fencing,
)
from ._stores._waiting import Waiting, check_waiting, waiting_row

__all__ = [
    "DEFAULT_CLAIM_TTL",
    "CheckpointStore",
    "Claim",
    "ClaimingStore",
    "DeletedThread",
    "DeletingStore",
    "Fence",
    "StoreFeatures",
    "Waiting",
    "artifact_bytes",
    "check_after_seq",
    "check_before_seq",
    "check_commit",
    "check_deletable",
    "check_delete_args",
    "check_keep_last",
    "check_lineage",
    "check_token",
    "check_ttl",
    "check_waiting",
    "checks_fencing",
    "current_or_stale",
    "event_seq",
    "events_compacted",
    "features_of",
    "fence_token",
    "fork_target_exists",
    "normalise_event",
    "normalise_run_record",
    "renewed",
    "take_claim",
    "utc_now",
    "waiting_row",
]

# reprs and pickles name this module, not the private one that defines each name
_show_public(__name__, globals(), __all__)
