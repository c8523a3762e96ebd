"""The registry's bytes: the root and its backends, ledger, segments, layers, checkpoints."""
