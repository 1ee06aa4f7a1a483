"""Count page views per member, and a wrapper that sends bad messages to a dead-letter stream.

``PageViewCounter`` keeps a count per member for its partition (state is isolated per
partition, so a member's views all land in one task when the input is partitioned by member).
It emits the counts when its input ends, and, when ``task.window.ms`` is set, every window.
The counts are in memory, or, when ``app.counts.store`` names one of the job's stores, in that
store: with a changelog they survive restarts and crashes (``configs/kafka-pageviews.yaml``).

``DeadLetters`` wraps any StreamTask with shared try/except logic: the container needs no
special support for it (a task wraps another to add behaviour, as Samza advises).
``SafePageViewCounter`` is the two together, the task the quick-start job runs.
``PageViewLoader`` copies page views to another stream keyed by member id:
``configs/kafka-load-pageviews.yaml`` fills the Kafka quick start's topic with it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from samzapy import (
    EndOfStreamListenerTask,
    IncomingMessageEnvelope,
    InitableTask,
    MessageCollector,
    OutgoingMessageEnvelope,
    StreamTask,
    SystemStream,
    TaskContext,
    TaskCoordinator,
    WindowableTask,
)


class PageViewCounter(InitableTask, StreamTask, WindowableTask, EndOfStreamListenerTask):
    """Counts views per member; emits ``{"member_id", "views"}`` per member."""

    def init(self, context: TaskContext) -> None:
        system, stream = str(context.config.get("app.output", "output.page-view-counts")).split(
            ".", 1
        )
        self.output = SystemStream(system, stream)
        store = context.config.get("app.counts.store")
        self.store = context.get_store(str(store)) if store else None
        self.counts: Counter[str] = Counter()
        self.changed: set[str] = set()

    def process(
        self,
        envelope: IncomingMessageEnvelope,
        collector: MessageCollector,
        coordinator: TaskCoordinator,
    ) -> None:
        view = envelope.message
        member = view["member_id"]
        if not isinstance(member, str) or not member:
            raise ValueError(f"member_id must be a non-empty string, got {member!r}")
        if self.store is not None:
            self.store.put(member, (self.store.get(member) or 0) + 1)
        else:
            self.counts[member] += 1
        self.changed.add(member)

    def window(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        self._emit(collector, sorted(self.changed))

    def on_end_of_stream(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        self._emit(collector, sorted(self.changed))

    def _emit(self, collector: MessageCollector, members: list[str]) -> None:
        for member in members:
            collector.send(
                OutgoingMessageEnvelope(
                    self.output, {"member_id": member, "views": self._count(member)}, key=member
                )
            )
        self.changed.clear()

    def _count(self, member: str) -> int:
        if self.store is not None:
            return int(self.store.get(member) or 0)
        return self.counts[member]


class DeadLetters(InitableTask, StreamTask, WindowableTask, EndOfStreamListenerTask):
    """Runs ``wrapped``; a message it fails on goes to ``app.dead.letters`` instead of
    stopping the job. Every other call passes straight through."""

    wrapped_class: type[Any] = StreamTask

    def __init__(self) -> None:
        self.wrapped = self.wrapped_class()
        self.dead_letters: SystemStream | None = None

    def init(self, context: TaskContext) -> None:
        target = context.config.get("app.dead.letters")
        if target:
            system, stream = str(target).split(".", 1)
            self.dead_letters = SystemStream(system, stream)
        if isinstance(self.wrapped, InitableTask):
            self.wrapped.init(context)

    def process(
        self,
        envelope: IncomingMessageEnvelope,
        collector: MessageCollector,
        coordinator: TaskCoordinator,
    ) -> None:
        try:
            self.wrapped.process(envelope, collector, coordinator)
        except Exception as exc:
            if self.dead_letters is None:
                raise
            collector.send(
                OutgoingMessageEnvelope(
                    self.dead_letters,
                    {
                        "source": str(envelope.system_stream_partition),
                        "offset": envelope.offset,
                        "error": repr(exc),
                        "message": envelope.message,
                    },
                )
            )

    def window(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        if isinstance(self.wrapped, WindowableTask):
            self.wrapped.window(collector, coordinator)

    def on_end_of_stream(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        if isinstance(self.wrapped, EndOfStreamListenerTask):
            self.wrapped.on_end_of_stream(collector, coordinator)


class SafePageViewCounter(DeadLetters):
    """The quick-start task: PageViewCounter with bad messages sent to dead letters."""

    wrapped_class = PageViewCounter


class PageViewLoader(InitableTask, StreamTask):
    """Copies each page view to ``app.output``, keyed by its member id, so that a member's
    views land in one partition (Kafka's partitioner, as the bundled files are split)."""

    def init(self, context: TaskContext) -> None:
        system, stream = str(context.config["app.output"]).split(".", 1)
        self.output = SystemStream(system, stream)

    def process(
        self,
        envelope: IncomingMessageEnvelope,
        collector: MessageCollector,
        coordinator: TaskCoordinator,
    ) -> None:
        view = envelope.message
        member = view.get("member_id") if isinstance(view, dict) else None
        collector.send(OutgoingMessageEnvelope(self.output, view, key=member))
