"""Applications of the high-level API that the application tests run through `samzapy run`.

Each takes the topics it reads and writes from the job file's own keys (``app.views``,
``app.words``, ...), as an operator would move a job to other topics without editing code.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from samzapy import (
    KV,
    KafkaSystemDescriptor,
    KVSerde,
    StreamApplication,
    StreamApplicationDescriptor,
    Windows,
)

STORE = "counts"
#: The op_id of WordTotals' partition_by: its intermediate stream is
#: ``<job.name>-<job.id>-partition_by-by-word``.
BY_WORD = "by-word"


def _topic(app_desc: StreamApplicationDescriptor, key: str) -> str:
    return str(app_desc.config[key])


def _paced(app_desc: StreamApplicationDescriptor) -> Callable[[Any], Any]:
    """The identity, taking ``app.pace.us`` (a job file key; 0 if unset) per message: a test
    that kills the job between two commits keeps it from reading its whole input first."""
    pause = float(app_desc.config.get("app.pace.us", 0)) / 1e6

    def paced(message: Any) -> Any:
        if pause:
            time.sleep(pause)
        return message

    return paced


class MobileViews(StreamApplication):
    """Keeps the mobile page views of ``app.views`` (framed JSON ``{"p", "i", "device"}``) and
    sends each view's ``i`` to ``app.mobile``, keyed by ``p<p>`` so that one source
    partition's views land, in order, on one output partition."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        kafka = KafkaSystemDescriptor("kafka")
        views = kafka.get_input_descriptor("views", "json").with_framed()
        views.with_physical_name(_topic(app_desc, "app.views"))
        mobile = kafka.get_output_descriptor("mobile", KVSerde("string", "json"))
        mobile.with_physical_name(_topic(app_desc, "app.mobile"))
        (
            app_desc.get_input_stream(views)
            .filter(lambda view: view["device"] == "mobile")
            .map(lambda view: KV(f"p{view['p']}", view["i"]))
            .send_to(app_desc.get_output_stream(mobile))
        )


class Totals:
    """A word's new running total in the store ``counts``: each task counts its own words."""

    def init(self, context: Any) -> None:
        self.store = context.get_store(STORE)

    def apply(self, kv: KV) -> KV:
        total = (self.store.get(kv.key) or 0) + 1
        self.store.put(kv.key, total)
        return KV(kv.key, str(total))


class WordTotals(StreamApplication):
    """Repartitions the words of ``app.words`` (string messages) by themselves, counts them
    in the RocksDB store ``counts`` and sends each word's new total, keyed by the word, to
    ``app.totals``."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        kafka = KafkaSystemDescriptor("kafka")
        words = kafka.get_input_descriptor("words", "string")
        words.with_physical_name(_topic(app_desc, "app.words"))
        totals = kafka.get_output_descriptor("totals", KVSerde("string", "string"))
        totals.with_physical_name(_topic(app_desc, "app.totals"))
        (
            app_desc.get_input_stream(words)
            .map(_paced(app_desc))
            .partition_by(lambda w: w, lambda w: w, KVSerde("string", "string"), BY_WORD)
            .map(Totals())
            .send_to(app_desc.get_output_stream(totals))
        )


class RelayedLines(StreamApplication):
    """Sends each line of ``app.lines`` (string messages) through an intermediate stream
    (a partition_by on the line, op_id ``by-line``) to ``app.relayed``, keyed by itself."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        kafka = KafkaSystemDescriptor("kafka")
        lines = kafka.get_input_descriptor("lines", "string")
        lines.with_physical_name(_topic(app_desc, "app.lines"))
        relayed = kafka.get_output_descriptor("relayed", KVSerde("string", "string"))
        relayed.with_physical_name(_topic(app_desc, "app.relayed"))
        (
            app_desc.get_input_stream(lines)
            .partition_by(
                lambda line: line, lambda line: line, KVSerde("string", "string"), "by-line"
            )
            .send_to(app_desc.get_output_stream(relayed))
        )


def _count_panes(
    app_desc: StreamApplicationDescriptor,
    kafka: KafkaSystemDescriptor,
    words: Any,
    size: timedelta,
    op_id: str,
) -> None:
    """``words`` (``{"w": word, "t": event ms}``) paced, repartitioned by word and counted per
    word in tumbling windows of ``size`` of event time; each pane to ``app.panes`` as
    ``word@pane_id -> count``."""
    panes = kafka.get_output_descriptor("panes", KVSerde("string", "string"))
    panes.with_physical_name(_topic(app_desc, "app.panes"))
    window = Windows.keyed_tumbling_window(
        lambda kv: kv.key,
        size,
        lambda: 0,
        lambda kv, count: count + 1,
        key_serde="string",
        value_serde="long",
    ).with_event_time()
    (
        app_desc.get_input_stream(words)
        .map(_paced(app_desc))
        .partition_by(lambda m: m["w"], lambda m: m["t"], KVSerde("string", "long"), BY_WORD)
        .window(window, op_id)
        .map(lambda pane: KV(f"{pane.key.key}@{pane.key.pane_id}", str(pane.message)))
        .send_to(app_desc.get_output_stream(panes))
    )


