"""The high-level API's cost on a real Kafka broker: applications (``app.class``) beside task
classes doing the same work, as `samzapy run` runs both, in interleaved rounds.

bench_kafka's harness: one broker, an 8-partition topic of N messages (default 500,000) of 100
bytes, here page views in JSON (``{"id", "user", "score", "page"}``, the score ``i % 100``,
100,000 users); every job runs as ``samzapy run job.yaml`` in a fresh process of its own (Kafka
checkpoints, the ``log`` metrics reporter, JSON logs at info, the defaults elsewhere, the
default commit interval unless ``--commit-ms`` says otherwise), measured from its first
message to the end of its graceful stop, wall time and process CPU time; the variants run
once per round, in an order that rotates and runs backwards every other round. Every stream
has a serde in the job (input ``json``; output and repartitioned streams ``string`` keys and
``json`` values), for the task classes as for the applications, so that the serdes' work is the
same on both sides.

(a) map/filter/send_to, each view parsed (the input's serde), 90 % kept (``score < 90``), a new
dict made of it and sent keyed by its user:

- ``task``: a task class doing that in ``process``;
- ``app``: ``input.filter(kept).map(keyed_summary).send_to(output)``.

Goal: ``app`` >= 0.95 of ``task``'s rate.

(b) repartitioning by user, the same views, every one sent on:

- ``app-map``: ``input.map(keyed).map(touch).send_to(output)``, no repartitioning;
- ``app-partition_by``: ``input.partition_by(user, whole).map(touch).send_to(output)``: every
  view is written to the job's intermediate stream (8 partitions, framed) and read back by
  the same job, so the process handles each view twice; its figures are per input view
  (processed messages / 2, CPU time over the views);
- ``two-jobs``: the hand-written equivalent, two task-class jobs running concurrently (as
  one would deploy them), each in a process of its own: job 1 sends each view keyed by its
  user to a topic of 8 partitions, job 2 reads that topic and sends each message on to the
  output. Its rate is the views over the time from job 1's first message to job 2's end
  (job 2 starts just before job 1 and waits for its output); its CPU time is both processes'
  over their measured runs, per view. The two jobs may use both cores (with the broker),
  where the application runs both stages in one process: the comparison users make.
- ``app-partition_by-x2``: the ``partition_by`` application as two containers of one job
  (``static``, two processes, tasks k with k % 2 == id), as one deploys it to use both
  cores: the like of ``two-jobs``. Each container stops after its share of both stages'
  messages; the rate is over the span from the first one's first message to the last one's
  end, the CPU time both processes', per input view.

Goals: ``app-partition_by`` >= 0.5 of ``app-map``'s rate, and >= ``two-jobs``'s (printed
for the one process and for the two containers).

Printed: bench_kafka's table per part (median rate and CPU time per message of the rounds,
their spread, the median per-round ratios to the part's reference), then each goal's
per-round ratios, their median and whether it is met. ``--set KEY=VALUE`` adds a key to
every job file (``--set systems.kafka.producer.linger.ms=50``: the producers' linger, which
sizes the intermediate stream's record batches). ``--against COMMIT`` adds ``before:...``
runs of the applications from a temporary worktree of COMMIT (it must have the high-level
API).

Usage: python bench/bench_app.py [--messages N] [--rounds R] [--commit-ms default,5000]
                                 [--set KEY=VALUE]... [--against COMMIT] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_kafka import (
    BENCH,
    PARTITIONS,
    PAYLOAD,
    ROOT,
    StopAfter,
    Variant,
    arguments,
    create_topics,
    end_offsets_total,
    interleaved,
    job_yaml,
    prepared,
    report,
)
from bench_state import fill_keyed

from samzapy import (
    KV,
    InitableTask,
    KafkaSystemDescriptor,
    KVSerde,
    OutgoingMessageEnvelope,
    StreamApplication,
    StreamApplicationDescriptor,
    StreamTask,
    SystemStream,
)
from samzapy.system.partitioner import partition_for

USERS = 100_000
#: Views with a score below this pass the filter: 90 %.
KEPT_BELOW = 90
BY_USER = "by-user"

# -- the data and the per-message work both sides share ---------------------------------------


def page_view(i: int, users: int) -> bytes:
    """View ``i``: 100 bytes of JSON, user ``i % users``, score ``i % 100``."""
    head = b'{"id":%d,"user":"u%07d","score":%d,"page":"/' % (i, i % users, i % 100)
    return head + b"p" * (len(PAYLOAD) - len(head) - 2) + b'"}'


def kept(view: dict[str, Any]) -> bool:
    return bool(view["score"] < KEPT_BELOW)


def summary(view: dict[str, Any]) -> dict[str, Any]:
    return {"user": view["user"], "page": view["page"], "points": view["score"] * 2}


def keyed_summary(view: dict[str, Any]) -> KV:
    return KV(view["user"], summary(view))


def user(view: dict[str, Any]) -> str:
    return str(view["user"])


def whole(view: dict[str, Any]) -> dict[str, Any]:
    return view


def keyed(view: dict[str, Any]) -> KV:
    return KV(view["user"], view)


def touch(kv: KV) -> KV:
    """The trivial map after the repartitioning."""
    return KV(kv.key, kv.value)


# -- the task classes -------------------------------------------------------------------------


class _ToSink(InitableTask, StreamTask):
    def init(self, context: Any) -> None:
        self.sink = SystemStream("kafka", context.config["app.sink"])


class FilterMapTask(_ToSink):
    """(a) by hand: each kept view's summary to ``app.sink``, keyed by its user."""

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        view = envelope.message
        if kept(view):
            collector.send(OutgoingMessageEnvelope(self.sink, summary(view), view["user"]))


