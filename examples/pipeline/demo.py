"""`make demo`: the PySpark pipeline end to end on this machine, then a short summary.

1. start a Kafka broker of its own (scripts/kafka.sh, a fresh data directory, free ports);
2. generate the page-view dataset (seeded CSV) and create the topic ``page-views``;
3. run the PySpark batch job (local mode): every row to ``page-views``, framed, then each
   Spark task's watermark and end-of-stream;
4. start the profile service and run ``samzapy run configs/pageviews-pipeline.yaml`` (the
   application of ``app.py``), which finishes by itself when Spark's batch has ended;
5. read the results back, print rows in, results out, times and rates, check the windowed
   counts (each member's panes sum to its views, every pane once and DEFAULT, closed by
   Spark's watermark or at end-of-stream), and stop the broker.

    python -m examples.pipeline.demo [--rows 200000] [--out data/pipeline] [--config JOB_YAML]
        [--window-minutes 10]

``--config configs/pageviews-pipeline-task.yaml`` runs the same job as a task class
(``tasks.py``) instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from examples.pipeline.app import DEFAULT_WINDOW_MINUTES
from examples.pipeline.dataset import generate
from examples.pipeline.profiles import ProfileService
from samzapy.control import WATERMARK, decode

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "pageviews-pipeline.yaml"
SOURCE_PARTITIONS = 4


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


class Broker:
    def __init__(self, data_dir: Path) -> None:
        port, controller = free_ports(2)
        self.bootstrap = f"127.0.0.1:{port}"
        self.env = {
            **os.environ,
            "KAFKA_PORT": str(port),
            "KAFKA_CONTROLLER_PORT": str(controller),
            "SAMZAPY_KAFKA_DIR": str(data_dir),
            "KAFKA_OWNER_PID": str(os.getpid()),
        }

    def _script(self, verb: str) -> None:
        subprocess.run([str(ROOT / "scripts" / "kafka.sh"), verb], env=self.env, check=True)

    def up(self) -> None:
        self._script("up")

    def down(self) -> None:
        self._script("down")


async def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


async def read_topic(bootstrap: str, topic: str) -> list[Any]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        await consumer._client.force_metadata_update()
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not tps:
            return []
        consumer.assign(tps)
        # seek to the beginning offsets explicitly: seek_to_beginning() is lazy, and a
        # position() right after it can report the end (seen with Kafka 4.3).
        for tp, offset in (await consumer.beginning_offsets(tps)).items():
            consumer.seek(tp, offset)
        ends = await consumer.end_offsets(tps)
        records: list[Any] = []
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                records.extend(batch)
        return records
    finally:
        await consumer.stop()


async def spark_watermark(bootstrap: str, topic: str, tasks: int) -> int | None:
    """The watermark the Spark batch gave ``topic``: the lowest of its tasks' watermarks (each
    task's greatest event time), read from the control records at the end of partition 0
    (every partition gets every task's watermark, then its end-of-stream)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        consumer.seek(tp, max(0, end - 2 * tasks))
        watermarks: dict[str, int] = {}
        while await consumer.position(tp) < end:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                for record in batch:
                    kind, control = decode(record.value)
                    if kind == WATERMARK:
                        watermarks[control.task_name] = control.timestamp
        return min(watermarks.values()) if watermarks else None
    finally:
        await consumer.stop()


async def run_daemon(
    bootstrap: str,
    state: Path,
    log_path: Path,
    config: Path = CONFIG,
    window_minutes: int = DEFAULT_WINDOW_MINUTES,
) -> tuple[int, float]:
    """Run the samzapy job of ``config`` with the profile service up; echo its progress lines."""
    service = ProfileService(delay_ms=2.0)
    await service.start()
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP": bootstrap,
        "PROFILES_URL": service.url,
        "PIPELINE_RUN": str(int(time.time())),
        "PIPELINE_STATE": str(state),
        "PIPELINE_WINDOW_MINUTES": str(window_minutes),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "samzapy", "run", str(config),
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert proc.stdout is not None
    with log_path.open("wb") as log:
        async for line in proc.stdout:
            log.write(line)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") in ("progress", "job_finished", "task_failed", "store_restored"):
                shown = {k: v for k, v in event.items() if k not in ("timestamp", "level")}
                print(f"    samzapy: {json.dumps(shown)}", flush=True)
    code = await proc.wait()
    elapsed = time.monotonic() - started
    await service.stop()
    say(f"profile service answered {service.requests} lookups")
    return code, elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description="run the PySpark -> samzapy pipeline")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--out", type=Path, default=ROOT / "data" / "pipeline")
    parser.add_argument("--config", type=Path, default=CONFIG, help="the samzapy job to run")
    parser.add_argument(
        "--window-minutes",
        type=int,
        default=DEFAULT_WINDOW_MINUTES,
        help="the application's tumbling window, in minutes of event time",
    )
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="samzapy-demo-") as tmp:
        broker = Broker(Path(tmp) / "kafka")
        say(f"starting a Kafka broker on {broker.bootstrap}")
        broker.up()
        try:
            return _pipeline(
                broker.bootstrap,
                args.rows,
                out,
                Path(tmp),
                args.config.resolve(),
                args.window_minutes,
            )
        finally:
            say("stopping the broker")
            broker.down()


