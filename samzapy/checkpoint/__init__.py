"""Checkpoints: the port, offset bookkeeping, and the memory, file and stream managers."""
