"""Windows in event time on a real Kafka broker: a keyed tumbling count (the high-level API's
``window``) beside task classes counting in a RocksDB store by hand, in interleaved rounds.

bench_kafka's harness: one broker, an 8-partition topic of N messages (default 1,000,000) of
100 bytes of JSON, ``{"k": "k0001234", "t": 1700000012345, "p": "ppp..."}``: message ``i`` on
partition ``i % 8``, its key ``i % K`` (K default 100,000, so each task counts its own K/8
keys), its event time ``T0 + i`` ms less a jitter of 0 to 499 ms (``T0`` a multiple of the
interval): the times increase across the input with a little disorder, never more than the
watermarks' 1 s allow, so no message is late. The tumbling interval (default 100 s) makes
N/100,000 windows of the input (10 at the default N), each seeing about one message per key.
Every job runs as ``samzapy run job.yaml`` in a fresh process (Kafka checkpoints and
changelogs, the ``log`` metrics reporter, JSON logs at info, the shipped defaults elsewhere:
at-least-once, the ``kafka-group`` coordinator, the default commit interval), measured from
its first message until it has processed N and stopped gracefully (Kafka has no bounded mode:
bench_kafka's StopAfter counts the processed messages): wall time, process CPU time, RSS:

- ``window``: an application, ``input.with_timestamp(t).with_watermarks(1 s)`` ->
  ``window(Windows.keyed_tumbling_window(k, interval, 0, +1).with_event_time(), "counts")``
  -> ``map`` to ``KV(key, [pane id, count])`` -> ``send_to`` the output; its store is the one
  the plan gives a window (RocksDB with a changelog, pickled keys and values);
- ``task-window``: the same by hand, the fair equivalent: a task class keeping each pane's
  count per key in a RocksDB store with a changelog (``get`` + ``put`` per message, keyed by
  the pane id and the key), its watermark the largest event time seen minus 1 s, checked per
  message; a pane whose end it passes is read as one range of the store, each key's count
  sent as the application sends it (same serdes, key, value and record time) and deleted;
- ``task-count``: the issue's reference taken literally: ``get`` + ``put`` per message of a
  count per key (``string`` keys, ``long`` values) in a RocksDB store with a changelog,
  sending nothing.

The panes of the last window are still open when the jobs stop (no watermark passes its
end), in every variant alike. Printed per run: rate, CPU time per message, RSS (when the
first message came, half-way, at the end, and the peak: memory bounded by the open windows
stays level from half-way on once RocksDB's write buffers are full, which takes a few million
messages), output and changelog records per message; then bench_kafka's table (medians,
spread, median per-round ratios to ``task-window``), the median RSS figures per variant and
the goal's per-round ratios: ``window`` >= 0.7 of the hand-written count's rate, against both
task classes. ``--against COMMIT`` adds ``before:window`` runs importing samzapy from a
temporary worktree of COMMIT (it must have windows).

Usage: python bench/bench_window.py [--messages N] [--keys K] [--interval-s S] [--rounds R]
                                    [--commit-ms default,5000] [--against COMMIT] [--json]
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_app import Job, goal
from bench_kafka import (
    PAYLOAD,
    StopAfter,
    Variant,
    arguments,
    end_offsets_total,
    interleaved,
    prepared,
    report,
)
from bench_state import fill_keyed

from samzapy import (
    KV,
    EndOfStreamListenerTask,
    InitableTask,
    KafkaSystemDescriptor,
    KVSerde,
    OutgoingMessageEnvelope,
    StreamApplication,
    StreamApplicationDescriptor,
    StreamTask,
    SystemStream,
    Windows,
)

STORE = "counts"  # the window's op id and the task classes' store
#: The generated watermarks' out-of-orderness, and the hand-written task's.
OUT_OF_ORDERNESS_MS = 1000
#: The input's disorder: each event time is late by up to this (< OUT_OF_ORDERNESS_MS).
JITTER_MS = 500
T0 = 1_700_000_000_000

# -- the data ---------------------------------------------------------------------------------


def event_time(i: int, interval_ms: int) -> int:
    """Message ``i``'s event time: ``i`` ms after an interval boundary, less a deterministic
    jitter of 0 to JITTER_MS - 1 (none before the boundary)."""
    return T0 - T0 % interval_ms + max(0, i - (i * 2_654_435_761) % JITTER_MS)


def keyed_event(interval_ms: int) -> Any:
    def message(i: int, keys: int) -> bytes:
        head = b'{"k":"k%07d","t":%d,"p":"' % (i % keys, event_time(i, interval_ms))
        return head + b"p" * (len(PAYLOAD) - len(head) - 2) + b'"}'

    return message


# -- (a) the application ------------------------------------------------------------------------


def key_of(message: dict[str, Any]) -> str:
    return str(message["k"])


def time_of(message: dict[str, Any]) -> int:
    return int(message["t"])


def zero() -> int:
    return 0


def plus_one(message: Any, count: int) -> int:
    return count + 1


def pane_kv(pane: Any) -> KV:
    return KV(pane.key.key, [pane.key.pane_id, pane.message])


class WindowCountApp(StreamApplication):
    """The keyed tumbling count in event time, ``app.interval.ms`` wide."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        config = app_desc.config
        kafka = KafkaSystemDescriptor("kafka")
        source = kafka.get_input_descriptor("in", "json")
        source.with_physical_name(config["app.source"])
        source.with_timestamp(time_of).with_watermarks(timedelta(milliseconds=OUT_OF_ORDERNESS_MS))
        sink = kafka.get_output_descriptor("out", KVSerde("string", "json"))
        sink.with_physical_name(config["app.sink"])
        interval = timedelta(milliseconds=int(config["app.interval.ms"]))
        counts = Windows.keyed_tumbling_window(key_of, interval, zero, plus_one).with_event_time()
        out = app_desc.get_output_stream(sink)
        app_desc.get_input_stream(source).window(counts, STORE).map(pane_kv).send_to(out)


