"""The pipeline's samzapy job as a task class: page views written by Spark, counted per member,
enriched (``configs/pageviews-pipeline-task.yaml``; ``make demo`` runs the same job as the
application of ``app.py``).

Stage 1 reads ``page-views`` (framed, keyed by page, as the Spark job writes it) and
repartitions each view by member id through the intermediate stream ``page-views-by-member``.
Stage 2 counts views per member in the RocksDB store ``views`` (Kafka changelog), and enriches
each view with the member's country from the profile service, up to ``task.max.concurrency``
lookups in flight per task. The count is updated in the synchronous part of
``process_async``, in offset order, so concurrent lookups never race on it.

Outputs: ``enriched-page-views`` (each view with its member's country) and
``member-view-counts`` (the count of each member whose count changed, every window and at
end-of-stream: the last record per member is its final count).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from examples.pipeline.profiles import Countries
from samzapy import (
    AsyncStreamTask,
    EndOfStreamListenerTask,
    IncomingMessageEnvelope,
    InitableTask,
    MessageCollector,
    OutgoingMessageEnvelope,
    SystemStream,
    TaskContext,
    TaskCoordinator,
    WindowableTask,
)

SOURCE = "page-views"
BY_MEMBER = SystemStream("kafka", "page-views-by-member")
ENRICHED = SystemStream("kafka", "enriched-page-views")
COUNTS = SystemStream("kafka", "member-view-counts")


class PageViewPipeline(AsyncStreamTask, InitableTask, WindowableTask, EndOfStreamListenerTask):
    def init(self, context: TaskContext) -> None:
        self.views = context.get_store("views")
        self.profiles_url = str(context.config.get("app.profiles.url", "http://127.0.0.1:8765"))
        self.countries = Countries(self.profiles_url)
        self.changed: set[str] = set()

    def process_async(
        self,
        envelope: IncomingMessageEnvelope,
        collector: MessageCollector,
        coordinator: TaskCoordinator,
    ) -> Awaitable[None]:
        view = envelope.message
        member = view["member_id"]
        if envelope.system_stream_partition.stream == SOURCE:
            collector.send(OutgoingMessageEnvelope(BY_MEMBER, view, key=member))
            return _DONE
        # Synchronous, in offset order: the count.
        self.views.put(member, (self.views.get(member) or 0) + 1)
        self.changed.add(member)
        return self._enrich(view, member, collector)

    async def _enrich(self, view: dict[str, Any], member: str, collector: Any) -> None:
        country = await self.countries.of(member)
        collector.send(OutgoingMessageEnvelope(ENRICHED, {**view, "country": country}, key=member))

    def window(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        self._emit_counts(collector)

    def on_end_of_stream(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        self._emit_counts(collector)

    def _emit_counts(self, collector: MessageCollector) -> None:
        for member in sorted(self.changed):
            views = self.views.get(member)
            country = self.countries.known.get(member)
            record = {"member_id": member, "views": views, "country": country}
            collector.send(OutgoingMessageEnvelope(COUNTS, record, key=member))
        self.changed.clear()


class _Done:
    """An awaitable that is already complete (stage 1 has nothing to wait for)."""

    def __await__(self) -> Any:
        return iter(())


_DONE = _Done()
