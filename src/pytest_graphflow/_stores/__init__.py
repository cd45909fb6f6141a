"""Checkpoint stores: the protocol, its backends, claims and injected faults.

Owns the ``CheckpointStore`` protocol, ``InMemoryCheckpointStore``, ``SQLiteCheckpointStore``,
the claim rules they share, and ``FaultyStore`` (a wrapper that injects failures into any
store). Each store declares its optional capabilities in one ``StoreFeatures`` value
(``_features``), the only thing the engine reads about a store. May import ``_records``,
``_time`` and :mod:`pytest_graphflow.errors`; a store never knows about graphs or the run
loop.
"""