# -- (b) the task classes -----------------------------------------------------------------------


class WindowCountTask(InitableTask, StreamTask, EndOfStreamListenerTask):
    """The tumbling count by hand: store key = pane id (8 bytes, big-endian) + the key; at
    the end of a bounded input every pane fires, as the window's do."""

    def init(self, context: Any) -> None:
        self.store = context.get_store(STORE)
        self.sink = SystemStream("kafka", context.config["app.sink"])
        self.size = int(context.config["app.interval.ms"])
        self.top = -(2**62)  # the largest event time seen
        self.panes: set[int] = set()  # the panes with counts in the store
        with self.store.range(bytes(8), b"\xff" * 9) as entries:
            self.panes.update(int.from_bytes(e.key[:8], "big") for e in entries)
        self.next_end = min((p + self.size for p in self.panes), default=None)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        message = envelope.message
        t = message["t"]
        pane = t - t % self.size
        skey = pane.to_bytes(8, "big") + message["k"].encode()
        store = self.store
        store.put(skey, (store.get(skey) or 0) + 1)
        if pane not in self.panes:
            self.panes.add(pane)
            if self.next_end is None or pane + self.size < self.next_end:
                self.next_end = pane + self.size
        if t > self.top:
            self.top = t
            if self.next_end is not None and t - OUT_OF_ORDERNESS_MS >= self.next_end:
                self.fire(t - OUT_OF_ORDERNESS_MS, collector)

    def on_end_of_stream(self, collector: Any, coordinator: Any) -> None:
        self.fire(2**62, collector)

    def fire(self, watermark: int, collector: Any) -> None:
        for pane in sorted(p for p in self.panes if p + self.size <= watermark):
            start = pane.to_bytes(8, "big")
            with self.store.range(start, (pane + 1).to_bytes(8, "big")) as entries:
                found = [(e.key, e.value) for e in entries]
            for skey, count in found:
                envelope = OutgoingMessageEnvelope(self.sink, [pane, count], skey[8:].decode())
                envelope.timestamp = pane + self.size - 1
                collector.send(envelope)
            self.store.delete_all([skey for skey, _ in found])
            self.panes.discard(pane)
        self.next_end = min((p + self.size for p in self.panes), default=None)


class CountTask(InitableTask, StreamTask):
    """The issue's reference: a count per key, sending nothing."""

    def init(self, context: Any) -> None:
        self.store = context.get_store(STORE)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        key = envelope.message["k"]
        store = self.store
        store.put(key, (store.get(key) or 0) + 1)


# -- measuring ------------------------------------------------------------------------------------


