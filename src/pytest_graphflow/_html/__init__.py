"""The HTML page of a run (``graphflow html``, ``--graphflow-report=html:DIR``).

One self-contained file: inline CSS and JS, the graph and the timeline pre-rendered as SVG,
no request to anything (its Content-Security-Policy allows none). :mod:`._model` reads a
run's events into what the page shows, :mod:`._diff` compares states, :mod:`._graph_svg`
draws the graph, :mod:`._timeline` the task lanes, :mod:`._page` assembles a run's page and
:mod:`._pair` a page of two runs that should have been the same.

May import ``_engine`` (folding patches), ``_graph`` (the diagram's edges), ``_records`` and
:mod:`pytest_graphflow.errors`; the plugin and the CLI import it.
"""
