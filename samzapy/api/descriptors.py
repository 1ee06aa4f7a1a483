"""Descriptors of systems and streams for applications (Samza's descriptors, in snake_case).

A descriptor says in code what a job file says in keys, and yields exactly those keys
(``to_config``): ``KafkaSystemDescriptor("kafka")`` gives ``systems.kafka.samza.factory:
kafka``; its ``get_input_descriptor("page-views", "json")`` gives ``streams.page-views.
samza.system: kafka`` and ``streams.page-views.samza.msg.serde: json``. Keys the job file sets
win over a descriptor's, so a descriptor may name a system the job file defines (its address,
security settings...) and leave those to the file.

A stream's serde is a serde name (``"json"``, ``"string"``, a name registered under
``serializers.registry``), a serde object (``to_bytes``/``from_bytes``), or
``KVSerde(key_serde, value_serde)``. With a ``KVSerde`` the stream's messages are
``KV(key, value)``; otherwise a message is the value alone and its key is dropped (as in
Samza).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, ClassVar

from samzapy.api.durations import duration_ms
from samzapy.api.envelope import KV
from samzapy.api.errors import ConfigError
from samzapy.api.functions import check_sync

_ID = re.compile(r"[A-Za-z0-9_-]+")
_OFFSETS = ("oldest", "upcoming")


def check_id(value: Any, what: str) -> str:
    """``value`` if it is a valid id (``[A-Za-z0-9_-]+``); a ConfigError naming ``what``."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise ConfigError(f"{what} must match [A-Za-z0-9_-]+, got {value!r}")
    return value


def _offset(offset: Any, what: str) -> str:
    """``offset`` if it is ``oldest`` or ``upcoming``; a ConfigError naming ``what``."""
    if offset not in _OFFSETS:
        raise ConfigError(f"{what} takes one of {', '.join(_OFFSETS)}, got {offset!r}")
    return str(offset)


class KVSerde:
    """A serde for keyed messages: the stream's messages are ``KV(key, value)``."""

    __slots__ = ("key_serde", "value_serde")

    def __init__(self, key_serde: Any, value_serde: Any) -> None:
        for serde, what in ((key_serde, "key_serde"), (value_serde, "value_serde")):
            if isinstance(serde, KVSerde):
                raise ConfigError(f"KVSerde's {what} must be a serde name or object, not a KVSerde")
            _check_serde(serde, f"KVSerde's {what}")
        self.key_serde = key_serde
        self.value_serde = value_serde

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, KVSerde)
            and same_serde(self.key_serde, other.key_serde)
            and same_serde(self.value_serde, other.value_serde)
        )

    def __hash__(self) -> int:
        return hash((serde_label(self.key_serde), serde_label(self.value_serde)))

    def __repr__(self) -> str:
        return f"KVSerde({serde_label(self.key_serde)}, {serde_label(self.value_serde)})"


def _check_serde(serde: Any, what: str) -> None:
    if serde is None or isinstance(serde, str | KVSerde):
        return
    if isinstance(serde, type):
        raise ConfigError(
            f"{what} must be a serde object, got the class {serde.__qualname__}: pass an instance"
        )
    if isinstance(serde, int | float | bytes) or not (
        callable(getattr(serde, "to_bytes", None)) and callable(getattr(serde, "from_bytes", None))
    ):
        raise ConfigError(
            f"{what} must be a serde name (json, string, ...), a serde object with to_bytes "
            f"and from_bytes, or a KVSerde, got {serde!r}"
        )


def serde_label(serde: Any) -> str | None:
    """A serde's name, or its class path for a serde object (for messages and plans)."""
    if serde is None or isinstance(serde, str):
        return serde
    if isinstance(serde, KVSerde):
        return repr(serde)
    return f"{type(serde).__module__}:{type(serde).__qualname__}"


def same_serde(a: Any, b: Any) -> bool:
    """Whether two serde settings are the same (names by value, objects by identity)."""
    if isinstance(a, str | KVSerde | None) or isinstance(b, str | KVSerde | None):
        return bool(a == b)
    return a is b


