"""Consume -> produce over a real Kafka broker: samzapy as `samzapy run` runs it, beside a plain
aiokafka loop, in interleaved rounds, with the client's CPU time per message beside each rate.

One broker, an 8-partition topic of N messages of 100 bytes (default 1,000,000). Each round
runs every variant once, in a fresh process of its own, in an order that rotates from round to
round (backwards every other round), each writing to a topic of its own:

- ``plain``: a plain aiokafka loop written as well as we can: one assigned consumer, ``getmany``
  in large batches, per-partition ``create_batch`` / ``send_batch`` on an idempotent ``acks=all``
  producer with a 5 ms linger: the ceiling users compare against;
- ``samzapy@5000`` and ``samzapy@default``: the command ``samzapy run job.yaml`` on a job with a
  sync pass-through task (same partition out as in), Kafka checkpoints, the ``log`` metrics
  reporter, JSON logs at info on stdout (to a file) and the default coordinator
  (``kafka-group``), with ``task.commit.ms`` 5000 and at its default (60000).

Each process measures itself from its first message until it has processed N and stopped
(the samzapy job: a graceful stop with its final commit; the plain loop: every delivery
acknowledged and its clients stopped): wall time and process CPU time (``getrusage``, user +
system, every thread). Printed per variant: the median rate and CPU time per message of the
rounds, their spread, and the median of the per-round ratios to ``plain``. The CPU time is the
steadier figure on a shared machine; the rate follows it where the broker shares the cores.

``--against COMMIT`` adds ``before@...`` variants: the same jobs importing samzapy from a
temporary git worktree of COMMIT, interleaved with the others (before and after in one run).
``--latency-seconds S`` (> 0) then measures samzapy's end-to-end latency at half its rate.

Why this bench once read higher than a side-by-side run of the two as a user runs them: it
ran samzapy's container inside the benchmark's own process without checkpoints (no
``task.checkpoint.factory``), with logging at warning and no coordinator, timed by wall clock
only, and always measured the plain loop first, on a broker just started, whose first reads
are its slowest (here, a first plain run 97,500 msg/s against 155,000 to 233,000 later).

The broker comes from SAMZAPY_KAFKA_BOOTSTRAP, or is started with scripts/kafka.sh on a free
port and stopped at the end.

Usage: python bench/bench_kafka.py [--messages N] [--rounds R] [--commit-ms 5000,default]
                                   [--against COMMIT] [--latency-seconds S] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from samzapy import InitableTask, OutgoingMessageEnvelope, StreamTask, SystemStream
from samzapy.container.event_loop import loop_factory
from samzapy.metrics import MetricsRegistry, MetricsReporter

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
PARTITIONS = 8
PAYLOAD = b"x" * 100

# -- the broker and the data ------------------------------------------------------------------


@contextlib.contextmanager
def broker() -> Iterator[str]:
    existing = os.environ.get("SAMZAPY_KAFKA_BOOTSTRAP")
    if existing:
        yield existing
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "KAFKA_PORT": str(port),
        "KAFKA_CONTROLLER_PORT": str(port + 1),
        "SAMZAPY_KAFKA_DIR": tempfile.mkdtemp(prefix="samzapy-bench-kafka-"),
    }
    script = str(ROOT / "scripts" / "kafka.sh")
    subprocess.run([script, "up"], env=env, check=True, stdout=subprocess.DEVNULL)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([script, "down"], env=env, check=False, stdout=subprocess.DEVNULL)


async def create_topics(bootstrap: str, *names: str, partitions: int = PARTITIONS) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    finally:
        await admin.close()


async def fill(bootstrap: str, topic: str, n: int, partitions: int = PARTITIONS) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks=1)
    await producer.start()
    try:
        futures = []
        per = n // partitions
        for p in range(partitions):
            batch = producer.create_batch()
            for _ in range(per):
                if batch.append(key=None, value=PAYLOAD, timestamp=None) is None:
                    futures.append(await producer.send_batch(batch, topic, partition=p))
                    batch = producer.create_batch()
                    batch.append(key=None, value=PAYLOAD, timestamp=None)
            futures.append(await producer.send_batch(batch, topic, partition=p))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def end_offsets_total(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return sum((await consumer.end_offsets(tps)).values())
    finally:
        await consumer.stop()


# -- what a measured process records ----------------------------------------------------------


def cpu_seconds() -> float:
    """This process's CPU time so far, user + system, all threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Meter:
    """Wall and CPU time from the first message to the end of a measured run."""

    def __init__(self) -> None:
        self.t0 = 0.0
        self.cpu0 = 0.0
        self.counted_from = 0

    def start(self, already: int = 0) -> None:
        """The first message was seen; ``already`` messages were processed before this."""
        self.t0, self.cpu0, self.counted_from = time.perf_counter(), cpu_seconds(), already

    def result(self, processed: int) -> dict[str, float]:
        wall, cpu = time.perf_counter() - self.t0, cpu_seconds() - self.cpu0
        messages = processed - self.counted_from
        return {
            "messages": messages,
            "rate": messages / wall,
            "cpu_us": cpu / messages * 1e6,
            "wall_s": wall,
            "cpu_s": cpu,
            # The process's peak resident memory (Linux reports KiB).
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }


