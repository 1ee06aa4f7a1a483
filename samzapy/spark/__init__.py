"""The PySpark side of samzapy: DataFrames written to Kafka topics in samzapy's framed format,
each Spark partition one upstream task, so a samzapy job reconciles the whole batch.

The only package of samzapy that imports pyspark. ``write_stream`` writes (``create_topic``
creates the topic first, when needed); ``local_session`` builds a SparkSession with Spark's
Kafka connector (fetched by ``scripts/spark.sh fetch``).
"""

from samzapy.spark.errors import SparkWriteError
from samzapy.spark.producer import create_topic
from samzapy.spark.session import kafka_connector_jars, local_session
from samzapy.spark.writer import DEFAULT_METHOD, Method, WriteSummary, write_stream

__all__ = [
    "DEFAULT_METHOD",
    "Method",
    "SparkWriteError",
    "WriteSummary",
    "create_topic",
    "kafka_connector_jars",
    "local_session",
    "write_stream",
]