class StreamDescriptor:
    """What input and output descriptors share: the stream id, its system, its serde."""

    def __init__(self, stream_id: str, system: SystemDescriptor, serde: Any = None) -> None:
        self.stream_id = check_id(stream_id, "a stream id")
        _check_serde(serde, f"the serde of stream {stream_id!r}")
        self.system_descriptor = system
        self.serde = serde
        self.physical_name: str = stream_id
        self._configs: dict[str, Any] = {}

    @property
    def system_name(self) -> str:
        return self.system_descriptor.system_name

    @property
    def keyed(self) -> bool:
        """Whether messages are ``KV(key, value)`` (the serde is a ``KVSerde``)."""
        return isinstance(self.serde, KVSerde)

    def with_physical_name(self, name: str) -> StreamDescriptor:
        """The stream's name on its system (default: the stream id)."""
        if not isinstance(name, str) or not name:
            raise ConfigError(f"the physical name of stream {self.stream_id!r} must be a string")
        self.physical_name = name
        return self

    def with_stream_configs(self, configs: Mapping[str, Any]) -> StreamDescriptor:
        """Further keys of the stream, under ``streams.<id>.`` (``partitions``, ...)."""
        self._configs.update(configs)
        return self

    def to_config(self) -> dict[str, Any]:
        """The keys a job file would set for this stream (serde objects excepted: the
        application registers them under ``serializers.registry``)."""
        prefix = f"streams.{self.stream_id}."
        out: dict[str, Any] = {f"{prefix}samza.system": self.system_name}
        if self.physical_name != self.stream_id:
            out[f"{prefix}samza.physical.name"] = self.physical_name
        for key, value in self._configs.items():
            out[prefix + key] = value
        return out

    @property
    def qualified_name(self) -> str:
        """``system.physical-name``, as ``task.inputs`` names it."""
        return f"{self.system_name}.{self.physical_name}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.stream_id!r}, system={self.system_name!r})"


class InputDescriptor(StreamDescriptor):
    """An input stream: where to start without a checkpoint, whether to ignore checkpoints,
    where a message's event time comes from and how its watermarks are made."""

    #: ``with_timestamp``'s function, and ``with_watermarks``' (out-of-orderness ms, idle
    #: timeout ms or None); None when not set.
    timestamp_fn: Callable[[Any], Any] | None = None
    watermarks: tuple[int, int | None] | None = None

    def with_offset_default(self, offset: str) -> InputDescriptor:
        """``oldest`` or ``upcoming``: where to start without a checkpoint."""
        self._configs["samza.offset.default"] = _offset(
            offset, f"with_offset_default of stream {self.stream_id!r}"
        )
        return self

    def with_reset_offset(self, reset: bool = True) -> InputDescriptor:
        """Ignore the checkpoint at start-up and start at the offset default."""
        self._configs["samza.reset.offset"] = bool(reset)
        return self

    def with_bootstrap(self, bootstrap: bool = True) -> InputDescriptor:
        """A bootstrap stream (``samza.bootstrap``): each task reads its partitions up to
        where they ended at start-up before it processes any other input, e.g. a compacted
        topic that fills a table before the stream the table enriches."""
        self._configs["samza.bootstrap"] = bool(bootstrap)
        return self

    def with_framed(self, framed: bool = True) -> InputDescriptor:
        """The stream carries samzapy's control messages (written by ``samzapy.spark``)."""
        self._configs["samza.framed"] = bool(framed)
        return self

    def with_timestamp(self, fn: Callable[[Any], Any]) -> InputDescriptor:
        """A message's event time, in ms since the epoch, is ``fn(message)`` (default: the
        record's timestamp); event-time windows read it."""
        if not callable(fn):
            raise ConfigError(
                f"with_timestamp of stream {self.stream_id!r} takes a function, got {fn!r}"
            )
        self.timestamp_fn = check_sync(
            fn, f"with_timestamp's function of stream {self.stream_id!r}"
        )
        return self

    def to_config(self) -> dict[str, Any]:
        out = super().to_config()
        if self.timestamp_fn is not None:
            # What the container derives this stream's watermarks from (``with_watermarks``).
            keyed = self.keyed
            out[f"streams.{self.stream_id}.samza.event.time.function"] = EventTimeOf(
                self.timestamp_fn, keyed
            )
        return out

    def with_watermarks(
        self,
        max_out_of_orderness: timedelta = timedelta(0),
        idle_timeout: timedelta | None = None,
    ) -> InputDescriptor:
        """Generate this stream's watermarks from its messages' event times: per partition,
        the largest event time seen minus ``max_out_of_orderness``, moving with each message;
        a partition with no message for ``idle_timeout`` (processing time) stops holding the
        task's watermark back until its next message. Also sets
        ``samza.watermark.lateness.ms`` (and ``samza.watermark.idle.ms``), so the watermarks,
        and the idleness, go on through ``partition_by``."""
        what = f"with_watermarks of stream {self.stream_id!r}"
        lateness = duration_ms(
            max_out_of_orderness, f"{what}: max_out_of_orderness", positive=False
        )
        idle = None
        if idle_timeout is not None:
            idle = duration_ms(idle_timeout, f"{what}: idle_timeout")
        self.watermarks = (lateness, idle)
        self._configs["samza.watermark.lateness.ms"] = lateness
        if idle is not None:
            self._configs["samza.watermark.idle.ms"] = idle
        return self


#: The event times a message may have, in ms since the epoch: a time plus or minus any
#: timedelta (a window's size, a lateness) still fits the int64 of a frame's EventTime.
MIN_EVENT_TIME = -(2**62)
MAX_EVENT_TIME = 2**62


