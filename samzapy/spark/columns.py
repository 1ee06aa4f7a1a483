"""What a DataFrame's rows become on Kafka, and the check of the rows before any is written.

``RecordColumns`` turns the columns a write names into Spark expressions evaluated in the JVM,
so both write methods send the same bytes:

- key: the key column cast to a Spark string, as UTF-8 (``123``, ``abc``): the bytes a
  samzapy job's send of the same value as a key uses, so both pick one partition (a boolean
  or floating-point column, whose text differs, is refused);
- value: ``to_json`` of a struct of the value columns (nulls kept as JSON null; timestamps in
  the session time zone), as UTF-8; for a framed write prefixed by the user-message type byte
  and, with a timestamp column, the row's event time (``control/wire.py``'s EVENT_TIME flag);
- packed, for ``method="producer"``: key length, key and value in one binary, which reaches
  a Python worker as plain bytes (no Row objects);
- event time: the timestamp column in milliseconds since the epoch (a TimestampType column; a
  TimestampNTZType column read as UTC, whatever the session's time zone, as its JSON text
  carries no zone either; or an integral column already in epoch milliseconds).

``scan`` runs one Spark job over the DataFrame that counts rows, null keys, null timestamps and
NaN or infinite values of floating-point value columns and takes the maximum event time, per
Spark partition; any of them is an error there, before anything is written (JSON has no NaN
or infinity: Spark would write the strings ``"NaN"`` and ``"Infinity"``, which a job reads as
text, where samzapy's ``json`` serde refuses to encode them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf
from pyspark.sql import types as st

from samzapy.control.wire import frame, with_event_time
from samzapy.spark.errors import SparkWriteError

_INTEGRAL = (st.ByteType, st.ShortType, st.IntegerType, st.LongType)
_TIMESTAMP = (st.TimestampType, st.TimestampNTZType)
_FLOATING = (st.FloatType, st.DoubleType)
#: Milliseconds from the epoch to a TimestampNTZ value, as if in UTC: a difference of two
#: zoneless times, which no session time zone moves (a cast to TIMESTAMP would read it in the
#: session's zone).
_NTZ_MILLIS = "timestampdiff(MILLISECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {})"
#: Key types whose text in Spark (``cast("string")``) is not ``str()`` of the value in Python.
_TEXT_DIFFERS = (st.BooleanType, st.FloatType, st.DoubleType)


def _quoted(name: str) -> str:
    """``name`` as a SQL identifier: ``a.b`` would be the field ``b`` of a struct ``a``, and a
    backtick in a name is a syntax error unquoted."""
    return "`" + name.replace("`", "``") + "`"


def _column(name: str) -> Column:
    """The top-level column ``name`` as named."""
    return sf.col(_quoted(name))


@dataclass(frozen=True)
class PartitionScan:
    """One Spark partition as ``scan`` found it."""

    rows: int
    #: The greatest event time (ms) among its rows; None without a timestamp column or rows.
    max_event_time: int | None


@dataclass(frozen=True)
class RecordColumns:
    """The columns of one write, checked against the DataFrame's schema."""

    df: DataFrame
    key_column: str
    timestamp_column: str | None
    value_columns: tuple[str, ...]

    @classmethod
    def of(
        cls,
        df: DataFrame,
        *,
        key_column: str,
        timestamp_column: str | None = None,
        value_columns: Sequence[str] | None = None,
    ) -> RecordColumns:
        """Check that every named column is exactly one column of ``df`` (and the timestamp's
        type)."""
        fields = {field.name: field for field in df.schema.fields}
        if isinstance(value_columns, str):
            raise SparkWriteError(
                f"value_columns must be a sequence of column names, got the string "
                f"{value_columns!r} (write [{value_columns!r}] for one column)"
            )
        values = tuple(df.columns if value_columns is None else value_columns)
        if not values:
            raise SparkWriteError("value_columns is empty: name at least one column")
        named = [("key", key_column)] + [("value", name) for name in values]
        if timestamp_column is not None:
            named.append(("timestamp", timestamp_column))
        for role, name in named:
            if name not in fields:
                raise SparkWriteError(
                    f"the {role} column {name!r} is not in the DataFrame; its columns are "
                    f"{sorted(fields)}",
                    column=name,
                )
            if (count := df.columns.count(name)) > 1:
                raise SparkWriteError(
                    f"the {role} column {name!r} names {count} columns of the DataFrame (a "
                    "join's two sides, say); rename or drop all but one",
                    column=name,
                )
        key_kind = fields[key_column].dataType
        if isinstance(key_kind, _TEXT_DIFFERS):
            raise SparkWriteError(
                f"the key column {key_column!r} is {key_kind.simpleString()}: Spark writes a "
                "key as its own text of the value (true, 1.0E20), which is not Python's (True, "
                "1e+20), so a samzapy job sending the same value as a key would pick another "
                "partition; cast the column to the string you want, or key by a string or "
                "integer column",
                column=key_column,
            )
        if timestamp_column is not None:
            kind = fields[timestamp_column].dataType
            if not isinstance(kind, _TIMESTAMP + _INTEGRAL):
                raise SparkWriteError(
                    f"the timestamp column {timestamp_column!r} must be a timestamp or an "
                    f"integer of epoch milliseconds, got {kind.simpleString()}",
                    column=timestamp_column,
                )
        return cls(df, key_column, timestamp_column, values)

    # -- expressions --------------------------------------------------------------------------

    def key(self) -> Column:
        """The record key, a Spark string (the Kafka sink and Python encode it as UTF-8)."""
        return _column(self.key_column).cast("string")

    def json_value(self) -> Column:
        """The value columns as one JSON object, a Spark string."""
        columns = [_column(name) for name in self.value_columns]
        return sf.to_json(sf.struct(*columns), {"ignoreNullFields": "false"})

    def framed_value(self) -> Column:
        """``frame(json bytes)``: the user-message type byte, then the JSON's UTF-8 bytes;
        with a timestamp column, ``with_event_time``'s: the type byte flagged, then the event
        time (int64, big-endian), then the JSON."""
        body = self.json_value().cast("binary")
        if self.timestamp_column is None:
            return sf.concat(sf.lit(bytearray(frame(b""))), body)
        flagged = sf.lit(bytearray(with_event_time(frame(b""), 0)[:1]))
        # Java's %x of a negative long is its two's complement: 16 hex digits either way.
        event_time = sf.unhex(sf.format_string("%016x", self.event_time()))
        return sf.concat(flagged, event_time, body)

    def packed(self, *, framed: bool) -> Column:
        """One binary per row for a Python worker: the key's length (4 bytes, big-endian),
        the key, then the value (framed or not)."""
        key = self.key().cast("binary")
        value = self.framed_value() if framed else self.json_value().cast("binary")
        return sf.concat(sf.unhex(sf.format_string("%08x", sf.length(key))), key, value)

    def event_time(self) -> Column:
        """The event time in epoch milliseconds (a long), or a null literal without a column."""
        if self.timestamp_column is None:
            return sf.lit(None).cast("long")
        column = _column(self.timestamp_column)
        kind = self.df.schema[self.timestamp_column].dataType
        if isinstance(kind, st.TimestampNTZType):
            return sf.expr(_NTZ_MILLIS.format(_quoted(self.timestamp_column)))
        if isinstance(kind, st.TimestampType):
            return sf.unix_millis(column.cast("timestamp"))
        return column.cast("long")

    # -- the check ----------------------------------------------------------------------------

    def scan(self) -> dict[int, PartitionScan]:
        """Per Spark partition index (empty partitions absent): its rows and greatest event
        time. SparkWriteError when a key or timestamp is null, or a floating-point value
        column NaN or infinite, naming the column and count."""
        counted = {"key": _column(self.key_column).isNull()}
        if self.timestamp_column is not None:
            counted["timestamp"] = _column(self.timestamp_column).isNull()
        kinds = {field.name: field.dataType for field in self.df.schema.fields}
        floating = [name for name in self.value_columns if isinstance(kinds[name], _FLOATING)]
        for index, name in enumerate(floating):
            value = _column(name)
            counted[f"value{index}"] = sf.isnan(value) | value.isin(math.inf, -math.inf)
        flags = [sf.when(test, 1).otherwise(0).alias(role) for role, test in counted.items()]
        rows = (
            self.df.select(
                sf.spark_partition_id().alias("task"),
                self.event_time().alias("event_time"),
                *flags,
            )
            .groupBy("task")
            .agg(
                sf.count(sf.lit(1)).alias("rows"),
                sf.max("event_time").alias("max_event_time"),
                *(sf.sum(role).alias(role) for role in counted),
            )
            .collect()
        )
        total = sum(int(row["rows"]) for row in rows)
        for role in counted:
            found = sum(int(row[role]) for row in rows)
            if not found:
                continue
            if role.startswith("value"):
                column = floating[int(role.removeprefix("value"))]
                raise SparkWriteError(
                    f"the value column {column!r} is NaN or infinite in {found} of {total} "
                    'rows: JSON has neither (Spark would write the strings "NaN" and '
                    '"Infinity", which a job reads as text); make them null first '
                    f"(sf.nanvl, or DataFrame.replace) or fill them; nothing was written",
                    column=column,
                )
            column = self.key_column if role == "key" else str(self.timestamp_column)
            raise SparkWriteError(
                f"the {role} column {column!r} is null in {found} of {total} rows; every "
                f"row needs a {role} (filter or fill the nulls first); nothing was written",
                column=column,
            )
        return {
            int(row["task"]): PartitionScan(
                rows=int(row["rows"]),
                max_event_time=None
                if row["max_event_time"] is None
                else int(row["max_event_time"]),
            )
            for row in rows
        }


__all__ = ["PartitionScan", "RecordColumns"]
