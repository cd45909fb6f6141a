"""Records: the data a run leaves behind, and the JSON rules they obey.

Owns the event models (``GraphEvent`` and its types), the ``Checkpoint`` record, JSON
normalisation and copying, fast model construction and id derivation. The bottom layer:
may import only :mod:`pytest_graphflow.errors`.
"""
