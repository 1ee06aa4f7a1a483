"""A local SparkSession that can write to Kafka: the connector's jars and small, loopback settings.

Spark's Kafka connector (spark-sql-kafka-0-10 and what pyspark lacks of its dependencies) is not
part of pyspark. ``kafka_connector_jars`` finds its jars in the cache that ``scripts/spark.sh
fetch`` fills from Maven Central (``$SAMZAPY_CACHE/spark-kafka-<pyspark version>/``, by default
``~/.cache/samzapy``) and runs the script when the cache is missing. ``local_session`` builds a
SparkSession for a small machine that listens on 127.0.0.1 only and has those jars.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

from samzapy.spark.errors import SparkWriteError

#: ``scripts/spark.sh`` of the source tree this package runs from.
FETCH_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "spark.sh"
#: A cold fetch downloads about 10 MB with Maven.
FETCH_TIMEOUT_S = 300
LOOPBACK = "127.0.0.1"


def cache_dir() -> Path:
    """``$SAMZAPY_CACHE``, or ``~/.cache/samzapy``."""
    given = os.environ.get("SAMZAPY_CACHE")
    return Path(given) if given else Path.home() / ".cache" / "samzapy"


def kafka_connector_jars(spark_version: str | None = None) -> list[str]:
    """The jars of Spark's Kafka connector for ``spark_version`` (default: pyspark's own),
    fetched with ``scripts/spark.sh fetch`` when the cache does not hold them yet."""
    version = spark_version or pyspark.__version__
    lib = cache_dir() / f"spark-kafka-{version}"
    if not (lib / ".complete").is_file():
        _fetch(version)
    jars = sorted(str(path) for path in lib.glob("*.jar"))
    connector = f"spark-sql-kafka-0-10_2.13-{version}.jar"
    if not any(Path(jar).name == connector for jar in jars):
        raise SparkWriteError(f"{lib} is marked complete but holds no {connector}; delete it")
    return jars


def _fetch(version: str) -> None:
    if not FETCH_SCRIPT.is_file():
        raise SparkWriteError(
            f"Spark's Kafka connector {version} is not in {cache_dir()} and {FETCH_SCRIPT} "
            "is missing (samzapy is not running from its source tree); run scripts/spark.sh "
            "fetch from a samzapy checkout with the same SAMZAPY_CACHE"
        )
    done = subprocess.run(
        [str(FETCH_SCRIPT), "fetch"],
        env={**os.environ, "SPARK_VERSION": version},
        capture_output=True,
        text=True,
        timeout=FETCH_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise SparkWriteError(
            f"cannot fetch Spark's Kafka connector {version} with {FETCH_SCRIPT} fetch "
            f"(exit {done.returncode}):\n{done.stdout}{done.stderr}"
        )


def local_session(
    app_name: str = "samzapy-spark",
    *,
    master: str = "local[2]",
    shuffle_partitions: int = 4,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession (``getOrCreate``) with Spark's Kafka connector, bound to 127.0.0.1.

    Defaults suit a 2-core machine: ``local[2]``, 4 shuffle partitions, no web UI, no
    progress bar, UTC session time zone (``to_json`` writes timestamps in it). The Python
    workers run this interpreter, so they import the same samzapy. ``conf`` overrides any
    of these settings. A session already running in this process is returned as it is: the
    settings Spark fixes at start-up (``spark.jars`` among them) are then its own.
    """
    # The JVM reads SPARK_LOCAL_IP when it starts; the driver settings below cover the rest.
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.jars": ",".join(kafka_connector_jars()),
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        **(conf or {}),
    }
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


__all__ = ["FETCH_SCRIPT", "cache_dir", "kafka_connector_jars", "local_session"]