class KeyByUserTask(_ToSink):
    """Job 1 of (b) by hand: each view to ``app.sink``, keyed by its user."""

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        view = envelope.message
        collector.send(OutgoingMessageEnvelope(self.sink, view, view["user"]))


class RelayTask(_ToSink):
    """Job 2 of (b) by hand: each keyed message on to ``app.sink`` with its key."""

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        collector.send(OutgoingMessageEnvelope(self.sink, envelope.message, envelope.key))


# -- the applications -------------------------------------------------------------------------


def _streams(app_desc: StreamApplicationDescriptor) -> tuple[Any, Any]:
    """The input (``app.source``, JSON views) and the output (``app.sink``, keyed)."""
    kafka = KafkaSystemDescriptor("kafka")
    source = kafka.get_input_descriptor("in", "json")
    source.with_physical_name(app_desc.config["app.source"])
    sink = kafka.get_output_descriptor("out", KVSerde("string", "json"))
    sink.with_physical_name(app_desc.config["app.sink"])
    return app_desc.get_input_stream(source), app_desc.get_output_stream(sink)


class FilterMapApp(StreamApplication):
    """(a): ``filter(kept).map(keyed_summary).send_to(output)``."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        views, out = _streams(app_desc)
        views.filter(kept).map(keyed_summary).send_to(out)


class MapApp(StreamApplication):
    """(b) without repartitioning: ``map(keyed).map(touch).send_to(output)``."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        views, out = _streams(app_desc)
        views.map(keyed).map(touch).send_to(out)


class PartitionByApp(StreamApplication):
    """(b): ``partition_by(user, whole).map(touch).send_to(output)``."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        views, out = _streams(app_desc)
        by_user = views.partition_by(user, whole, KVSerde("string", "json"), BY_USER)
        by_user.map(touch).send_to(out)


# -- measuring --------------------------------------------------------------------------------


class StopAfterClocked(StopAfter):
    """bench_kafka's StopAfter, its figures with ``t0``, the start of the measured run on the
    monotonic clock (``perf_counter`` is CLOCK_MONOTONIC on Linux, one clock for every
    process), so that two jobs' runs can be put end to end."""

    async def stop(self) -> None:
        await super().stop()
        if self.result_path.exists():
            figures = json.loads(self.result_path.read_text())
            figures["t0"] = self.meter.t0
            self.result_path.write_text(json.dumps(figures))