def rss_mb() -> float:
    """This process's resident set now, MB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class StopAfterWithMemory(StopAfter):
    """bench_kafka's StopAfter, its figures with the RSS when the first message came
    (``rss_start_mb``), when half the messages were processed (``rss_half_mb``) and when
    the job stopped (``rss_end_mb``), and the process's peak (``rss_peak_mb``): memory
    bounded by the open windows stays level from half-way to the end."""

    rss_start = rss_half = 0.0

    async def _watch(self) -> None:
        counter = self._counter
        while counter.count == 0:  # noqa: ASYNC110 - a counter, not an event
            await asyncio.sleep(0.01)
        self.rss_start = rss_mb()
        half = asyncio.get_running_loop().create_task(self._half_way())
        try:
            await super()._watch()
        finally:
            half.cancel()

    async def _half_way(self) -> None:
        while self._counter.count < self.target // 2:  # noqa: ASYNC110 - a counter
            await asyncio.sleep(0.05)
        self.rss_half = rss_mb()

    async def stop(self) -> None:
        await super().stop()
        if self.result_path.exists():
            figures = json.loads(self.result_path.read_text())
            figures["rss_start_mb"] = self.rss_start
            figures["rss_half_mb"] = self.rss_half
            figures["rss_end_mb"] = rss_mb()
            figures["rss_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            self.result_path.write_text(json.dumps(figures))


class WindowJob(Job):
    """bench_app's Job, each run with its state under ``workdir`` and, for the task classes,
    the store and its changelog (``store_keys``: its serdes); ``last_changelog``: the
    changelog topic of the last run."""

    def __init__(self, bootstrap: str, runs: str, commit_ms: int | None, **kw: Any) -> None:
        self.workdir: Path = kw.pop("workdir")
        self.store_keys: dict[str, str] = kw.pop("store_keys", {})
        super().__init__(bootstrap, runs, commit_ms, **kw)
        self.reporter = "bench_window:StopAfterWithMemory"
        self.last_changelog = ""

    def __call__(self, source: str, sink: str, name: str) -> str:
        cfg = json.loads(super().__call__(source, sink, name))
        cfg["job.logged.store.base.dir"] = str(self.workdir / "state")
        if self.app:  # the plan's name of the window's changelog
            self.last_changelog = f"{name}-1-{STORE}-changelog"
        else:
            self.last_changelog = f"{name}-changelog"
            cfg[f"stores.{STORE}.factory"] = "rocksdb"
            cfg[f"stores.{STORE}.changelog"] = f"kafka.{self.last_changelog}"
            cfg.update({f"stores.{STORE}.{k}": v for k, v in self.store_keys.items()})
        return json.dumps(cfg, indent=2)


def variants(
    bootstrap: str, commits: list[int | None], workdir: Path, interval_ms: int, before: Any
) -> list[Variant]:
    keys = {"app.interval.ms": interval_ms}
    out: list[Variant] = []
    for ms in commits:
        tag = ms or "default"
        common = {"workdir": workdir, "keys": keys}
        window = WindowJob(bootstrap, "bench_window:WindowCountApp", ms, app=True, **common)
        out.append(Variant(f"window@{tag}", window))
        if before is not None:
            out.append(Variant(f"before:window@{tag}", window, before))
        by_hand = {"key.serde": "bytes", "msg.serde": "long"}
        task = WindowJob(
            bootstrap, "bench_window:WindowCountTask", ms, app=False, store_keys=by_hand, **common
        )
        out.append(Variant(f"task-window@{tag}", task))
        count = {"key.serde": "string", "msg.serde": "long"}
        plain = WindowJob(
            bootstrap, "bench_window:CountTask", ms, app=False, store_keys=count, **common
        )
        out.append(Variant(f"task-count@{tag}", plain))
    return out


def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.set_defaults(commit_ms=[None])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--interval-s", type=float, default=100.0, help="the tumbling interval")
    args = parser.parse_args()
    interval_ms = int(args.interval_s * 1000)
    windows = -(-args.messages // interval_ms)
    about = (
        f", JSON events of {min(args.keys, args.messages):,} keys over {windows} tumbling "
        f"windows of {args.interval_s:g} s in event time"
    )

    async def fill(bootstrap: str, topic: str, n: int) -> None:
        await fill_keyed(bootstrap, topic, n, args.keys, message=keyed_event(interval_ms))

    with prepared(args, "bench-window-in", fill, about) as (bootstrap, before, workdir, source, n):
        everything = variants(bootstrap, args.commit_ms, workdir, interval_ms, before)

        def after(variant: Variant, figures: dict[str, float]) -> None:
            job = variant.job
            figures["output_per_msg"] = asyncio.run(end_offsets_total(bootstrap, job.sink)) / n
            changelog = asyncio.run(end_offsets_total(bootstrap, job.last_changelog))
            figures["changelog_per_msg"] = changelog / n
            print(
                f"  {variant.name:<24} {figures['rate']:>9,.0f} msg/s {figures['cpu_us']:>7.2f} "
                f"us cpu/msg   RSS MB first message/half-way/end/peak "
                f"{figures['rss_start_mb']:.0f}/{figures['rss_half_mb']:.0f}/"
                f"{figures['rss_end_mb']:.0f}/{figures['rss_peak_mb']:.0f}   output "
                f"{figures['output_per_msg']:.3f}/msg, changelog {changelog / n:.3f}/msg",
                flush=True,
            )

        try:
            interleaved(everything, args.rounds, bootstrap, source, n, workdir, after)
        except SystemExit as exc:  # the work directory goes: show the failed run's log first
            log = Path(str(exc).rpartition("its log: ")[2])
            if log.is_file():
                print(f"the end of {log}:\n{log.read_text()[-4000:]}", file=sys.stderr)
            raise
        figures: dict[str, Any] = {}
        for ms in args.commit_ms:
            tag = ms or "default"
            mine = [v for v in everything if v.name.endswith(f"@{tag}")]
            print(f"\nkeyed tumbling count in event time, commit {tag}")
            figures.update(report(mine, f"task-window@{tag}"))
            print("RSS, median of the rounds (MB): first message, half-way, end, peak")
            for v in mine:
                rss = {
                    k: statistics.median(r[f"rss_{k}_mb"] for r in v.runs)
                    for k in ("start", "half", "end", "peak")
                }
                figures[v.name].update({f"rss_{k}_mb": val for k, val in rss.items()})
                print(f"{v.name:<26} " + " ".join(f"{val:>6,.0f}" for val in rss.values()))
            goal(everything, f"window@{tag}", f"task-window@{tag}", 0.7, figures)
            goal(everything, f"window@{tag}", f"task-count@{tag}", 0.7, figures)
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
        if args.json:
            print(json.dumps(figures))


if __name__ == "__main__":
    main()
