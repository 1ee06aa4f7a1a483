"""The kafka system: Kafka topics read and written through aiokafka.

The only package of samzapy that imports aiokafka; everything it raises is a samzapy error.
Its names are imported on first use: the logging set-up of every job reads ``client_logs``,
and a job that uses no Kafka system should not pay for loading aiokafka (about 0.1 s).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from samzapy.system.kafka.admin import KafkaSystemAdmin
    from samzapy.system.kafka.consumer import KafkaSystemConsumer
    from samzapy.system.kafka.factory import KafkaSystemFactory
    from samzapy.system.kafka.producer import KafkaSystemProducer
    from samzapy.system.kafka.settings import KafkaSettings, kafka_settings

#: Each name's module in this package.
_MODULES = {
    "KafkaSettings": "settings",
    "KafkaSystemAdmin": "admin",
    "KafkaSystemConsumer": "consumer",
    "KafkaSystemFactory": "factory",
    "KafkaSystemProducer": "producer",
    "kafka_settings": "settings",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "KafkaSettings",
    "KafkaSystemAdmin",
    "KafkaSystemConsumer",
    "KafkaSystemFactory",
    "KafkaSystemProducer",
    "kafka_settings",
]