class StopAfterTwoStages(StopAfter):
    """StopAfter for a job that processes every input message twice (partition_by: from the
    input, then from the intermediate stream): it stops after 2 N."""

    def __init__(self) -> None:
        super().__init__()
        self.target *= 2


class StopAfterShare(StopAfterClocked):
    """StopAfterClocked for one container of a job run as several: it stops after
    ``SAMZAPY_BENCH_SHARE`` messages, the ones its tasks are given (both stages' of a
    ``partition_by`` application)."""

    def __init__(self) -> None:
        super().__init__()
        self.target = int(os.environ["SAMZAPY_BENCH_SHARE"])


# -- the variants' jobs -----------------------------------------------------------------------


def _stream_keys(stream_id: str, topic: str, key_serde: str | None) -> dict[str, Any]:
    """A task-class job's entry for ``topic``: what the applications' descriptors yield."""
    keys: dict[str, Any] = {
        f"streams.{stream_id}.samza.system": "kafka",
        f"streams.{stream_id}.samza.physical.name": topic,
        f"streams.{stream_id}.samza.msg.serde": "json",
    }
    if key_serde is not None:
        keys[f"streams.{stream_id}.samza.key.serde"] = key_serde
    return keys


class Job:
    """A variant's job file (``(source, sink, name) -> text``, as bench_kafka's Variant
    takes): the task class or application ``runs``, at ``commit_ms``, with the further
    ``keys`` (``--set``). ``stages``: how many times the job processes each input message;
    ``after`` makes the figures per input message."""

    def __init__(
        self,
        bootstrap: str,
        runs: str,
        commit_ms: int | None,
        *,
        app: bool,
        stages: int = 1,
        source_key_serde: str | None = None,
        reporter: str = "bench_kafka:StopAfter",
        keys: dict[str, Any] | None = None,
    ) -> None:
        self.bootstrap, self.runs, self.commit_ms = bootstrap, runs, commit_ms
        self.keys = keys or {}
        self.app, self.stages = app, stages
        self.source_key_serde = source_key_serde
        self.sink = ""  # the last run's output topic
        self.reporter = "bench_app:StopAfterTwoStages" if stages == 2 else reporter

    def __call__(self, source: str, sink: str, name: str) -> str:
        self.sink = sink
        extra: dict[str, Any] = {
            "app.source": source,
            "app.sink": sink,
            "metrics.reporters": ["log", self.reporter],
            **self.keys,
        }
        if not self.app:
            extra.update(_stream_keys("in", source, self.source_key_serde))
            extra.update(_stream_keys("out", sink, "string"))
        text = job_yaml(
            self.bootstrap,
            source,
            name=name,
            task_class=self.runs,
            commit_ms=self.commit_ms,
            extra=extra,
        )
        if not self.app:
            return text
        cfg = json.loads(text)
        del cfg["task.class"], cfg["task.inputs"]  # the application gives its inputs
        cfg["app.class"] = self.runs
        return json.dumps(cfg, indent=2)

    def after(self, figures: dict[str, float]) -> None:
        if self.stages > 1:
            figures["messages"] /= self.stages
            figures["rate"] /= self.stages
            figures["cpu_us"] *= self.stages