# -- the plain aiokafka loop (a child process) ------------------------------------------------


async def plain_loop(bootstrap: str, source: str, sink: str, n: int) -> dict[str, float]:
    """getmany + per-partition batches, idempotent acks=all producer."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, max_partition_fetch_bytes=4 << 20
    )
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=5
    )
    await consumer.start()
    await producer.start()
    meter = Meter()
    try:
        consumer.assign([TopicPartition(source, p) for p in range(PARTITIONS)])
        await consumer.seek_to_beginning()
        seen = 0
        pending = []
        while seen < n:
            records = await consumer.getmany(timeout_ms=200, max_records=10_000)
            if records and not seen:
                meter.start()
            for tp, batch_records in records.items():
                batch = producer.create_batch()
                for r in batch_records:
                    if batch.append(key=r.key, value=r.value, timestamp=None) is None:
                        pending.append(
                            await producer.send_batch(batch, sink, partition=tp.partition)
                        )
                        batch = producer.create_batch()
                        batch.append(key=r.key, value=r.value, timestamp=None)
                pending.append(await producer.send_batch(batch, sink, partition=tp.partition))
                seen += len(batch_records)
        await asyncio.gather(*pending)
    finally:
        await consumer.stop()
        await producer.stop()
    return meter.result(seen)


# -- samzapy, as `samzapy run job.yaml` runs it (a child process) -----------------------------


class PassThrough(InitableTask, StreamTask):
    """Sends every message to ``app.sink`` (a stream name), on the partition it came from."""

    def init(self, context: Any) -> None:
        self.sink = SystemStream("kafka", context.config["app.sink"])

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        collector.send(
            OutgoingMessageEnvelope(
                self.sink, envelope.message, partition=envelope.system_stream_partition.partition
            )
        )


class StopAfter(MetricsReporter):
    """``metrics.reporters: [..., bench_kafka:StopAfter]``: measures the job it runs in.

    Reads ``SAMZAPY_BENCH_MESSAGES`` (how many messages to process) and
    ``SAMZAPY_BENCH_RESULT`` (where to write the figures, JSON) from the environment. It polls
    the container's ``messages-processed`` counter (every 10 ms until the first message, then
    often enough to notice the end within about 1 % of the run), sends its own process SIGTERM
    once N are processed (the graceful stop `samzapy run` makes on SIGTERM) and writes the
    figures when the job stops it, after the job's final commit, with the 99th percentile
    of the commits' latency (a commit holds its task while the producers flush)."""

    def __init__(self) -> None:
        self.target = int(os.environ["SAMZAPY_BENCH_MESSAGES"])
        self.result_path = Path(os.environ["SAMZAPY_BENCH_RESULT"])
        self.meter = Meter()
        self.processed = 0
        self._task: asyncio.Task[None] | None = None
        self._counter: Any = None
        self._commits: Any = None

    async def start(self, registry: MetricsRegistry) -> None:
        self._counter = registry.counter("container", "messages-processed")
        self._commits = registry.timer("container", "commit-latency")
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        counter = self._counter
        while (first := counter.count) == 0:  # noqa: ASYNC110 - a counter, not an event
            await asyncio.sleep(0.01)
        self.meter.start(first)
        begun = time.perf_counter()
        while (done := counter.count) < self.target:
            elapsed = time.perf_counter() - begun
            rate = max(done - first, 1) / max(elapsed, 1e-3)
            await asyncio.sleep(min(0.25, max(0.005, (self.target - done) / rate / 4)))
        self.processed = done
        os.kill(os.getpid(), signal.SIGTERM)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self.processed > self.meter.counted_from:
            self.processed = max(self.processed, self._counter.count)
            figures = self.meter.result(self.processed)
            figures["commit_p99_ms"] = self._commits.percentile_ns(0.99) / 1e6
            self.result_path.write_text(json.dumps(figures))


