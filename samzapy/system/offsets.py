"""Offsets of the systems whose offsets count the records of a partition from 0 (kafka,
file, memory): checking one a consumer is asked to start from (``integer_offset``)."""

from __future__ import annotations

from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStreamPartition


def integer_offset(ssp: SystemStreamPartition, offset: str, what: str) -> int:
    """``offset`` as the integer >= 0 it must be on systems whose offsets count from 0;
    ``what`` names them in the error ("Kafka offsets", "file offsets are line numbers")."""
    try:
        position = int(offset)
    except (TypeError, ValueError):
        position = -1
    if position < 0:
        raise StreamSystemError(f"cannot read {ssp} from offset {offset!r}: {what} >= 0")
    return position


__all__ = ["integer_offset"]