@dataclass
class PipelineResult:
    """What a run left behind: the Spark summary, the daemon's exit code and time, and the
    results read back (final count per member, enriched views, the windows' panes with the
    partition each was read from, and the watermark Spark's batch ended with)."""

    written: dict[str, Any]
    code: int
    elapsed: float
    window_ms: int
    counts: dict[str, dict[str, Any]] = field(default_factory=dict)
    enriched: list[dict[str, Any]] = field(default_factory=list)
    panes: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    spark_watermark: int | None = None


@dataclass(frozen=True)
class WindowCheck:
    """The windowed counts against the running counts: each member's panes sum to its final
    count, each (member, window) has one pane, every pane fired DEFAULT; and how many windows
    ended by Spark's watermark (closed by it) or after it (closed at end-of-stream)."""

    panes: int
    windows: int
    sums_match: bool
    each_once: bool
    all_default: bool
    closed_by_watermark: int
    closed_at_end: int

    @property
    def ok(self) -> bool:
        return self.panes > 0 and self.sums_match and self.each_once and self.all_default


def check_windows(result: PipelineResult) -> WindowCheck:
    panes = [pane for _, pane in result.panes]
    per_member: Counter[str] = Counter()
    for pane in panes:
        per_member[pane["member_id"]] += int(pane["views"])
    keys = Counter((pane["member_id"], pane["window_start"]) for pane in panes)
    ends = [pane["window_start"] + result.window_ms for pane in panes]
    watermark = result.spark_watermark
    by_watermark = sum(1 for end in ends if watermark is not None and end <= watermark)
    return WindowCheck(
        panes=len(panes),
        windows=len({pane["window_start"] for pane in panes}),
        sums_match=dict(per_member) == {m: int(e["views"]) for m, e in result.counts.items()},
        each_once=all(n == 1 for n in keys.values()),
        all_default=all(pane["firing"] == "DEFAULT" for pane in panes),
        closed_by_watermark=by_watermark,
        closed_at_end=len(panes) - by_watermark,
    )


