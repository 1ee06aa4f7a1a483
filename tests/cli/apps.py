"""Applications the CLI tests run through the real `samzapy` command."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

from samzapy import (
    KV,
    FileSystemDescriptor,
    InMemorySystemDescriptor,
    KafkaSystemDescriptor,
    KVSerde,
    StreamApplication,
    StreamApplicationDescriptor,
    Windows,
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


class CountByKeyOnKafka(StreamApplication):
    """CountByKey's graph with its input, intermediate stream and output on kafka."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        kafka = KafkaSystemDescriptor("kafka")
        out = app_desc.get_output_stream(kafka.get_output_descriptor("out", "json"))
        (
            app_desc.get_input_stream(kafka.get_input_descriptor("in", "json"))
            .partition_by(lambda m: m["k"], lambda m: m, KVSerde("string", "json"), "by-k")
            .map(Tally())
            .send_to(out)
        )


class ChattyCountByKey(CountByKey):
    """CountByKey whose describe prints (a debugging line left in)."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        print("describing the graph")
        super().describe(app_desc)


class ExitsInDescribe(StreamApplication):
    """Calls sys.exit in describe."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        raise SystemExit(3)


class TwoIds(StreamApplication):
    """Uses one op_id twice."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        stream = app_desc.get_input_stream(FILES.get_input_descriptor("in", "json"))
        stream.broadcast("json", "x").sink(lambda m, c, k: None)
        stream.broadcast("json", "x").sink(lambda m, c, k: None)


class BroadcastWithoutSerde(StreamApplication):
    """A broadcast given no serde, on a system without samza.msg.serde."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        app_desc.with_default_system(InMemorySystemDescriptor("mem"))
        stream = app_desc.get_input_stream(FILES.get_input_descriptor("in", "json"))
        stream.broadcast(None, "everyone").sink(lambda m, c, k: None)


class ByMember:
    """A view joined with its member's profile (None when there is none)."""

    def get_message_key(self, view: KV) -> Any:
        return view.key

    def get_record_key(self, record: KV) -> Any:
        return record.key

    def apply(self, view: KV, record: KV | None) -> dict[str, Any]:
        return {**view.value, "name": None if record is None else record.value["name"]}


class EnrichViews(StreamApplication):
    """files.profiles (bootstrap) -> table profiles; files.views joined with it -> files.out."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        from samzapy import RocksDbTableDescriptor

        app_desc.with_default_system(InMemorySystemDescriptor("mem"))
        table = app_desc.get_table(
            RocksDbTableDescriptor("profiles", KVSerde("string", "json")).with_changelog_enabled()
        )
        profiles = FILES.get_input_descriptor("profiles", "json").with_bootstrap()
        app_desc.get_input_stream(profiles).map(lambda p: KV(p["id"], p)).send_to(table)
        (
            app_desc.get_input_stream(FILES.get_input_descriptor("views", "json"))
            .map(lambda v: KV(v["member"], v))
            .join(table, ByMember())
            .send_to(app_desc.get_output_stream(FILES.get_output_descriptor("out", "json")))
        )


class SlowRelay(StreamApplication):
    """files.in -> partition_by(k) on memory -> map -> files.out, each stage taking 0.5 ms a
    message; the file named by SAMZAPY_TEST_READY_FILE appears at the first message through
    the map."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        app_desc.with_default_system(InMemorySystemDescriptor("mem"))
        out = app_desc.get_output_stream(FILES.get_output_descriptor("out", "json"))
        (
            app_desc.get_input_stream(FILES.get_input_descriptor("in", "json"))
            .partition_by(_slow_key, lambda m: m, KVSerde("string", "json"), "by-k")
            .map(_slowly)
            .send_to(out)
        )


class FanOutRelay(StreamApplication):
    """SlowRelay with each input message sent on ten times before the repartitioning: the
    memory intermediate stream fills ten times faster than its second stage drains it."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        app_desc.with_default_system(InMemorySystemDescriptor("mem"))
        out = app_desc.get_output_stream(FILES.get_output_descriptor("out", "json"))
        (
            app_desc.get_input_stream(FILES.get_input_descriptor("in", "json"))
            .flat_map(lambda m: [m] * 10)
            .partition_by(_slow_key, lambda m: m, KVSerde("string", "json"), "by-k")
            .map(_slowly)
            .send_to(out)
        )


def _slow_key(message: dict[str, Any]) -> str:
    time.sleep(0.0005)
    return str(message["k"])


def _slowly(kv: KV) -> dict[str, Any]:
    time.sleep(0.0005)
    ready = os.environ.get("SAMZAPY_TEST_READY_FILE")
    if ready and not os.path.exists(ready):
        open(ready, "w").close()
    return dict(kv.value)


class ViewsPerTenSeconds(StreamApplication):
    """files.views -> views per member and 10 s of event time (docs/api.md's window-app, on
    the `file` system only: its window's store has no changelog) -> files.panes."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        views = app_desc.get_input_stream(
            FILES.get_input_descriptor("views", "json")
            .with_timestamp(lambda view: view["ts"])
            .with_watermarks()
        )
        panes = app_desc.get_output_stream(
            FILES.get_output_descriptor("panes", KVSerde("string", "json"))
        )
        self.count(views, panes, app_desc)

    def count(self, views: Any, panes: Any, app_desc: StreamApplicationDescriptor) -> None:
        per_member = Windows.keyed_tumbling_window(
            lambda view: view["member"],
            timedelta(seconds=10),
            initial_value=lambda: 0,
            aggregator=lambda view, count: count + 1,
            key_serde="string",
            value_serde="long",
        ).with_event_time()
        (
            views.window(per_member, "per-member")
            .map(
                lambda pane: KV(
                    pane.key.key,
                    {"member": pane.key.key, "start": pane.key.pane_id, "views": pane.message},
                )
            )
            .send_to(panes)
        )


class ViewsPerTenSecondsByMember(ViewsPerTenSeconds):
    """ViewsPerTenSeconds with its views repartitioned by member first, on memory."""

    def count(self, views: Any, panes: Any, app_desc: StreamApplicationDescriptor) -> None:
        app_desc.with_default_system(InMemorySystemDescriptor("mem"))
        by_member = views.partition_by(
            lambda view: view["member"], lambda view: view, KVSerde("string", "json"), "by-member"
        ).map(lambda kv: kv.value)
        super().count(by_member, panes, app_desc)


class CountByKeyToMemory(StreamApplication):
    """files.in -> partition_by(k) on memory -> Tally -> mem.counts (memory too): the job file
    names no memory system, the application declares it."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        mem = InMemorySystemDescriptor("mem")
        app_desc.with_default_system(mem)
        out = app_desc.get_output_stream(
            mem.get_output_descriptor("counts", KVSerde("string", "json"))
        )
        (
            app_desc.get_input_stream(FILES.get_input_descriptor("in", "json"))
            .partition_by(lambda m: m["k"], lambda m: m, KVSerde("string", "json"), "by-k")
            .map(Tally())
            .send_to(out)
        )
