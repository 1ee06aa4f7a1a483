"""The error samzapy.spark raises on purpose."""

from __future__ import annotations

import re

from samzapy.api.errors import ConfigError, SamzapyError, StreamSystemError


class SparkWriteError(SamzapyError):
    """A DataFrame cannot be written as asked: a missing or null column, a missing topic, a
    connector that cannot be fetched, or a failed write. Raised before anything is written
    whenever the problem can be seen beforehand; ``column`` names the column at fault."""

    def __init__(self, message: str, *, column: str | None = None) -> None:
        super().__init__(message)
        self.column = column


#: The Kafka client's hint naming the job-file keys of the system it ran as (``systems.spark.*``),
#: which a Spark job does not have.
_JOB_FILE_HINT = re.compile(r" \(system 'spark'; [^()]*\)")


def client_error(exc: StreamSystemError) -> str:
    """The Kafka client's error, its hint about job-file keys replaced by the arguments a
    Spark job gives: ``bootstrap_servers`` (and ``options``)."""
    text, hinted = _JOB_FILE_HINT.subn("", str(exc))
    return f"{text} (check bootstrap_servers)" if hinted else text


#: The keys of the Kafka client's configuration that stand for write_stream's arguments.
_OPTION_KEY = re.compile(r"systems\.spark\.producer\.([A-Za-z0-9_.-]+)")
_OTHER_OPTION = re.compile(r"\bproducer\.(?=[a-z])")
_SERVERS_HINT = " (or set consumer.bootstrap.servers and producer.bootstrap.servers)"


def options_error(exc: ConfigError) -> str:
    """The Kafka client's configuration error in the arguments of ``write_stream``:
    ``kafka_options['linger.ms']`` for ``systems.spark.producer.linger.ms``,
    ``bootstrap_servers`` for ``systems.spark.bootstrap.servers``."""
    text = str(exc).replace(_SERVERS_HINT, "")
    text = text.replace("systems.spark.bootstrap.servers", "bootstrap_servers")
    text = _OPTION_KEY.sub(lambda match: f"kafka_options[{match.group(1)!r}]", text)
    return _OTHER_OPTION.sub("", text)


__all__ = ["SparkWriteError", "client_error", "options_error"]
