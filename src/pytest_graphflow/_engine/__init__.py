"""The run loop: how a compiled graph runs against a store on a clock.

Owns ``GraphRuntime`` (the public entry), the runner and its parts (batches, tasks, halts,
merges of patches), results, traces and streams. May import ``_graph``, ``_stores``,
``_time``, ``_records`` and :mod:`pytest_graphflow.errors` — never the plugin, the property
tools or the CLI. Of ``_stores`` it knows only the seam: the protocol, ``StoreFeatures``
(read once per runtime, never the store's attributes), the default-store factory and the
shared rules — never a concrete store.
"""