class _TwoProcesses:
    """A variant of two ``samzapy run`` processes at once: the first is the variant's job
    that bench_kafka's ``run_variant`` runs; building it starts the second in the
    background (``_start_second``), and ``after`` waits for the second and puts both runs
    together: the rate over the span from the first one's start to the last one's end, the
    CPU time of both, per input message."""

    def __init__(
        self,
        bootstrap: str,
        commit_ms: int | None,
        n: int,
        workdir: Path,
        keys: dict[str, Any] | None = None,
    ) -> None:
        self.bootstrap, self.commit_ms, self.n, self.keys = bootstrap, commit_ms, n, keys
        self.workdir = workdir
        self.second: subprocess.Popen[bytes] | None = None
        self.second_log: IO[str] | None = None
        self.second_result = workdir / f"{type(self).__name__}-second.json"
        self.sink = ""  # the last run's output topic

    def _start_second(self, job_file: Path, log: Path, env: dict[str, str] | None = None) -> None:
        # As bench_kafka.samzapy_run runs a job, but in the background.
        env = {
            **os.environ,
            "SAMZAPY_BENCH_MESSAGES": str(self.n),
            "SAMZAPY_BENCH_RESULT": str(self.second_result),
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(BENCH)]),
            **(env or {}),
        }
        self.second_log = log.open("w")
        self.second = subprocess.Popen(
            [sys.executable, "-m", "samzapy.cli", "run", str(job_file)],
            cwd=BENCH,
            env=env,
            stdout=self.second_log,
            stderr=self.second_log,
        )

    def after(self, first: dict[str, float]) -> None:
        """The first's figures become both processes' (the second's rate, over its own
        measured run, stays as ``second_rate``, the first's as ``first_rate``)."""
        assert self.second is not None and self.second_log is not None
        log = self.second_log.name
        try:
            code = self.second.wait(timeout=max(120.0, 20 * first["wall_s"]))
        except subprocess.TimeoutExpired as exc:
            self.stop()
            raise SystemExit(f"{type(self).__name__}: the second did not end; log: {log}") from exc
        self.second_log.close()
        if code != 0 or not self.second_result.exists():
            raise SystemExit(f"{type(self).__name__}: the second failed (exit {code}); log: {log}")
        second = json.loads(self.second_result.read_text())
        self.second_result.unlink()
        start = min(first["t0"], second["t0"])
        wall = max(first["t0"] + first["wall_s"], second["t0"] + second["wall_s"]) - start
        cpu = first["cpu_s"] + second["cpu_s"]
        first_rate = first["rate"]
        first.pop("t0")
        first.update(
            messages=self.n,
            rate=self.n / wall,
            cpu_us=cpu / self.n * 1e6,
            wall_s=wall,
            cpu_s=cpu,
            first_rate=first_rate,
            second_rate=second["rate"],
        )

    def stop(self) -> None:
        """End the second if it still runs (a failed round)."""
        if self.second is not None and self.second.poll() is None:
            self.second.kill()
            self.second.wait()


class TwoJobs(_TwoProcesses):
    """(b) by hand: job 1 (source -> a topic of its own, keyed) first, job 2 (that topic ->
    sink) second."""

    def __call__(self, source: str, sink: str, name: str) -> str:
        self.sink = sink
        middle = f"{name}-by-user"
        asyncio.run(create_topics(self.bootstrap, middle))
        first = Job(
            self.bootstrap,
            "bench_app:KeyByUserTask",
            self.commit_ms,
            app=False,
            reporter="bench_app:StopAfterClocked",
            keys=self.keys,
        )
        second = Job(
            self.bootstrap,
            "bench_app:RelayTask",
            self.commit_ms,
            app=False,
            source_key_serde="string",
            reporter="bench_app:StopAfterClocked",
            keys=self.keys,
        )
        job_file = self.workdir / f"{name}-2.yaml"
        job_file.write_text(second(middle, sink, f"{name}-2"))
        self._start_second(job_file, self.workdir / f"{name}-2.log")
        return first(source, middle, name)


