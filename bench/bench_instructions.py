"""Instructions per message, counted by valgrind: a steady figure beside the broker benches'
rates, which move by a third between runs on a shared machine.

Each variant runs in a child process of its own under ``valgrind --tool=callgrind``, which
counts the machine instructions the process executes: nearly the same count on every run (the
same code counted twice in one run read 72,285 and 72,839 a message, 0.8 % apart: the event
loop's timers still run by the clock). The child runs the job in-process on the memory system
(``TestRunner``, uvloop, the garbage collector set as ``samzapy run`` sets it), once over N1
and once over N2 input messages (``--messages``, default
10,000 and 30,000); the difference of the two counts over N2 - N1 is the variant's
instructions per input message, the start-up and the stop cancelling out. The inputs are
written to the memory broker before the job starts; a child that only writes them is counted
too, and its figure is taken off the others'. The child checks the job's work (the messages
it processed and sent): a job doing less would count fewer instructions. Under valgrind a
process runs about 50 times slower, so a slot's turn, which ends after 256 messages or 1 ms,
would end by the clock after a message or two; the children move the time limit out of reach,
so that turns end by count as they do at full speed. ``PYTHONHASHSEED`` is fixed.

The pairs, the reference first (their figures are comparable only within a pair):

- ``app``: bench_app's (a): its ``FilterMapTask`` task class and its ``FilterMapApp``
  application (90 % of the views kept, a summary keyed by user sent on);
- ``partition_by``: bench_app's (b): its ``MapApp``, which maps each view and sends it on, and
  its ``PartitionByApp``, which repartitions the views by user first (each view processed
  twice, in both stages; its figure is per input view);
- ``partition_by-json``: the same pair with the broker bench's serdes at the job's edges (the
  views in as JSON bytes, string keys and JSON values out), so that what the applications
  parse and encode is the same on both sides as on a broker: the ratio a broker would read
  with clients that cost nothing;
- ``two-jobs-json``: bench_app's ``two-jobs`` (its ``KeyByUserTask`` writes each view keyed
  by user to a plain stream, then its ``RelayTask`` sends each on: two task-class jobs run one
  after the other, both counted), beside the ``partition_by`` application of
  ``partition_by-json``, with the same serdes at every edge: the goal that the application
  do no more work than the two jobs written by hand;
- ``origins``: bench_dedup's two stages (stage 1 forwards each message through an
  intermediate stream keyed by its first 8 bytes, stage 2 counts it in an in-memory store),
  without origins and with them (per input message, both stages).

What the memory system leaves out, the Kafka clients, the serdes at the job's edges (its input
and output stay objects here but in ``partition_by-json``, where the broker benches encode
JSON) and RocksDB, costs both sides of the ``app`` and ``origins`` pairs the same on a broker,
so a broker's ratio lies between the one here and 1. Not so for ``partition_by``, whose
variant reads and writes each view twice: it pays the clients twice too, and the broker's
own work on the same machine (its ratio on a broker was below the ``-json`` pair's). The
``partition_by`` application's intermediate stream is serialized here as on a broker (string
keys, JSON values, framed): that is the variant's own work.

Printed per pair: each variant's instructions per message and the reference's over it (a rate
ratio: 0.9 means the variant executes 11 % more). ``--against COMMIT`` counts each variant of
an earlier commit too (a temporary worktree; this checkout's bench script), beside the same
variant here. Needs valgrind (``apt-get install valgrind``).

Usage: python bench/bench_instructions.py [--pair app|partition_by|partition_by-json|
                                                 two-jobs-json|origins]...
                                          [--messages 10000,30000] [--against COMMIT] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

PARTITIONS = 8
#: The pairs: (reference, variant).
PAIRS: dict[str, tuple[str, str]] = {
    "app": ("task", "app"),
    "partition_by": ("app-map", "app-partition_by"),
    "partition_by-json": ("app-map-json", "app-partition_by-json"),
    "two-jobs-json": ("two-jobs-json", "app-partition_by-json"),
    "origins": ("no-origins", "origins"),
}
#: The serdes of the ``*-json`` variants' edges: the broker bench's (JSON views in as bytes,
#: string keys and JSON values out).
JSON_EDGES = {
    "streams.in.samza.msg.serde": "json",
    "streams.out.samza.key.serde": "string",
    "streams.out.samza.msg.serde": "json",
}


# -- the child: one job in-process on the memory system ---------------------------------------


def _views(n: int) -> dict[int, list[Any]]:
    from bench_app import USERS

    return {
        p: [
            {"id": i, "user": f"u{i % USERS:07d}", "score": i % 100, "page": "/" + "p" * 50}
            for i in range(p, n, PARTITIONS)
        ]
        for p in range(PARTITIONS)
    }


def _view_bytes(n: int) -> dict[int, list[Any]]:
    from bench_app import USERS, page_view

    return {p: [page_view(i, USERS) for i in range(p, n, PARTITIONS)] for p in range(PARTITIONS)}


def _keyed_bytes(n: int) -> dict[int, list[Any]]:
    return {
        p: [b"%08d" % (i % 100_000) + b"x" * 92 for i in range(p, n, PARTITIONS)]
        for p in range(PARTITIONS)
    }


def _runner(variant: str, n: int) -> Any:
    """The TestRunner of ``variant`` with its ``n`` inputs written (None for ``fill-*``, which
    only writes them)."""
    from bench_app import FilterMapApp, FilterMapTask, MapApp, PartitionByApp

    from samzapy import KafkaSystemDescriptor
    from samzapy.system.inmemory import InMemoryBroker
    from samzapy.testing import TestRunner

    # bench_app's applications themselves; their streams as they name them (app.source and
    # app.sink: "in" and "out"), declared to the runner by descriptors of the same ids.
    apps = {"app": FilterMapApp, "app-map": MapApp, "app-partition_by": PartitionByApp}
    kafka = KafkaSystemDescriptor("kafka")
    source = kafka.get_input_descriptor("in").with_physical_name("in")
    sink = kafka.get_output_descriptor("out").with_physical_name("out")

    # The inputs go straight to the broker, as a stream the runner finds written already.
    namespace = f"instructions-{variant}"
    broker = InMemoryBroker.for_namespace(namespace)
    json_edges = variant.endswith("-json")
    variant = variant.removesuffix("-json")
    if variant.endswith("origins"):
        inputs = _keyed_bytes(n)
    else:
        inputs = _view_bytes(n) if json_edges else _views(n)
    broker.create_stream("in", PARTITIONS)
    for p, messages in inputs.items():
        for message in messages:
            broker.append("in", p, None, message)
    broker.end_stream("in")
    if variant.startswith("fill"):
        return None
    if variant == "two-jobs":
        return _two_jobs(namespace)
    config: dict[str, Any] = {"task.progress.interval.ms": -1}
    if variant in apps:
        runner = TestRunner.of(apps[variant], namespace=namespace).add_input_stream(source, {})
        runner.add_output_stream(sink, PARTITIONS)
        config.update({"app.source": "in", "app.sink": "out"})
        if json_edges:
            config.update(JSON_EDGES)
        else:  # objects on both sides of the pair: no checking serde on the output
            config["streams.out.samza.key.serde"] = "none"
            config["streams.out.samza.msg.serde"] = "none"
    else:
        from bench_dedup import ForwardAndCount

        # The job reads ``in`` on the runner's system and writes to "kafka": the memory
        # system in the same namespace (so the same broker), whose intermediate ``mid`` is
        # made here, the runner's add_intermediate being for its own system.
        task = FilterMapTask if variant == "task" else ForwardAndCount
        runner = TestRunner(task, namespace=namespace).add_input("in", {})
        config["systems.kafka.samza.factory"] = "memory"
        config["systems.kafka.namespace"] = namespace
        if variant == "task":
            config.update({"task.inputs": ["memory.in"], "app.sink": "out"})
            runner.add_output("out", PARTITIONS)
        else:
            config.update(_two_stages(variant == "origins"))
            broker.create_stream("mid", PARTITIONS)
    for key, value in config.items():
        runner.add_config(key, value)
    return runner


def _two_jobs(namespace: str) -> list[Any]:
    """bench_app's two jobs by hand, run one after the other: job 1 (``KeyByUserTask``) from
    ``in`` to the plain stream ``mid``, job 2 (``RelayTask``) from ``mid`` to ``out``; JSON
    values and string keys at every edge, as on a broker."""
    from bench_app import KeyByUserTask, RelayTask

    from samzapy.testing import TestRunner

    runners = []
    for task, source, sink in ((KeyByUserTask, "in", "mid"), (RelayTask, "mid", "out")):
        runner = TestRunner(task, namespace=namespace).add_input(source, {})
        runner.add_output(sink, PARTITIONS)
        config = {
            "task.progress.interval.ms": -1,
            "systems.kafka.samza.factory": "memory",
            "systems.kafka.namespace": namespace,
            "task.inputs": [f"memory.{source}"],  # the runner's system, as _runner's
            "app.sink": sink,
            f"streams.{source}.samza.msg.serde": "json",
            f"streams.{sink}.samza.key.serde": "string",
            f"streams.{sink}.samza.msg.serde": "json",
        }
        if source == "mid":
            config["streams.mid.samza.key.serde"] = "string"
        for key, value in config.items():
            runner.add_config(key, value)
        runners.append(runner)
    return runners


def _two_stages(origins: bool) -> dict[str, Any]:
    """bench_dedup's job on the memory system, its store in memory."""
    return {
        "task.inputs": ["memory.in", "kafka.mid"],
        "app.mid": "mid",
        "streams.in.samza.msg.serde": "bytes",
        "streams.mid.samza.system": "kafka",
        "streams.mid.samza.intermediate": True,
        "streams.mid.partitions": PARTITIONS,
        "streams.mid.samza.key.serde": "bytes",
        "streams.mid.samza.msg.serde": "bytes",
        "streams.mid.samza.origins": origins,
        "stores.counts.factory": "inmemory",
        "stores.counts.key.serde": "bytes",
        "stores.counts.msg.serde": "long",
    }