def job_yaml(
    bootstrap: str,
    source: str,
    *,
    name: str,
    task_class: str,
    commit_ms: int | None,
    extra: dict[str, Any] | None = None,
) -> str:
    """A job file as a user writes one (JSON is YAML): checkpoints in Kafka, logs and the log
    metrics reporter on, the defaults everywhere else; ``commit_ms`` None keeps the default."""
    cfg: dict[str, Any] = {
        "job.name": name,
        "task.class": task_class,
        "task.inputs": [f"kafka.{source}"],
        "task.checkpoint.factory": "kafka",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        "metrics.reporters": ["log", "bench_kafka:StopAfter"],
        **(extra or {}),
    }
    if commit_ms is not None:
        cfg["task.commit.ms"] = commit_ms
    return json.dumps(cfg, indent=2)


# -- the parent: variants in interleaved rounds -----------------------------------------------


@dataclass
class Variant:
    """One measured configuration: ``plain``, or a samzapy job (``job`` builds its file from
    the run's topics and a fresh name) run from ``tree`` (None: this checkout)."""

    name: str
    job: Any = None  # (source, sink, name) -> job YAML text
    tree: Path | None = None
    runs: list[dict[str, float]] = field(default_factory=list)


def samzapy_run(job_file: Path, log: Path, env: dict[str, str], tree: Path | None = None) -> int:
    """Run ``samzapy run job_file`` to its end (the task classes and the meter from this
    directory, samzapy from ``tree``, default this checkout), its output to ``log``."""
    env = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(tree or ROOT), str(BENCH)])}
    with log.open("w") as out:
        argv = [sys.executable, "-m", "samzapy.cli", "run", str(job_file)]
        done = subprocess.run(argv, cwd=BENCH, env=env, stdout=out, stderr=out, check=False)
    return done.returncode


def run_variant(
    variant: Variant, bootstrap: str, source: str, n: int, workdir: Path, run: int
) -> dict[str, float]:
    """Run one variant in a fresh process; its figures."""
    sink = f"bench-out-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topics(bootstrap, sink))
    result = workdir / f"result-{run}.json"
    log = workdir / f"{variant.name.replace('@', '-')}-{run}.log"
    env = {"SAMZAPY_BENCH_MESSAGES": str(n), "SAMZAPY_BENCH_RESULT": str(result)}
    if variant.job is None:
        argv = [sys.executable, str(Path(__file__).resolve()), "--child-plain"]
        argv += [bootstrap, source, sink, str(n), str(result)]
        with log.open("w") as out:
            code = subprocess.run(argv, cwd=BENCH, stdout=out, stderr=out, check=False).returncode
    else:
        job_file = workdir / f"job-{run}.yaml"
        job_file.write_text(variant.job(source, sink, f"bench-{uuid.uuid4().hex[:8]}"))
        code = samzapy_run(job_file, log, env, variant.tree)
    if code != 0 or not result.exists():
        raise SystemExit(f"{variant.name} failed (exit {code}); its log: {log}")
    figures: dict[str, float] = json.loads(result.read_text())
    result.unlink()
    return figures


