"""Checkpoint stores: the protocol and its backends."""