class TwoContainers(_TwoProcesses):
    """(b)'s ``partition_by`` application as two containers of one job (static, tasks k
    with k % 2 == id), as one would deploy it to use both cores: the like of ``two-jobs``,
    which runs two processes too. Each container stops after its share: its input
    partitions' views (view i is on partition i % 8) and the views its intermediate
    partitions get (by the partitioner's hash of the user)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Each container's messages, the same every round.
        self.shares = [0, 0]
        for i in range(self.n):
            self.shares[(i % PARTITIONS) % 2] += 1
            user = b"u%07d" % (i % USERS)
            self.shares[partition_for(user, PARTITIONS) % 2] += 1

    def __call__(self, source: str, sink: str, name: str) -> str:
        self.sink = sink
        shares = self.shares
        keys = {**(self.keys or {}), "job.coordinator.factory": "static"}
        keys["job.container.count"] = 2
        job = Job(
            self.bootstrap,
            "bench_app:PartitionByApp",
            self.commit_ms,
            app=True,
            reporter="bench_app:StopAfterShare",
            keys=keys,
        )
        text = json.loads(job(source, sink, name))
        second = self.workdir / f"{name}-1.yaml"
        second.write_text(json.dumps({**text, "job.container.id": "1"}, indent=2))
        self._start_second(
            second, self.workdir / f"{name}-1.log", {"SAMZAPY_BENCH_SHARE": str(shares[1])}
        )
        os.environ["SAMZAPY_BENCH_SHARE"] = str(shares[0])  # run_variant passes it on
        return json.dumps({**text, "job.container.id": "0"}, indent=2)

    def after(self, first: dict[str, float]) -> None:
        os.environ.pop("SAMZAPY_BENCH_SHARE", None)
        super().after(first)


# -- the run ----------------------------------------------------------------------------------


def variants(
    bootstrap: str,
    commits: list[int | None],
    n: int,
    workdir: Path,
    before: Path | None,
    label: str,
    keys: dict[str, Any],
) -> tuple[list[Variant], list[Variant]]:
    """Part (a)'s variants and part (b)'s; ``keys``: added to every job file."""
    part_a: list[Variant] = []
    part_b: list[Variant] = []
    for ms in commits:
        tag = ms or "default"
        task = Job(bootstrap, "bench_app:FilterMapTask", ms, app=False, keys=keys)
        part_a.append(Variant(f"task@{tag}", task))
        plain = Job(bootstrap, "bench_app:MapApp", ms, app=True, keys=keys)
        part_b.append(Variant(f"app-map@{tag}", plain))
        part_b.append(Variant(f"two-jobs@{tag}", TwoJobs(bootstrap, ms, n, workdir, keys)))
        two = TwoContainers(bootstrap, ms, n, workdir, keys)
        part_b.append(Variant(f"app-partition_by-x2@{tag}", two))
        for tree, prefix in ((None, ""), (before, f"before:{label}:")):
            if prefix and tree is None:
                continue
            app = Job(bootstrap, "bench_app:FilterMapApp", ms, app=True, keys=keys)
            part_a.append(Variant(f"{prefix}app@{tag}", app, tree))
            by = Job(bootstrap, "bench_app:PartitionByApp", ms, app=True, stages=2, keys=keys)
            part_b.append(Variant(f"{prefix}app-partition_by@{tag}", by, tree))
    return part_a, part_b


def setting(text: str) -> tuple[str, Any]:
    """``--set KEY=VALUE``: the value read as YAML (``50`` is an int), as a job file reads it."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), yaml.safe_load(value)


def goal(
    variants: list[Variant], name: str, reference: str, target: float, figures: dict[str, Any]
) -> None:
    """Print ``name``'s per-round ratios to ``reference``, their median and the goal's verdict."""
    runs = {v.name: v.runs for v in variants}
    pairs = list(zip(runs[name], runs[reference], strict=True))
    rates = [a["rate"] / b["rate"] for a, b in pairs]
    cpus = [a["cpu_us"] / b["cpu_us"] for a, b in pairs]
    rate, cpu = statistics.median(rates), statistics.median(cpus)
    verdict = "met" if rate >= target else "NOT met"
    print(
        f"{name} / {reference}: rate {rate:.2f} (goal >= {target:.2f}: {verdict}), "
        f"cpu/msg {cpu:.2f}; per round: rate {' '.join(f'{r:.2f}' for r in rates)}, "
        f"cpu/msg {' '.join(f'{c:.2f}' for c in cpus)}"
    )
    figures.setdefault("goals", {})[f"{name} / {reference}"] = {"rate": rate, "cpu": cpu}