def interleaved(
    variants: Sequence[Variant],
    rounds: int,
    bootstrap: str,
    source: str,
    n: int,
    workdir: Path,
    after: Callable[[Variant, dict[str, float]], None] | None = None,
    warm_up: int | None = None,
) -> None:
    """``rounds`` rounds of every variant; the order rotates every two rounds, and every
    other round runs backwards (rotating and reversing every round would cancel out with
    two variants: A B, A B...; this gives A B, B A, B A, A B), so that no variant always
    follows the same one (the broker may still be busy with the previous run's output).
    ``after`` may add figures to a run's once it ended. One unmeasured run of the plain loop
    first warms the broker up (its JVM compiles the fetch path during the first reads), of
    ``warm_up`` messages (None:
    ``n``; the plain loop can read no more than the topic holds)."""
    run_variant(Variant("warm-up"), bootstrap, source, warm_up or n, workdir, 0)
    run = 0
    for r in range(rounds):
        order = [variants[(r // 2 + i) % len(variants)] for i in range(len(variants))]
        if r % 2:
            order.reverse()
        for variant in order:
            run += 1
            figures = run_variant(variant, bootstrap, source, n, workdir, run)
            if after is not None:
                after(variant, figures)
            variant.runs.append(figures)
        print(f"round {r + 1} of {rounds} done, load {os.getloadavg()[0]:.2f}", file=sys.stderr)


def spread(values: list[float]) -> str:
    """How far the rounds lie from their median, in percent."""
    mid = statistics.median(values)
    return f"{(min(values) / mid - 1) * 100:+.0f}/{(max(values) / mid - 1) * 100:+.0f}%"


def report(variants: Sequence[Variant], reference: str = "plain") -> dict[str, Any]:
    """Print the medians and the median per-round ratios to ``reference``; return them."""
    ref = next(v for v in variants if v.name == reference)
    print(
        f"{'variant':<26} {'msg/s':>9} {'spread':>10} {'us cpu/msg':>11} {'spread':>10}   "
        f"per-round median ratio to {reference}: rate, cpu"
    )
    out: dict[str, Any] = {}
    for v in variants:
        rates = [r["rate"] for r in v.runs]
        cpus = [r["cpu_us"] for r in v.runs]
        pairs = list(zip(v.runs, ref.runs, strict=True))
        rate_ratio = statistics.median(a["rate"] / b["rate"] for a, b in pairs)
        cpu_ratio = statistics.median(a["cpu_us"] / b["cpu_us"] for a, b in pairs)
        extra = {
            k: statistics.median(r[k] for r in v.runs)
            for k in v.runs[0]
            if k.endswith(("_per_msg", "_ms", "_mb"))
        }
        out[v.name] = {
            "rate": statistics.median(rates),
            "cpu_us": statistics.median(cpus),
            "rate_ratio": rate_ratio,
            "cpu_ratio": cpu_ratio,
            **extra,
        }
        more = "".join(f"   {k} {val:.3f}" for k, val in extra.items())
        print(
            f"{v.name:<26} {statistics.median(rates):>9,.0f} {spread(rates):>10} "
            f"{statistics.median(cpus):>11.2f} {spread(cpus):>10}   "
            f"{rate_ratio:5.2f}  {cpu_ratio:5.2f}{more}"
        )
    return out


@contextlib.contextmanager
def tree_of(commit: str | None) -> Iterator[Path | None]:
    """A temporary git worktree of ``commit`` (None: nothing)."""
    if commit is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="samzapy-before-") as tmp:
        path = Path(tmp) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit],
            check=True,
            capture_output=True,
        )
        _build_speedups(path)
        try:
            yield path
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False
            )


