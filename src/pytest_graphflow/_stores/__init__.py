"""Checkpoint stores: the protocol, its backends, claims and injected faults.

At the top: the ``CheckpointStore`` protocol (``_protocol``), the ``StoreFeatures`` a store
declares (``_features``, the only thing the engine reads about a store), the default
``InMemoryCheckpointStore`` (``_memory``, ``_default``), ``FaultPlan`` (``_plan``) and the
rules every store shares: claims and fencing (``_claims``), thread deletion (``_deletion``),
waiting runs (``_waiting``), argument checks (``_args``), the JSON wire format (``_wire``)
and ``with`` support (``_closing``). The backends are subpackages: ``sqlite/``,
``postgres/`` and ``faults/`` (``FaultyStore``, a wrapper that injects failures into any
store). The engine imports only the top's protocol and rules, never a subpackage.

May import ``_records``, ``_time`` and :mod:`pytest_graphflow.errors`; a store never knows
about graphs or the run loop.
"""
