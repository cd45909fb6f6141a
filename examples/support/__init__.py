"""A support-ticket agent: the app the example tests exercise."""