def _build_speedups(tree: Path) -> None:
    """Build ``tree``'s C extension in place, as `make venv` builds this checkout's: a tree
    without it would run with the plain ``KV`` beside this checkout's compiled one."""
    if not (tree / "samzapy" / "_speedups.c").exists():
        return
    done = subprocess.run(
        [sys.executable, "setup.py", "--quiet", "build_ext", "--inplace"],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not list((tree / "samzapy").glob("_speedups*.so")):
        print(f"warning: {tree}'s C extension did not build; it runs without it", flush=True)


def commit_settings(text: str) -> list[int | None]:
    """``5000,default`` -> [5000, None]."""
    return [None if c.strip() == "default" else int(c) for c in text.split(",")]


def passthrough_variants(
    bootstrap: str, commits: list[int | None], before: Path | None, label: str
) -> list[Variant]:
    variants = [Variant("plain")]
    for tree, prefix in ((before, f"before:{label}"), (None, "samzapy")):
        if tree is None and prefix != "samzapy":
            continue
        for ms in commits:
            variants.append(
                Variant(f"{prefix}@{ms or 'default'}", passthrough_job(bootstrap, ms), tree)
            )
    return variants


def passthrough_job(
    bootstrap: str, commit_ms: int | None, **extra: Any
) -> Callable[[str, str, str], str]:
    """A variant's job: (source, sink, name) -> the pass-through's job file, at
    ``commit_ms`` (None: the default) and with the ``extra`` keys."""

    def job(source: str, sink: str, name: str) -> str:
        return job_yaml(
            bootstrap,
            source,
            name=name,
            task_class="bench_kafka:PassThrough",
            commit_ms=commit_ms,
            extra={"app.sink": sink, **extra},
        )

    return job


# -- latency ----------------------------------------------------------------------------------


async def latency(
    bootstrap: str,
    rate: float,
    seconds: float,
    workdir: Path,
    *,
    extra: dict[str, Any] | None = None,
    committed: bool = False,
) -> tuple[float, ...]:
    """samzapy's end-to-end latency (produce -> job -> consumed) at a fixed input rate: the
    job runs as `samzapy run` with task.commit.ms 1000 (and ``extra`` keys); ``committed``:
    the reader reads ``read_committed``."""
    source, sink = f"lat-in-{uuid.uuid4().hex[:6]}", f"lat-out-{uuid.uuid4().hex[:6]}"
    await create_topics(bootstrap, source, sink)
    job_file = workdir / "latency.yaml"
    job_file.write_text(
        job_yaml(
            bootstrap,
            source,
            name=f"bench-lat-{uuid.uuid4().hex[:6]}",
            task_class="bench_kafka:PassThrough",
            commit_ms=1000,
            extra={"app.sink": sink, "metrics.reporters": ["log"], **(extra or {})},
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(BENCH)])}
    with (workdir / "latency.log").open("w") as out:
        job = subprocess.Popen(  # noqa: ASYNC220 - started once, before the measurement
            [sys.executable, "-m", "samzapy.cli", "run", str(job_file)],
            cwd=BENCH,
            env=env,
            stdout=out,
            stderr=out,
        )
    reader = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed" if committed else "read_uncommitted",
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, acks=1)
    await reader.start()
    await producer.start()
    try:
        reader.assign([TopicPartition(sink, p) for p in range(PARTITIONS)])
        await reader.seek_to_beginning()
        await asyncio.sleep(5.0)  # let the job join its group and position its consumer
        total = int(rate * seconds)
        latencies: list[float] = []

        async def read() -> None:
            while len(latencies) < total:
                for records in (await reader.getmany(timeout_ms=200)).values():
                    now = time.time()
                    latencies.extend(now - float(r.value.split(b"|")[0]) for r in records)

        reading = asyncio.ensure_future(read())
        # Load in 5 ms ticks, each sent as per-partition batches, so the generator itself
        # stays cheap and on schedule; every message carries its send time.
        start = time.perf_counter()
        sent, tick = 0, 0
        pending = []
        while sent < total:
            tick += 1
            due = min(total, int(rate * tick * 0.005))
            batches = [producer.create_batch() for _ in range(PARTITIONS)]
            stamp = f"{time.time():.6f}|".encode()
            for i in range(sent, due):
                p = i % PARTITIONS
                value = stamp + PAYLOAD[:80]
                if batches[p].append(key=None, value=value, timestamp=None) is None:
                    pending.append(await producer.send_batch(batches[p], source, partition=p))
                    batches[p] = producer.create_batch()
                    batches[p].append(key=None, value=value, timestamp=None)
            for p, batch in enumerate(batches):
                pending.append(await producer.send_batch(batch, source, partition=p))
            sent = due
            delay = start + tick * 0.005 - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
        await asyncio.gather(*pending)
        await asyncio.wait_for(reading, 60)
    finally:
        await producer.stop()
        await reader.stop()
        job.send_signal(signal.SIGTERM)
        job.wait(60)
    latencies.sort()
    return (
        latencies[len(latencies) // 2] * 1000,
        latencies[int(len(latencies) * 0.99)] * 1000,
        total,
    )


def arguments(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--commit-ms",
        type=commit_settings,
        default=[5000, None],
        help="task.commit.ms settings to run samzapy at, e.g. 5000,default",
    )
    parser.add_argument("--against", help="also run the jobs on this earlier commit")
    parser.add_argument("--json", action="store_true", help="print the medians as JSON too")
    return parser


@contextlib.contextmanager
def prepared(
    args: argparse.Namespace,
    prefix: str,
    fill_topic: Callable[[str, str, int], Awaitable[None]],
    about: str = "",
) -> Iterator[tuple[str, Path | None, Path, str, int]]:
    """The broker, the earlier commit's tree (``--against``), a work directory and the input
    topic, filled with ``--messages``: ``(bootstrap, before, workdir, source, n)``."""
    with (
        broker() as bootstrap,
        tree_of(args.against) as before,
        tempfile.TemporaryDirectory(prefix="samzapy-bench-") as tmp,
    ):
        source = f"{prefix}-{uuid.uuid4().hex[:6]}"
        asyncio.run(create_topics(bootstrap, source))
        t0 = time.perf_counter()
        asyncio.run(fill_topic(bootstrap, source, args.messages))
        n = asyncio.run(end_offsets_total(bootstrap, source))
        print(
            f"broker {bootstrap}: {n:,} messages of {len(PAYLOAD)} bytes over {PARTITIONS} "
            f"partitions{about}, filled in {time.perf_counter() - t0:.1f} s; {args.rounds} "
            f"interleaved rounds, load average {os.getloadavg()[0]:.2f} at the start"
        )
        yield bootstrap, before, Path(tmp), source, n


def main() -> None:
    if sys.argv[1:2] == ["--child-plain"]:
        bootstrap, source, sink, n, result = sys.argv[2:7]
        factory, _ = loop_factory("uvloop")  # the loop `samzapy run` picks
        with asyncio.Runner(loop_factory=factory) as runner:
            figures = runner.run(plain_loop(bootstrap, source, sink, int(n)))
        Path(result).write_text(json.dumps(figures))
        return
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--latency-seconds", type=float, default=0.0)
    args = parser.parse_args()
    with prepared(args, "bench-in", fill) as (bootstrap, before, workdir, source, n):
        variants = passthrough_variants(
            bootstrap, args.commit_ms, before, (args.against or "")[:10]
        )
        interleaved(variants, args.rounds, bootstrap, source, n, workdir)
        figures = report(variants)
        for ms in args.commit_ms if before is not None else ():
            earlier = next(v for v in variants if v.name.endswith(f"@{ms or 'default'}"))
            print(f"\nthe same, per round beside {earlier.name}:")
            report(variants, earlier.name)
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
        if args.latency_seconds > 0:
            rate = figures["samzapy@5000" if 5000 in args.commit_ms else variants[-1].name]
            p50, p99, count = asyncio.run(
                latency(bootstrap, rate["rate"] / 2, args.latency_seconds, workdir)
            )
            print(
                f"latency at {rate['rate'] / 2:,.0f} msg/s (half of samzapy's), {count:,} "
                f"messages: p50 {p50:.1f} ms, p99 {p99:.1f} ms"
            )
        if args.json:
            print(json.dumps(figures))


if __name__ == "__main__":
    main()