#: The op_id of WindowedWordCounts' window: its store and changelog are named after it.
PER_WINDOW = "per-window"
#: WindowedWordCounts' tumbling interval, in ms of event time.
WINDOW_MS = 5000


class WindowedWordCounts(StreamApplication):
    """Counts the words of ``app.words`` (framed JSON ``{"w": word, "t": event ms}``, with
    the loader's watermarks in-band) per word and per tumbling window of WINDOW_MS in event
    time, after repartitioning them by word, and sends each DEFAULT pane as
    ``word@pane_id -> count`` to ``app.panes``."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        kafka = KafkaSystemDescriptor("kafka")
        words = kafka.get_input_descriptor("words", "json").with_framed()
        words.with_physical_name(_topic(app_desc, "app.words"))
        words.with_timestamp(lambda m: m["t"])
        _count_panes(app_desc, kafka, words, timedelta(milliseconds=WINDOW_MS), PER_WINDOW)


#: The op_id of IdleCountsPerSecond's window.
PER_SECOND = "per-second"


class IdleCountsPerSecond(StreamApplication):
    """Counts the messages of ``app.words`` (plain JSON ``{"w": word, "t": event ms}``, its
    watermarks made from ``t`` in the task, with an idle timeout of ``app.idle.ms``) per word
    and per second of event time after repartitioning them by word, paced by ``app.pace.us``;
    sends each pane as ``word@pane_id -> count`` to ``app.panes``."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        kafka = KafkaSystemDescriptor("kafka")
        idle = timedelta(milliseconds=int(app_desc.config["app.idle.ms"]))
        words = kafka.get_input_descriptor("words", "json")
        words.with_physical_name(_topic(app_desc, "app.words"))
        words.with_timestamp(lambda m: m["t"]).with_watermarks(idle_timeout=idle)
        _count_panes(app_desc, kafka, words, timedelta(seconds=1), PER_SECOND)


#: The op_id of BroadcastCounts' broadcast.
TO_EVERY_TASK = "to-every-task"


class BroadcastCounts(StreamApplication):
    """Broadcasts the views of ``app.views`` (framed JSON ``{"t": event ms}``, their
    watermarks made from ``t``) to every task, and counts them per 10 s of event time in each
    task; each task sends its panes as ``<pane_id> -> count`` to ``app.panes``."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        kafka = KafkaSystemDescriptor("kafka")
        views = kafka.get_input_descriptor("views", "json").with_framed()
        views.with_physical_name(_topic(app_desc, "app.views"))
        views.with_timestamp(lambda m: m["t"]).with_watermarks()
        panes = kafka.get_output_descriptor("panes", KVSerde("string", "string"))
        panes.with_physical_name(_topic(app_desc, "app.panes"))
        window = Windows.tumbling_window(
            timedelta(seconds=10), lambda: 0, lambda m, count: count + 1
        ).with_event_time()
        (
            app_desc.get_input_stream(views)
            .broadcast("json", TO_EVERY_TASK)
            .window(window, "per-10s")
            .map(lambda pane: KV(str(pane.key.pane_id), str(pane.message)))
            .send_to(app_desc.get_output_stream(panes))
        )


class KeyedBroadcast(StreamApplication):
    """Broadcasts the keyed clicks of ``app.clicks`` (framed, string keys, JSON ``{"p": source
    partition}``) with a KVSerde to every task, which sends each as ``key -> p`` to
    ``app.seen``: a KV read back from the broadcast stream is still a KV."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        kafka = KafkaSystemDescriptor("kafka")
        keyed = KVSerde("string", "json")
        clicks = kafka.get_input_descriptor("clicks", keyed).with_framed()
        clicks.with_physical_name(_topic(app_desc, "app.clicks"))
        seen = kafka.get_output_descriptor("seen", KVSerde("string", "string"))
        seen.with_physical_name(_topic(app_desc, "app.seen"))
        (
            app_desc.get_input_stream(clicks)
            .broadcast(keyed, TO_EVERY_TASK)
            .map(lambda kv: KV(kv.key, str(kv.value["p"])))
            .send_to(app_desc.get_output_stream(seen))
        )
