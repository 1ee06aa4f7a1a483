"""The message serdes a TestRunner gives an application's declared outputs: checked, not
applied.

The runner's streams carry objects, so that a test reads its outputs as the application
wrote them. A message that the output's serde in the job refuses would then pass the test
and fail the job: each declared output's message serde is replaced by a ``Checked`` one,
which serializes every message as the job would (a refusal fails the test with the job's
error) and passes the object on. Keys are not checked: the router partitions by what the key
serde returns, which must then be the serialized key.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from samzapy.api.descriptors import OutputDescriptor, StreamDescriptor
from samzapy.api.system import SystemStream
from samzapy.config import ResolvedConfig
from samzapy.system.serde import Serde, SerdeRegistry


class Checked:
    """``serde``'s ``to_bytes`` run for its errors; the object itself goes on."""

    def __init__(self, serde: Serde) -> None:
        self.serde = serde

    def to_bytes(self, obj: Any) -> Any:
        self.serde.to_bytes(obj)
        return obj

    def from_bytes(self, data: Any) -> Any:
        return data


def checked_output_serdes(
    resolved: ResolvedConfig, descriptors: Iterable[StreamDescriptor]
) -> dict[str, Any]:
    """The keys that give each declared output (an ``OutputDescriptor``) a ``Checked``
    message serde in place of the one ``resolved`` (the job's config, on the runner's
    systems) gives it; an output whose serde is ``none`` keeps it."""
    registry = SerdeRegistry(resolved.serializers)
    keys: dict[str, Any] = {}
    for descriptor in descriptors:
        if not isinstance(descriptor, OutputDescriptor):
            continue
        stream_id = descriptor.stream_id
        entry = resolved.streams.get(stream_id)
        system = (entry.system if entry is not None else None) or descriptor.system_name
        name = entry.physical_name if entry is not None else descriptor.physical_name
        serde = resolved.stream(SystemStream(system, name)).msg_serde
        if serde in (None, "none"):
            continue
        checked = f"samzapy-test-checked-{stream_id}"
        keys[f"serializers.registry.{checked}.class"] = Checked(registry.get(serde))
        keys[f"streams.{stream_id}.samza.msg.serde"] = checked
    return keys


__all__ = ["Checked", "checked_output_serdes"]
