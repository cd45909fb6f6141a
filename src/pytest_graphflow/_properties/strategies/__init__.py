"""Generated graphs: ``GraphSpec``, the Hypothesis strategies, node instrumentation, profiles.

Owns the specs (``_genspec``) and strategies (``_strategies``) behind
:mod:`pytest_graphflow.strategies`, the node wrappers that log calls and draw start orders
(``_instrument``) and the Hypothesis settings profiles (``_profiles``). May import the layers
below ``_properties``; never another room (``runs`` imports this one).
"""
