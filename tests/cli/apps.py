"""Applications the CLI tests run through the real `samzapy` command."""

from __future__ import annotations

from typing import Any

from samzapy import (
    KV,
    FileSystemDescriptor,
    InMemorySystemDescriptor,
    KVSerde,
    StreamApplication,
    StreamApplicationDescriptor,
)

FILES = FileSystemDescriptor("files")


class Tally:
    """Counts per key, per task; fails on a message whose "bad" field is true."""

    def init(self, context: Any) -> None:
        self.counts: dict[str, int] = {}

    def apply(self, kv: KV) -> KV:
        if kv.value.get("bad"):
            raise ValueError(f"bad message {kv.value}")
        self.counts[kv.key] = self.counts.get(kv.key, 0) + 1
        return KV(kv.key, {"key": kv.key, "count": self.counts[kv.key]})


class CountByKey(StreamApplication):
    """files.in -> partition_by(k) on memory -> Tally -> files.out."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        app_desc.with_default_system(InMemorySystemDescriptor("mem"))
        out = app_desc.get_output_stream(FILES.get_output_descriptor("out", "json"))
        (
            app_desc.get_input_stream(FILES.get_input_descriptor("in", "json"))
            .partition_by(lambda m: m["k"], lambda m: m, KVSerde("string", "json"), "by-k")
            .map(Tally())
            .send_to(out)
        )


class TwoIds(StreamApplication):
    """Uses one op_id twice."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        stream = app_desc.get_input_stream(FILES.get_input_descriptor("in", "json"))
        stream.broadcast("json", "x").sink(lambda m, c, k: None)
        stream.broadcast("json", "x").sink(lambda m, c, k: None)