def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.set_defaults(messages=None, rounds=None, commit_ms=[None])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: 100,000 messages and 2 rounds (default 500,000 and 3)",
    )
    parser.add_argument(
        "--set",
        type=setting,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a key for every job file, e.g. systems.kafka.producer.linger.ms=50 (repeatable)",
    )
    args = parser.parse_args()
    defaults = (
        {"messages": 100_000, "rounds": 2} if args.quick else {"messages": 500_000, "rounds": 3}
    )
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)

    async def fill(bootstrap: str, topic: str, n: int) -> None:
        await fill_keyed(bootstrap, topic, n, USERS, message=page_view)

    about = f", JSON page views of {USERS:,} users"
    with prepared(args, "bench-app-in", fill, about) as (bootstrap, before, workdir, source, n):
        label = (args.against or "")[:10]
        keys = dict(args.set)
        part_a, part_b = variants(bootstrap, args.commit_ms, n, workdir, before, label, keys)
        everything = part_a + part_b

        def after(variant: Variant, figures: dict[str, float]) -> None:
            variant.job.after(figures)
            # what reached the output, per input message: 0.9 in (a), 1 in (b)
            out = asyncio.run(end_offsets_total(bootstrap, variant.job.sink))
            figures["output_per_msg"] = out / n

        try:
            interleaved(
                everything,
                args.rounds,
                bootstrap,
                source,
                n,
                workdir,
                after,
            )
        finally:
            for variant in everything:
                if isinstance(variant.job, _TwoProcesses):
                    variant.job.stop()
        figures: dict[str, Any] = {}
        for ms in args.commit_ms:
            tag = ms or "default"
            print("\n(a) map/filter/send_to, 90 % kept: the application beside the task class")
            figures.update(report([v for v in part_a if v.name.endswith(f"@{tag}")], f"task@{tag}"))
            goal(part_a, f"app@{tag}", f"task@{tag}", 0.95, figures)
            print(
                "\n(b) partition_by beside the same job without it, and beside two jobs "
                "(concurrent); rates in input messages/s, CPU per input message"
            )
            mine = [v for v in part_b if v.name.endswith(f"@{tag}")]
            figures.update(report(mine, f"app-map@{tag}"))
            goal(part_b, f"app-partition_by@{tag}", f"app-map@{tag}", 0.5, figures)
            goal(part_b, f"app-partition_by@{tag}", f"two-jobs@{tag}", 1.0, figures)
            goal(part_b, f"app-partition_by-x2@{tag}", f"two-jobs@{tag}", 1.0, figures)
            for name, what in (
                (f"two-jobs@{tag}", "job"),
                (f"app-partition_by-x2@{tag}", "container"),
            ):
                two = next(v for v in mine if v.name == name)
                print(
                    f"{name}, each {what}'s own rate over its measured run: "
                    f"{statistics.median(r['first_rate'] for r in two.runs):,.0f} and "
                    f"{statistics.median(r['second_rate'] for r in two.runs):,.0f} msg/s"
                )
            if before is not None:
                goal(part_a, f"app@{tag}", f"before:{label}:app@{tag}", 0.95, figures)
                goal(
                    part_b,
                    f"app-partition_by@{tag}",
                    f"before:{label}:app-partition_by@{tag}",
                    0.95,
                    figures,
                )
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
        if args.json:
            print(json.dumps(figures))


if __name__ == "__main__":
    main()
