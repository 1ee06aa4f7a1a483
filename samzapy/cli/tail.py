"""``samzapy tail JOB_YAML STREAM``: a stream's messages, one JSON line each, as the job reads them.

1. Load the job's configuration (an application is described and planned first, so its
   intermediate streams are known) and find STREAM (``find_stream``): a stream id
   (``streams.<id>``), ``system.stream`` on one of the job's systems, or the physical name
   of one of its streams. Anything else is a usage error (exit 2) naming it.
2. Ask the stream's system, through its factory's admin (the system ports, so kafka, memory
   and file all work), for its partitions and their offset bounds. A stream that does not
   exist there, a partition out of range or an offset the partition does not hold exits 2.
3. Read with a consumer of the system that joins no group and commits nothing; read
   committed where the job reads committed (its intermediate streams, what an exactly-once
   job writes). Without ``--follow``, each partition in turn, from ``--from`` up to the
   offset its next message would have got at start, so the output is by partition then
   offset; with it, every partition as messages come, until Ctrl-C (exit 0).
4. Decode each record as the container does and print it as one JSON line
   (``record_lines``): a record that does not decode is printed as such, with its bytes in
   hex; tail never stops on a bad record. Only JSON goes to stdout, problems to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from samzapy.api.errors import ConfigError, SamzapyError
from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.cli.logging import configure_logging, flush_library_logs, scrub
from samzapy.cli.process import add_working_directory_to_path, command_output, stdout_closed
from samzapy.cli.record_lines import Printer, describe
from samzapy.config import ResolvedConfig
from samzapy.container.consumers import InputSerdes
from samzapy.container.serdes import StreamSerdes
from samzapy.container.systems import committed_systems, system_factory
from samzapy.system.ports import OffsetBounds, OffsetDefault, SystemAdmin, SystemConsumer

HELP = "print a stream's messages as the job reads them, one JSON line each"

#: The exit codes of ``samzapy.cli.main`` (not imported: main imports this module).
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

_BATCH = 1000
_POLL_S = 0.5
#: How long a partition may give nothing before its end without --follow, before tail moves
#: on: the records left are not readable now (read committed: a transaction still open).
SILENCE_S = 10.0

log = structlog.get_logger("samzapy.cli")


class UsageError(SamzapyError):
    """What was asked cannot be read (exit 2): the message says why, naming the stream."""


def add_arguments(
    parser: argparse.ArgumentParser, job_arguments: Callable[[argparse.ArgumentParser], None]
) -> None:
    parser.description = (
        "Print the messages of one of a job's streams, decoded with the job's serdes and "
        "framing, one JSON object per line (control messages and undecodable records too). "
        "Joins no consumer group and commits nothing. Without --follow it stops at the end "
        "each partition had when it started."
    )
    job_arguments(parser)
    parser.add_argument(
        "stream",
        metavar="STREAM",
        help="a stream id (streams.<id>), system.stream on one of the job's systems, or the "
        "physical name of one of its inputs, outputs or intermediate streams (samzapy plan "
        "lists an application's)",
    )
    parser.add_argument(
        "--from",
        dest="start",
        default=OffsetDefault.OLDEST,
        metavar="oldest|upcoming|OFFSET",
        help="where to start: the oldest message held (default), the next one to come (with "
        "--follow), or an offset (of --partition, unless the stream has one partition)",
    )
    parser.add_argument(
        "--partition", type=_count(0), default=None, help="read this partition only"
    )
    parser.add_argument(
        "--limit", type=_count(1), default=None, help="stop after printing this many lines"
    )
    parser.add_argument(
        "--follow", action="store_true", help="keep printing new messages until Ctrl-C"
    )


def _count(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"expected an integer >= {least}, got {text!r}")
        return value

    return parse


def run(args: argparse.Namespace, load: Callable[..., Any]) -> int:
    configure_logging("console", "warning", stream=sys.stderr)  # keep stdout pure JSON lines
    add_working_directory_to_path()
    try:
        # What the job's modules and serdes print goes to stderr: stdout is the records.
        with command_output() as stdout:
            out = Printer(stdout, args.limit)
            resolved, _app = load(args.job_yaml, args.overrides)
            target = find_stream(resolved, args.stream)
            system = resolved.systems[target.system]
            if args.follow and system.factory == "file" and not system.params.get("follow"):
                # --follow on a file system read to its end (follow: false, the default):
                # tail follows its files as a following job would.
                follow = [*args.overrides, f"systems.{target.system}.follow=true"]
                resolved, _app = load(args.job_yaml, follow)
            try:
                asyncio.run(tail(resolved, target, out, args.start, args.partition, args.follow))
            finally:
                flush_library_logs()
    except KeyboardInterrupt:
        pass  # Ctrl-C: what was printed stands
    except BrokenPipeError:  # `samzapy tail ... | head` closed the pipe early
        stdout_closed()
    except (ConfigError, UsageError) as exc:
        problems = exc.problems if isinstance(exc, ConfigError) else (str(exc),)
        for problem in problems:
            print(scrub(problem), file=sys.stderr)
        return EXIT_USAGE
    except SamzapyError as exc:
        print(scrub(f"samzapy tail: {exc}"), file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


# -- finding the stream ---------------------------------------------------------------------------


def job_streams(config: ResolvedConfig) -> list[SystemStream]:
    """The streams the configuration names: inputs, ``streams.<id>`` entries with a system
    (an application's inputs, outputs and intermediate streams among them), the dead-letter
    stream and the stores' changelogs."""
    found = [*config.task.inputs, *(b.system_stream for b in config.task.broadcast_inputs)]
    found += [SystemStream(e.system, e.physical_name) for e in config.streams.values() if e.system]
    if config.task.dead_letter_stream is not None:
        found.append(config.task.dead_letter_stream)
    found += [s.changelog for s in config.stores.values() if s.changelog is not None]
    return list(dict.fromkeys(found))


def find_stream(config: ResolvedConfig, name: str) -> SystemStream:
    """The stream ``name`` means (see ``add_arguments``); UsageError when the job has none."""
    known = job_streams(config)
    entry = config.streams.get(name)
    if entry is not None:
        system = entry.system or _only({s.system for s in known if s.stream == entry.physical_name})
        if system is None:
            default = config.raw.get("job.default.system")
            system = default if isinstance(default, str) and default in config.systems else None
        if system is None or system not in config.systems:
            raise UsageError(
                f"stream {name!r} has no system of the job: set streams.{name}.samza.system, "
                f"or give STREAM as system.stream (systems: {', '.join(config.systems)})"
            )
        return SystemStream(system, entry.physical_name)
    system, dot, stream = name.partition(".")
    if dot and stream and system in config.systems:
        return SystemStream(system, stream)
    matches = [s for s in known if s.stream == name]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UsageError(
            f"stream {name!r} is on several systems of the job: give one of "
            f"{', '.join(map(str, matches))}"
        )
    raise UsageError(
        f"stream {name!r} is not a stream of the job: expected a stream id (streams.<id>), "
        f"system.stream on one of its systems ({', '.join(config.systems) or 'none'}) or the "
        f"name of one of its streams ({', '.join(map(str, known)) or 'none'})"
    )


def _only(values: set[str]) -> str | None:
    return next(iter(values)) if len(values) == 1 else None


def reads_committed(config: ResolvedConfig, ss: SystemStream) -> bool:
    """Whether the job's reader would skip aborted transactions on ``ss``: its intermediate
    streams, the systems carrying one (the container reads them committed), and what an
    exactly-once job writes."""
    if config.stream(ss).intermediate or ss.system in committed_systems(config):
        return True
    return config.task.exactly_once and ss not in config.task.inputs


# -- reading ---------------------------------------------------------------------------------------


async def tail(
    config: ResolvedConfig,
    target: SystemStream,
    out: Printer,
    start: str = OffsetDefault.OLDEST,
    partition: int | None = None,
    follow: bool = False,
) -> None:
    """Print ``target``'s records (the module docstring's steps 2 to 4) to ``out``."""
    factory = system_factory(config, target.system)
    serdes = StreamSerdes(config, {target.system: factory})
    admin = factory.get_admin()
    try:
        await admin.start()
        ssps = await _partitions(config, admin, target, partition)
        bounds = await admin.offset_bounds(ssps)
        starts = {ssp: start_offset(admin, ssp, bounds[ssp], start, len(ssps)) for ssp in ssps}
        if reads_committed(config, target):
            consumer = factory.get_committed_consumer()
        else:
            consumer = factory.get_consumer()
        for ssp in ssps:
            consumer.register(ssp, starts[ssp], OffsetDefault.OLDEST)
        await consumer.start()
        try:
            reader = _Reader(consumer, admin, serdes.input(ssps[0]), out)
            if follow:
                await reader.follow(ssps)
            else:
                for ssp in ssps:
                    if out.full:
                        break
                    await reader.read_to(ssp, starts[ssp], bounds[ssp].upcoming)
        finally:
            await consumer.stop()
    finally:
        await admin.stop()


async def _partitions(
    config: ResolvedConfig, admin: SystemAdmin, target: SystemStream, partition: int | None
) -> list[SystemStreamPartition]:
    count = (await admin.partition_counts([target.stream])).get(target.stream)
    if count is None:
        where = ""
        if config.systems[target.system].factory == "memory":
            where = " (a memory system's streams live in the process of the job using them)"
        raise UsageError(f"stream {target} does not exist on system {target.system!r}{where}")
    if partition is None:
        return [SystemStreamPartition(target.system, target.stream, p) for p in range(count)]
    if partition >= count:
        raise UsageError(
            f"partition {partition} is out of range: stream {target} has partitions 0..{count - 1}"
        )
    return [SystemStreamPartition(target.system, target.stream, partition)]


def start_offset(
    admin: SystemAdmin, ssp: SystemStreamPartition, bounds: OffsetBounds, start: str, count: int
) -> str:
    """The offset to read ``ssp`` from for ``--from start``; UsageError for an offset the
    partition does not hold (or that does not say which partition it is of)."""
    if start == OffsetDefault.OLDEST:
        return bounds.oldest if bounds.oldest is not None else bounds.upcoming
    if start == OffsetDefault.UPCOMING:
        return bounds.upcoming
    if count > 1:
        raise UsageError(
            f"--from {start}: an offset is of one partition, and {ssp.system_stream} has "
            "several: give --partition too"
        )
    held = f"{bounds.oldest}..{bounds.upcoming}" if bounds.oldest is not None else bounds.upcoming
    try:
        before = bounds.oldest is not None and admin.compare_offsets(start, bounds.oldest) < 0
        after = admin.compare_offsets(start, bounds.upcoming) > 0
    except (TypeError, ValueError):
        raise UsageError(
            f"--from must be oldest, upcoming or an offset of {ssp} (it holds {held}), "
            f"got {start!r}"
        ) from None
    if before or after or (bounds.oldest is None and start != bounds.upcoming):
        raise UsageError(
            f"--from {start}: {ssp} holds offsets {held} (the last one is the next to come)"
        )
    return start


class _Reader:
    """Polls one consumer and prints what it reads, decoded."""

    def __init__(
        self, consumer: SystemConsumer, admin: SystemAdmin, serdes: InputSerdes, out: Printer
    ) -> None:
        self._consumer = consumer
        self._compare = admin.compare_offsets
        self._after = admin.offset_after
        self._serdes = serdes
        self._out = out

    def _room(self) -> int:
        left = self._out.left
        return _BATCH if left is None else max(1, min(_BATCH, left))

    async def read_to(self, ssp: SystemStreamPartition, start: str, end: str) -> None:
        """Print ``ssp`` from ``start`` up to ``end`` (exclusive): what it held at start."""
        compare, after = self._compare, self._after
        if compare(start, end) >= 0:
            return
        loop = asyncio.get_running_loop()
        last_read = loop.time()
        while not self._out.full:
            batch = (await self._consumer.poll([ssp], self._room(), _POLL_S)).get(ssp)
            if not batch:
                # Records that are never delivered (transaction markers, aborted records)
                # still take offsets: done once the position has passed the end.
                position = await self._consumer.position(ssp)
                if position is not None and compare(position, end) >= 0:
                    return
                if loop.time() - last_read >= SILENCE_S:
                    if position is not None:
                        log.warning(
                            "tail_stopped_before_end",
                            ssp=str(ssp),
                            position=position,
                            end=end,
                            reason="nothing readable arrived for "
                            f"{SILENCE_S:g} s (records of a transaction still open?)",
                        )
                    return
                continue
            last_read = loop.time()
            lines = []
            done = False
            for envelope in batch:
                if envelope.is_end_of_stream or compare(envelope.offset, end) >= 0:
                    done = True
                    break
                lines.append(describe(envelope, self._serdes))
                if compare(after(envelope.offset), end) >= 0:
                    done = True
                    break
            self._out.print(lines)
            if done:
                return

    async def follow(self, ssps: Sequence[SystemStreamPartition]) -> None:
        """Print every partition's messages as they come, until cancelled (or until every
        partition of a bounded system has ended)."""
        active = list(ssps)
        while active and not self._out.full:
            batches = await self._consumer.poll(active, self._room(), _POLL_S)
            lines = []
            for ssp in list(active):
                for envelope in batches.get(ssp, ()):
                    if envelope.is_end_of_stream:
                        active.remove(ssp)
                        break
                    lines.append(describe(envelope, self._serdes))
            self._out.print(lines)
            if not lines:  # a quiet stream: still notice `| head` has had its lines
                self._out.check_reader()


__all__ = [
    "HELP",
    "UsageError",
    "add_arguments",
    "find_stream",
    "job_streams",
    "reads_committed",
    "run",
    "start_offset",
    "tail",
]
