"""The error samzapy.spark raises on purpose."""

from __future__ import annotations

import re

from samzapy.api.errors import SamzapyError, StreamSystemError


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


__all__ = ["SparkWriteError", "client_error"]
