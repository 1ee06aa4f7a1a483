"""Which serdes a job's streams and stores use: the stream's own (``streams.<id>.samza.key.serde``
and ``msg.serde``), else its system's default; ``none`` means no serde (bytes pass as they are).
Changelog records are the stores' own bytes and are never serialized again: read as a stream
(``samzapy tail``), a changelog's records decode by its store's ``key.serde`` and ``msg.serde``
(none set: bytes)."""

from __future__ import annotations

from collections.abc import Mapping

from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.config import ResolvedConfig
from samzapy.container.consumers import InputSerdes
from samzapy.system.ports import SystemFactory
from samzapy.system.serde import Serde, SerdeRegistry


class StreamSerdes:
    """The serdes of one job's streams and stores."""

    def __init__(self, config: ResolvedConfig, factories: Mapping[str, SystemFactory]) -> None:
        self._config = config
        self._factories = factories
        self._registry = SerdeRegistry(config.serializers)
        self._changelogs = {s.changelog: s for s in config.stores.values() if s.changelog}

    def framed(self, ss: SystemStream) -> bool:
        """Whether records of ``ss`` carry a type byte (intermediate or ``samza.framed``)."""
        stream = self._config.stream(ss)
        return stream.intermediate or stream.framed

    def carries_watermarks(self, ssp: SystemStreamPartition) -> bool:
        stream = self._config.stream(ssp.system_stream)
        return stream.intermediate or stream.framed or stream.watermark_lateness_ms is not None

    def input(self, ssp: SystemStreamPartition) -> InputSerdes:
        key, msg = self._names(ssp.system_stream)
        stream = self._config.stream(ssp.system_stream)
        lateness = stream.watermark_lateness_ms
        return InputSerdes(
            self._serde(key),
            self._serde(msg),
            framed=self.framed(ssp.system_stream),
            lateness_ms=lateness,
            event_time=stream.event_time_fn,
            idle_ms=None if lateness is None else stream.watermark_idle_ms,
        )

    def output(self, ss: SystemStream) -> tuple[Serde | None, Serde | None]:
        if ss.system not in self._factories or ss in self._changelogs:
            return None, None
        key, msg = self._names(ss)
        return self._serde(key), self._serde(msg)

    def store(self, name: str | None) -> Serde:
        """A store's key or value serde (``bytes`` when none is configured)."""
        return self._registry.get("bytes" if name in (None, "none") else name)

    def _serde(self, name: str | None) -> Serde | None:
        if name is None or name == "none":
            return None
        return self._registry.get(name)

    def _names(self, ss: SystemStream) -> tuple[str | None, str | None]:
        if (store := self._changelogs.get(ss)) is not None:
            return store.key_serde, store.msg_serde
        stream = self._config.stream(ss)
        factory = self._factories[ss.system]
        return (
            stream.key_serde or factory.default_key_serde,
            stream.msg_serde or factory.default_msg_serde,
        )


__all__ = ["StreamSerdes"]
