"""The kafka system: Kafka topics read and written through aiokafka.

The only package of samzapy that imports aiokafka; everything it raises is a samzapy error.
"""

from samzapy.system.kafka.admin import KafkaSystemAdmin
from samzapy.system.kafka.consumer import KafkaSystemConsumer
from samzapy.system.kafka.factory import KafkaSystemFactory
from samzapy.system.kafka.producer import KafkaSystemProducer
from samzapy.system.kafka.settings import KafkaSettings, kafka_settings

__all__ = [
    "KafkaSettings",
    "KafkaSystemAdmin",
    "KafkaSystemConsumer",
    "KafkaSystemFactory",
    "KafkaSystemProducer",
    "kafka_settings",
]
