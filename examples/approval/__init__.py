"""An approval flow: the graph the example tests exercise."""
