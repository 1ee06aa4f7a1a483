"""The in-memory system: a process-wide broker of list-backed streams, for tests and demos."""

from samzapy.system.inmemory.broker import InMemoryBroker, InMemoryPartition
from samzapy.system.inmemory.consumer import InMemorySystemConsumer
from samzapy.system.inmemory.factory import (
    InMemorySystemAdmin,
    InMemorySystemFactory,
    InMemorySystemProducer,
)

__all__ = [
    "InMemoryBroker",
    "InMemoryPartition",
    "InMemorySystemAdmin",
    "InMemorySystemConsumer",
    "InMemorySystemFactory",
    "InMemorySystemProducer",
]