def child(variant: str, n: int) -> None:
    """Run ``variant`` over ``n`` messages, as the parent's valgrind counts it, and check its
    work (a job doing less would count fewer instructions)."""
    import samzapy.container.slots as slots
    from samzapy.cli.logging import configure_logging

    configure_logging("json", level="warning")
    slots.TURN_NS = 1 << 62  # turns end by count, as at full speed (see the docstring)
    made = _runner(variant, n)
    if made is None:
        return
    # The collector as `samzapy run` sets it (cli/main.py): start-up frozen out of its full
    # passes, the young generation passed over every YOUNG_GC_THRESHOLD allocations. With
    # the interpreter's 700, collections cost an application a few per cent more a message,
    # and that share moves with the size of what start-up left on the heap.
    from samzapy.cli.main import YOUNG_GC_THRESHOLD

    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_GC_THRESHOLD, *gc.get_threshold()[1:])
    runners = made if isinstance(made, list) else [made]  # two jobs: one after the other
    processed = 0
    for i, runner in enumerate(runners):
        if i:  # job 1 is done: job 2 reads what it wrote, to its end
            runner.broker.end_stream("mid")
        result = runner.run(timeout=3600)
        processed += result.metrics.counter("container", "messages-processed").count
    two_stages = variant.removesuffix("-json") in (
        "app-partition_by",
        "no-origins",
        "origins",
        "two-jobs",
    )
    # Stage 2 of the two-stage job processes what reached it; the others' output is counted.
    if variant.endswith("origins"):
        sent = n
    else:
        sent = sum(len(runner.broker.partition("out", p).records) for p in range(PARTITIONS))
    expected = (2 * n if two_stages else n, n * 9 // 10 if variant in ("task", "app") else n)
    if (processed, sent) != expected:
        raise SystemExit(
            f"{variant}: processed {processed:,} messages and sent {sent:,} to the output, "
            f"expected {expected[0]:,} and {expected[1]:,}"
        )


# -- the parent ------------------------------------------------------------------------------


def count(variant: str, n: int, tree: Path | None) -> int:
    """The instructions a child running ``variant`` over ``n`` messages executes."""
    env = {
        **os.environ,
        "PYTHONHASHSEED": "0",
        "PYTHONPATH": os.pathsep.join([str(tree or ROOT), str(BENCH)]),
    }
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    argv += [sys.executable, str(Path(__file__).resolve()), "--child", variant, str(n)]
    done = subprocess.run(argv, cwd=BENCH, env=env, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : ([0-9]+)", done.stderr)
    if done.returncode != 0 or found is None:
        tail = "\n".join(done.stderr.splitlines()[-15:])
        raise SystemExit(f"{variant} over {n:,} messages failed (exit {done.returncode}):\n{tail}")
    return int(found.group(1))


def measure(
    pairs: list[str], sizes: tuple[int, int], trees: dict[str, Path | None]
) -> dict[str, dict[str, float]]:
    """{tree label: {variant: instructions per input message}}, each less the writing of its
    inputs (the ``fill-*`` child's figure)."""
    variants: list[str] = []
    for pair in pairs:
        fill = "fill-views-json" if pair.endswith("-json") else "fill-views"
        fill = "fill-origins" if pair == "origins" else fill
        variants += [v for v in (fill, *PAIRS[pair]) if v not in variants]
    workers = len(os.sched_getaffinity(0))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        counts = {
            (label, variant, n): pool.submit(count, variant, n, tree)
            for label, tree in trees.items()
            for variant in variants
            for n in sizes
        }
        for done in as_completed(counts.values()):
            if done.exception() is not None:  # the first failure ends the run
                for pending in counts.values():
                    pending.cancel()
                done.result()
        low, high = sizes
        found = {
            (label, variant): (
                counts[label, variant, high].result() - counts[label, variant, low].result()
            )
            / (high - low)
            for label in trees
            for variant in variants
        }
    figures: dict[str, dict[str, float]] = {}
    for (label, variant), value in found.items():
        if not variant.startswith("fill"):
            fill = "fill-views-json" if variant.endswith("-json") else "fill-views"
            fill = "fill-origins" if variant.endswith("origins") else fill
            figures.setdefault(label, {})[variant] = value - found[label, fill]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", action="append", choices=sorted(PAIRS), default=[])
    parser.add_argument("--messages", default="10000,30000", help="N1,N2 (default 10000,30000)")
    parser.add_argument("--against", metavar="COMMIT", help="count an earlier commit too")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--child", nargs=2, metavar=("VARIANT", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_instructions needs valgrind: apt-get install valgrind")
    low, high = (int(part) for part in args.messages.split(","))
    if not 0 < low < high:
        raise SystemExit(f"--messages must be N1,N2 with 0 < N1 < N2, got {args.messages!r}")
    pairs = args.pair or list(PAIRS)
    from bench_kafka import tree_of

    with tree_of(args.against) as before:
        trees: dict[str, Path | None] = {"here": None}
        if before is not None:
            trees[f"before:{args.against[:10]}"] = before
        print(
            f"instructions per input message (valgrind), {low:,} and {high:,} messages over "
            f"{PARTITIONS} partitions, the writing of the inputs taken off; pairs: "
            f"{', '.join(pairs)}",
            flush=True,
        )
        figures = measure(pairs, (low, high), trees)
    for pair in pairs:
        reference, variant = PAIRS[pair]
        print(f"\n{pair}:")
        for label, by_variant in figures.items():
            ref, var = by_variant[reference], by_variant[variant]
            print(
                f"  {label:>20}  {reference} {ref:10,.0f}   {variant} {var:10,.0f}   "
                f"{reference}/{variant} {ref / var:.3f}"
            )
        if "here" in figures and len(figures) > 1:
            for label in [k for k in figures if k != "here"]:
                ratios = ", ".join(
                    f"{v} {figures[label][v] / figures['here'][v]:.3f}"
                    for v in (reference, variant)
                )
                print(f"  here beside {label} (its instructions over these): {ratios}")
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
