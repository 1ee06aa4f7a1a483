"""System ports, serdes, the partitioner and the embedded systems (memory, file)."""