def event_time_ms(value: Any) -> int:
    """A timestamp function's result as ms: an int, or a float truncated; a TypeError for
    anything but a number, a ValueError for NaN, an infinity or a time beyond 2**62."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"the timestamp function must return ms since the epoch (a number), got {value!r}"
        )
    if value != value or not MIN_EVENT_TIME <= value <= MAX_EVENT_TIME:
        raise ValueError(
            "the timestamp function must return ms since the epoch between -2**62 and "
            f"2**62, got {value!r}"
        )
    return int(value)


class EventTimeOf:
    """``with_timestamp``'s function as the container calls it, ``(key, message) -> ms``:
    with ``KV(key, message)`` for a keyed stream (what the application's input sees)."""

    __slots__ = ("fn", "keyed")

    def __init__(self, fn: Callable[[Any], Any], keyed: bool) -> None:
        self.fn = fn
        self.keyed = keyed

    def __call__(self, key: Any, message: Any) -> Any:
        if self.keyed:
            return self.fn(KV(key, message))
        return self.fn(message)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EventTimeOf) and (self.fn, self.keyed) == (other.fn, other.keyed)

    def __hash__(self) -> int:
        return hash((self.fn, self.keyed))

    def __repr__(self) -> str:
        return f"with_timestamp({getattr(self.fn, '__qualname__', self.fn)!r})"


class OutputDescriptor(StreamDescriptor):
    """An output stream."""


class SystemDescriptor:
    """A system: its factory and settings, and the descriptors of its streams."""

    factory: ClassVar[str] = ""

    def __init__(self, name: str) -> None:
        self.system_name = check_id(name, "a system name")
        self._configs: dict[str, Any] = {}

    def get_input_descriptor(self, stream_id: str, serde: Any = None) -> InputDescriptor:
        return InputDescriptor(stream_id, self, serde)

    def get_output_descriptor(self, stream_id: str, serde: Any = None) -> OutputDescriptor:
        return OutputDescriptor(stream_id, self, serde)

    def with_default_stream_offset_default(self, offset: str) -> SystemDescriptor:
        """Where the system's streams start without a checkpoint: ``oldest`` or ``upcoming``."""
        self._configs["default.stream.samza.offset.default"] = _offset(
            offset, f"with_default_stream_offset_default of system {self.system_name!r}"
        )
        return self

    def with_system_configs(self, configs: Mapping[str, Any]) -> SystemDescriptor:
        """Further keys of the system, under ``systems.<name>.``."""
        self._configs.update(configs)
        return self

    def to_config(self) -> dict[str, Any]:
        prefix = f"systems.{self.system_name}."
        out: dict[str, Any] = {f"{prefix}samza.factory": self.factory}
        for key, value in self._configs.items():
            out[prefix + key] = value
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.system_name!r})"


class KafkaSystemDescriptor(SystemDescriptor):
    """A Kafka system (``samza.factory: kafka``)."""

    factory = "kafka"

    def with_bootstrap_servers(self, servers: str | Sequence[str]) -> KafkaSystemDescriptor:
        text = servers if isinstance(servers, str) else ",".join(servers)
        self._configs["bootstrap.servers"] = text
        return self

    def with_consumer_configs(self, configs: Mapping[str, Any]) -> KafkaSystemDescriptor:
        """Kafka consumer options by Kafka's names (``systems.<name>.consumer.*``)."""
        self._configs.update({f"consumer.{k}": v for k, v in configs.items()})
        return self

    def with_producer_configs(self, configs: Mapping[str, Any]) -> KafkaSystemDescriptor:
        """Kafka producer options by Kafka's names (``systems.<name>.producer.*``)."""
        self._configs.update({f"producer.{k}": v for k, v in configs.items()})
        return self


class InMemorySystemDescriptor(SystemDescriptor):
    """The in-memory system (``samza.factory: memory``): the test kit's, and a home for
    intermediate streams of a job that runs in one process."""

    factory = "memory"


class FileSystemDescriptor(SystemDescriptor):
    """The file system (``samza.factory: file``): one JSON-lines file per partition."""

    factory = "file"

    def with_path(self, path: str) -> FileSystemDescriptor:
        self._configs["path"] = str(path)
        return self

    def with_follow(self, follow: bool = True) -> FileSystemDescriptor:
        """Tail the files instead of ending at their end."""
        self._configs["follow"] = bool(follow)
        return self


__all__ = [
    "FileSystemDescriptor",
    "InMemorySystemDescriptor",
    "InputDescriptor",
    "KVSerde",
    "KafkaSystemDescriptor",
    "OutputDescriptor",
    "StreamDescriptor",
    "SystemDescriptor",
    "check_id",
    "event_time_ms",
    "same_serde",
    "serde_label",
]
