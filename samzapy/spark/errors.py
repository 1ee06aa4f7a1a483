"""The error samzapy.spark raises on purpose."""

from __future__ import annotations

from samzapy.api.errors import SamzapyError


class SparkWriteError(SamzapyError):
    """A DataFrame cannot be written as asked: a missing or null column, a missing topic, a
    connector that cannot be fetched, or a failed write. Raised before anything is written
    whenever the problem can be seen beforehand; ``column`` names the column at fault."""

    def __init__(self, message: str, *, column: str | None = None) -> None:
        super().__init__(message)
        self.column = column


__all__ = ["SparkWriteError"]