def run_pipeline(
    bootstrap: str,
    csv_path: Path,
    out: Path,
    tmp: Path,
    config: Path = CONFIG,
    window_minutes: int = DEFAULT_WINDOW_MINUTES,
) -> PipelineResult:
    """Steps 2-5 against the broker at ``bootstrap`` (``page-views`` must not exist yet), with
    the samzapy job of ``config`` (the application's window: ``window_minutes``)."""
    asyncio.run(create_topic(bootstrap, "page-views", SOURCE_PARTITIONS))
    say("running the PySpark batch job (local mode)")
    spark = subprocess.run(
        [sys.executable, "-m", "examples.pipeline.spark_job", "--input", str(csv_path),
         "--bootstrap", bootstrap, "--topic", "page-views"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True,
    )  # fmt: skip
    if spark.returncode != 0:
        raise RuntimeError(f"the Spark job failed ({spark.returncode}):\n{spark.stderr[-3000:]}")
    written = json.loads(spark.stdout.strip().splitlines()[-1])
    say(
        f"Spark wrote {written['rows']:,} rows from {written['spark_partitions']} tasks in "
        f"{written['write_s']:.1f} s ({written['rows'] / written['write_s']:,.0f} rows/s)"
    )
    say(f"running the samzapy job of {config.name} until Spark's batch has ended")
    code, elapsed = asyncio.run(
        run_daemon(bootstrap, tmp / "state", out / "samzapy.log", config, window_minutes)
    )
    result = PipelineResult(written, code, elapsed, window_minutes * 60_000)
    if code == 0:
        # A member's counts are on one partition, in order: the last one read is its final.
        for record in asyncio.run(read_topic(bootstrap, "member-view-counts")):
            entry = json.loads(record.value)
            result.counts[entry["member_id"]] = entry
        result.enriched = [
            json.loads(r.value) for r in asyncio.run(read_topic(bootstrap, "enriched-page-views"))
        ]
        result.panes = [
            (r.partition, json.loads(r.value))
            for r in asyncio.run(read_topic(bootstrap, "member-window-counts"))
        ]
        result.spark_watermark = asyncio.run(
            spark_watermark(bootstrap, "page-views", written["spark_partitions"])
        )
    return result


def _pipeline(
    bootstrap: str, rows: int, out: Path, tmp: Path, config: Path, window_minutes: int
) -> int:
    csv_path = generate(rows, out / "page-views.csv")
    say(f"dataset: {rows:,} page views in {csv_path}")
    result = run_pipeline(bootstrap, csv_path, out, tmp, config, window_minutes)
    log_path = out / "samzapy.log"
    if result.code != 0:
        say(f"samzapy exited {result.code}; its log: {log_path}")
        return result.code
    counts, enriched, written = result.counts, result.enriched, result.written
    result_path = out / "member-view-counts.jsonl"
    result_path.write_text("".join(json.dumps(counts[m]) + "\n" for m in sorted(counts)))
    total = sum(int(e["views"]) for e in counts.values())
    countries = Counter(e["country"] for e in enriched)
    top = sorted(counts.values(), key=lambda e: -int(e["views"]))[:3]
    elapsed = result.elapsed
    print()
    print("samzapy pipeline summary")
    print(f"  rows in (Spark -> page-views):      {written['rows']:,}")
    print(f"  views counted (sum over members):   {total:,}")
    print(f"  members:                            {len(counts):,}")
    print(f"  enriched views:                     {len(enriched):,}")
    print(f"  daemon time, start to finish:       {elapsed:.1f} s ({rows / elapsed:,.0f} rows/s)")
    print(f"  top members:                        {[(e['member_id'], e['views']) for e in top]}")
    print(f"  views by country:                   {dict(countries.most_common())}")
    print(f"  results:                            {result_path}")
    print(f"  samzapy log (JSON lines):           {log_path}")
    ok = total == written["rows"] == len(enriched)
    print(f"  every row counted and enriched:     {'yes' if ok else 'NO'}")
    if not result.panes:  # the task class's job (pageviews-pipeline-task.yaml) has no window
        print(f"  windowed counts:                    none ({config.name} has no window)")
        return 0 if ok else 1
    windows = check_windows(result)
    panes_path = out / "member-window-counts.jsonl"
    panes_path.write_text("".join(json.dumps(pane) + "\n" for _, pane in result.panes))
    print(f"  windowed counts (event time):       {windows.panes:,} panes, "
          f"{windows.windows} windows of {window_minutes} min")  # fmt: skip
    print(f"    closed by Spark's watermark:      {windows.closed_by_watermark:,} "
          f"(windows ending by {_utc(result.spark_watermark)})")  # fmt: skip
    print(f"    closed at end-of-stream:          {windows.closed_at_end:,}")
    print(f"    panes:                            {panes_path}")
    print(f"  panes sum to each member's views:   {'yes' if windows.sums_match else 'NO'}")
    print(f"  each pane once, fired DEFAULT:      "
          f"{'yes' if windows.each_once and windows.all_default else 'NO'}")  # fmt: skip
    return 0 if ok and windows.ok else 1


def _utc(ms: int | None) -> str:
    if ms is None:
        return "none"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


if __name__ == "__main__":
    sys.exit(main())
