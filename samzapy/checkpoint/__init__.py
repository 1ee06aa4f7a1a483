"""Checkpoints: the port, offset bookkeeping, and the memory and file managers."""
