"""Local key-value stores: the engine port, the in-memory engine, serdes on top, the factories."""
