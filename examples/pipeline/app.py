"""The pipeline's samzapy job as an application of the high-level API (``make demo`` runs it).

The same job as ``tasks.py``'s ``PageViewPipeline``, described as a graph of operators:

    page-views (framed, keyed by page, as the Spark job writes it; event time: "ts")
      -> partition_by(member)          the intermediate stream
                                       pageviews-pipeline-<job.id>-partition_by-by-member
         -> flat_map_async(CountAndEnrich) count in the RocksDB store ``views`` (Kafka
                                       changelog), then the member's country from the
                                       profile service
            -> enriched-page-views     each view with its member's country
            -> member-view-counts      the member's running count, on every view
         -> window(views-per-window)   a keyed tumbling window of ``app.window.minutes`` (10)
                                       of event time, counting each member's views in its
                                       RocksDB store (Kafka changelog)
            -> member-window-counts    one DEFAULT pane per member and window

The running count is sent on every view: the last record per member (keyed by member, so one
partition holds all of a member's records, in order) is its final count. The window's panes
close on the watermarks the Spark batch writes (each Spark task's greatest ``ts``), carried
through the intermediate stream, and, for the windows after the lowest of them, at
end-of-stream: every pane fires once, DEFAULT, with the member's views in that window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, NamedTuple

from examples.pipeline.profiles import Countries
from samzapy import (
    KV,
    KafkaSystemDescriptor,
    KVSerde,
    StreamApplication,
    StreamApplicationDescriptor,
    TaskContext,
    WindowPane,
    Windows,
)

ENRICHED = "enriched-page-views"
COUNTS = "member-view-counts"
WINDOW_COUNTS = "member-window-counts"
#: The window's op id: its store, and its changelog pageviews-pipeline-<job.id>-<op id>-changelog.
PER_WINDOW = "views-per-window"
DEFAULT_WINDOW_MINUTES = 10
DEFAULT_PROFILES_URL = "http://127.0.0.1:8765"


class Routed(NamedTuple):
    """One result of ``CountAndEnrich``: the output stream it goes to, and its message."""

    stream: str
    message: KV


class CountAndEnrich:
    """Counts each member's views in the store ``views`` and enriches each view with the
    member's country, looked up in the profile service (up to ``task.max.concurrency``
    lookups in flight per task, one per member at a time).

    ``apply`` is called in offset order and updates the count before it returns, so
    concurrent lookups never race on it; the awaitable it returns completes after the
    lookup. A member's results complete in the order of its views, so the last count sent
    for a member is its final one.
    """

    def init(self, context: TaskContext) -> None:
        self.views = context.get_store("views")
        self.profiles_url = str(context.config.get("app.profiles.url", DEFAULT_PROFILES_URL))
        self.countries = Countries(self.profiles_url)
        # Per member: completes when the member's latest view has its results.
        self.latest: dict[str, asyncio.Future[None]] = {}

    def apply(self, kv: KV) -> Awaitable[list[Routed]]:
        member, view = kv.key, kv.value
        # Synchronous, in offset order: the count.
        views = (self.views.get(member) or 0) + 1
        self.views.put(member, views)
        previous = self.latest.get(member)
        done = self.latest[member] = asyncio.get_running_loop().create_future()
        return self._enrich(member, view, views, previous, done)

    async def _enrich(
        self,
        member: str,
        view: dict[str, Any],
        views: int,
        previous: asyncio.Future[None] | None,
        done: asyncio.Future[None],
    ) -> list[Routed]:
        try:
            country = await self.countries.of(member)
            # The member's earlier view first: its results are sent as soon as it returns,
            # before this one wakes up, so its count never arrives after this one's.
            if previous is not None and not previous.done():
                await previous
            count = {"member_id": member, "views": views, "country": country}
            return [
                Routed(ENRICHED, KV(member, {**view, "country": country})),
                Routed(COUNTS, KV(member, count)),
            ]
        finally:
            done.set_result(None)
            if self.latest.get(member) is done:
                del self.latest[member]


def to_enriched(routed: Routed) -> bool:
    return routed.stream == ENRICHED


def to_counts(routed: Routed) -> bool:
    return routed.stream == COUNTS


def message(routed: Routed) -> KV:
    return routed.message


def event_time(view: dict[str, Any]) -> int:
    """A page view's event time: its ``ts``, ms since the epoch (the Spark job's
    ``timestamp_column``, whose greatest value per Spark task is that task's watermark)."""
    return int(view["ts"])


def member(kv: KV) -> str:
    return str(kv.key)


def count_view(view: KV, views: int) -> int:
    return views + 1


def window_count(pane: WindowPane) -> KV:
    """A pane as ``member -> {member_id, window_start, views, firing}``."""
    member_id = pane.key.key
    return KV(
        member_id,
        {
            "member_id": member_id,
            "window_start": pane.key.pane_id,
            "views": pane.message,
            "firing": pane.firing_type.name,
        },
    )


class PageViewPipelineApp(StreamApplication):
    """Repartition by member; count and enrich, send to two outputs; count per member and
    window of event time, send to a third. The job file (``configs/pageviews-pipeline.yaml``)
    gives the broker, the store, the partition counts, ``task.max.concurrency`` and
    ``app.window.minutes``."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        kafka = KafkaSystemDescriptor("kafka")
        page_views = (
            kafka.get_input_descriptor("page-views", "json")
            .with_framed()  # the Spark batch's watermarks and end-of-stream, in-band
            .with_timestamp(event_time)
        )
        keyed = KVSerde("string", "json")
        enriched = app_desc.get_output_stream(kafka.get_output_descriptor(ENRICHED, keyed))
        counts = app_desc.get_output_stream(kafka.get_output_descriptor(COUNTS, keyed))
        window_counts = app_desc.get_output_stream(
            kafka.get_output_descriptor(WINDOW_COUNTS, keyed)
        )
        by_member = app_desc.get_input_stream(page_views).partition_by(
            lambda view: view["member_id"], lambda view: view, keyed, "by-member"
        )
        results = by_member.flat_map_async(CountAndEnrich())
        results.filter(to_enriched).map(message).send_to(enriched)
        results.filter(to_counts).map(message).send_to(counts)
        minutes = int(app_desc.config.get("app.window.minutes", DEFAULT_WINDOW_MINUTES))
        per_window = Windows.keyed_tumbling_window(
            member,
            timedelta(minutes=minutes),
            initial_value=int,
            aggregator=count_view,
            key_serde="string",
            value_serde="long",
        ).with_event_time()
        by_member.window(per_window, PER_WINDOW).map(window_count).send_to(window_counts)
