"""Frozen, typed views of a validated configuration: what the rest of samzapy reads.

``resolve`` validates a Config (raising one ConfigError that lists every problem) and builds
the views from the effective values, defaults filled in. Views are built once at start-up;
nothing here is meant for a per-message path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from samzapy.api.system import SystemStream
from samzapy.config.guarantee import transaction_timeout_ms
from samzapy.config.loader import Config
from samzapy.config.samza_classes import SAMZA_STORE_FACTORIES
from samzapy.config.validate import check, parse_broadcast, parse_system_stream


@dataclass(frozen=True, slots=True)
class JobConfig:
    """``job.*``: the job's identity and process-wide settings."""

    name: str
    id: str
    loop: str
    container_thread_pool_size: int
    #: None: unset (a static job's only container; a dynamic member of the group).
    container_id: str | None
    logged_store_base_dir: str
    #: None: kafka-group when every input is on a kafka system, else static.
    coordinator_factory: str | None = None
    container_count: int = 1
    coordinator_session_timeout_ms: int = 10000
    #: ``job.coordinator.monitor-partition-change.frequency.ms``: how often the running
    #: container looks the inputs' partition counts up (<= 0: never).
    monitor_partition_change_ms: int = 60000
    #: ``job.standbytasks.replication.factor``: 1 active copy of each stateful task, the
    #: rest standbys (kafka-group).
    standby_replication_factor: int = 1


@dataclass(frozen=True, slots=True)
class BroadcastInput:
    """A ``task.broadcast.inputs`` stream and the partitions every task reads."""

    system_stream: SystemStream
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TaskConfig:
    """``task.*``: the task class, its inputs and the run loop's timings (milliseconds)."""

    #: None for an application (``app.class``).
    task_class: str | None
    inputs: tuple[SystemStream, ...]
    broadcast_inputs: tuple[BroadcastInput, ...]
    max_concurrency: int
    commit_ms: int
    window_ms: int
    callback_timeout_ms: int
    shutdown_ms: int
    drop_deserialization_errors: bool
    drop_producer_errors: bool
    checkpoint_factory: str | None
    checkpoint_dir: str
    checkpoint_system: str | None
    checkpoint_replication_factor: int
    progress_interval_ms: int
    poll_timeout_ms: int
    stall_timeout_ms: int = 300000
    stall_fail: bool = False
    #: ``at-least-once`` or ``exactly-once``.
    processing_guarantee: str = "at-least-once"
    #: Exactly-once: how long the broker lets a transaction stay open (-1: derived).
    transaction_timeout_ms: int = -1
    #: Snapshot each logged RocksDB store at every commit, so a restart after a crash opens
    #: the snapshot the checkpoint names instead of replaying the whole changelog.
    store_snapshots: bool = True
    #: An application's class (``app.class``) instead of a task class.
    app_class: str | None = None
    #: Drop a message whose process (or process_async) failed, instead of failing the job.
    drop_process_errors: bool = False
    #: Where every dropped message is written as it was read (None: nowhere).
    dead_letter_stream: SystemStream | None = None

    @property
    def exactly_once(self) -> bool:
        return self.processing_guarantee == "exactly-once"

    @property
    def transaction_timeout(self) -> int:
        """The transaction timeout in ms: as configured, else three commit intervals and at
        least a minute, at most 15 minutes (the broker's default transaction.max.timeout.ms)."""
        return transaction_timeout_ms(self.transaction_timeout_ms, self.commit_ms)


@dataclass(frozen=True, slots=True)
class SystemConfig:
    """``systems.<name>.*``. ``params`` holds every key under ``systems.<name>.``, prefix
    stripped, typed and with the factory's defaults filled in (``path``, ``follow``, ...)."""

    name: str
    factory: str
    key_serde: str | None
    msg_serde: str | None
    fetch_threshold: int
    offset_default: str | None
    reset_offset: bool | None
    params: Config

    def servers_text(self) -> str:
        """Its ``bootstrap.servers`` as a command line takes them, a list joined with commas
        (``<bootstrap servers>`` where the job file sets none)."""
        servers = self.params.get("bootstrap.servers") or "<bootstrap servers>"
        if isinstance(servers, list | tuple):
            return ",".join(str(s) for s in servers)
        return str(servers)


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """``streams.<id>.*``. Serdes, ``offset_default`` and ``reset_offset`` left unset on the
    stream are taken from its system (``samza.*.serde``, ``default.stream.samza.*``)."""

    stream_id: str
    system: str | None
    physical_name: str
    key_serde: str | None
    msg_serde: str | None
    offset_default: str | None
    reset_offset: bool
    partitions: int | None
    replication_factor: int | None
    intermediate: bool
    framed: bool
    upstream_inputs: tuple[SystemStream, ...]
    watermark_lateness_ms: int | None
    #: How long the producer holds a batch of this stream open (None: the system's linger;
    #: an intermediate or framed stream gets ``FRAMED_LINGER_MS``).
    linger_ms: int | None = None
    #: A framed stream's records carry their origin, so its readers drop replayed copies.
    origins: bool = True
    #: A partition with no message for this long (processing time) is idle: it stops holding
    #: the derived watermarks back (None: never).
    watermark_idle_ms: int | None = None
    #: An application's ``with_timestamp``, ``(key, message) -> ms``: the event time the
    #: watermarks derived with ``samza.watermark.lateness.ms`` read (None: the record's).
    event_time_fn: Any = None
    #: A bootstrap stream: each task reads its partitions up to their head (their upcoming
    #: offsets at start-up) before any message of its other inputs.
    bootstrap: bool = False


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """``metrics.*``: reporter names and their settings."""

    reporters: tuple[str, ...]
    reporter_interval_ms: int
    prometheus_port: int
    prometheus_host: str


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """``stores.<name>.*``: a task's key-value store. ``options`` holds every key under
    ``stores.<name>.`` with the prefix stripped (``factory``, ``rocksdb.compression``...)."""

    name: str
    factory: str | None
    key_serde: str | None
    msg_serde: str | None
    changelog: SystemStream | None
    options: Config


@dataclass(frozen=True, slots=True)
class ResolvedConfig:
    """A validated configuration: the raw keys and the typed views built from them."""

    raw: Config
    job: JobConfig
    task: TaskConfig
    systems: Mapping[str, SystemConfig]
    streams: Mapping[str, StreamConfig]
    serializers: Mapping[str, Any]
    metrics: MetricsConfig
    stores: Mapping[str, StoreConfig] = dataclasses.field(
        default_factory=lambda: MappingProxyType({})
    )

    def stream(self, system_stream: SystemStream) -> StreamConfig:
        """The settings of ``system_stream``: the ``streams.<id>`` entry whose physical name
        matches and whose ``samza.system`` matches (an entry without one matches any system),
        else defaults with ``stream_id`` = the stream's name."""
        fallback: StreamConfig | None = None
        for entry in self.streams.values():
            if entry.physical_name != system_stream.stream:
                continue
            if entry.system == system_stream.system:
                return entry
            if entry.system is None and fallback is None:
                fallback = entry
        system = self.systems.get(system_stream.system)
        if fallback is not None:
            explicit = self.raw.get(f"streams.{fallback.stream_id}.samza.reset.offset") is not None
            return _inherit(
                dataclasses.replace(fallback, system=system_stream.system), system, explicit
            )
        default = StreamConfig(
            stream_id=system_stream.stream,
            system=system_stream.system,
            physical_name=system_stream.stream,
            key_serde=None,
            msg_serde=None,
            offset_default=None,
            reset_offset=False,
            partitions=None,
            replication_factor=None,
            intermediate=False,
            framed=False,
            upstream_inputs=(),
            watermark_lateness_ms=None,
        )
        return _inherit(default, system, explicit_reset=False)

    def to_dict(self) -> dict[str, Any]:
        """The effective flat configuration, defaults filled in, keys sorted."""
        return check(self.raw).values


def resolve(config: Config) -> ResolvedConfig:
    """Validate ``config`` (raising one ConfigError listing every problem) and build the views."""
    checked = check(config)
    v = checked.values
    systems = {name: _system(name, v, config) for name in checked.systems}
    streams: dict[str, StreamConfig] = {}
    for stream_id in checked.streams:
        entry = _stream(stream_id, v)
        explicit = config.get(f"streams.{stream_id}.samza.reset.offset") is not None
        if entry.system is not None:
            entry = _inherit(entry, systems.get(entry.system), explicit)
        streams[stream_id] = entry
    return ResolvedConfig(
        raw=config,
        job=JobConfig(
            name=v["job.name"],
            id=v["job.id"],
            loop=v["job.loop"],
            container_thread_pool_size=v["job.container.thread.pool.size"],
            container_id=v.get("job.container.id"),
            coordinator_factory=v.get("job.coordinator.factory"),
            container_count=v["job.container.count"],
            coordinator_session_timeout_ms=v["job.coordinator.session.timeout.ms"],
            monitor_partition_change_ms=v["job.coordinator.monitor-partition-change.frequency.ms"],
            standby_replication_factor=v["job.standbytasks.replication.factor"],
            logged_store_base_dir=v["job.logged.store.base.dir"],
        ),
        task=_task(v),
        systems=MappingProxyType(systems),
        streams=MappingProxyType(streams),
        serializers=MappingProxyType(
            {n: v[f"serializers.registry.{n}.class"] for n in checked.serializers}
        ),
        metrics=MetricsConfig(
            reporters=tuple(v["metrics.reporters"]),
            reporter_interval_ms=v["metrics.reporter.interval.ms"],
            prometheus_port=v["metrics.prometheus.port"],
            prometheus_host=v["metrics.prometheus.host"],
        ),
        stores=MappingProxyType(_stores(config)),
    )


def _stores(config: Config) -> dict[str, StoreConfig]:
    names = sorted(
        {k.split(".")[1] for k in config if k.startswith("stores.") and k.count(".") >= 2}
    )
    stores = {}
    for name in names:
        options = config.subset(f"stores.{name}")
        samza = SAMZA_STORE_FACTORIES.get(str(options.get("factory")).strip())
        if samza is not None:  # Samza's class name of the engine: samzapy's same one
            options = Config({**options, "factory": samza}, source=config.source)
        changelog = options.get("changelog")
        parsed = None
        if changelog:
            system, _, stream = str(changelog).partition(".")
            parsed = SystemStream(system, stream)
        stores[name] = StoreConfig(
            name=name,
            factory=options.get("factory"),
            key_serde=options.get("key.serde"),
            msg_serde=options.get("msg.serde"),
            changelog=parsed,
            options=options,
        )
    return stores


def _task(v: Mapping[str, Any]) -> TaskConfig:
    inputs = dict.fromkeys(_system_streams(v["task.inputs"]))
    broadcast: dict[SystemStream, set[int]] = {}
    for item in v["task.broadcast.inputs"]:
        parsed = parse_broadcast(item)
        assert parsed is not None  # validated
        broadcast.setdefault(parsed[0], set()).update(parsed[1])
    return TaskConfig(
        task_class=v.get("task.class"),
        inputs=tuple(inputs),
        broadcast_inputs=tuple(BroadcastInput(ss, tuple(sorted(p))) for ss, p in broadcast.items()),
        max_concurrency=v["task.max.concurrency"],
        commit_ms=v["task.commit.ms"],
        window_ms=v["task.window.ms"],
        callback_timeout_ms=v["task.callback.timeout.ms"],
        shutdown_ms=v["task.shutdown.ms"],
        drop_deserialization_errors=v["task.drop.deserialization.errors"],
        drop_producer_errors=v["task.drop.producer.errors"],
        checkpoint_factory=v.get("task.checkpoint.factory") or None,
        checkpoint_dir=v["task.checkpoint.dir"],
        checkpoint_system=v.get("task.checkpoint.system"),
        checkpoint_replication_factor=v["task.checkpoint.replication.factor"],
        progress_interval_ms=v["task.progress.interval.ms"],
        poll_timeout_ms=v["task.poll.timeout.ms"],
        stall_timeout_ms=v["task.stall.timeout.ms"],
        stall_fail=v["task.stall.fail"],
        processing_guarantee=v["task.processing.guarantee"],
        transaction_timeout_ms=v["task.transaction.timeout.ms"],
        store_snapshots=v["task.transactional.state.checkpoint.enabled"],
        app_class=v.get("app.class"),
        drop_process_errors=v["task.drop.process.errors"],
        dead_letter_stream=parse_system_stream(v.get("task.dead.letter.stream") or ""),
    )


def _system(name: str, v: Mapping[str, Any], config: Config) -> SystemConfig:
    prefix = f"systems.{name}."
    return SystemConfig(
        name=name,
        factory=v[prefix + "samza.factory"],
        key_serde=v.get(prefix + "samza.key.serde"),
        msg_serde=v.get(prefix + "samza.msg.serde"),
        fetch_threshold=v[prefix + "samza.fetch.threshold"],
        offset_default=v.get(prefix + "default.stream.samza.offset.default"),
        reset_offset=v.get(prefix + "default.stream.samza.reset.offset"),
        params=Config(
            {k[len(prefix) :]: x for k, x in v.items() if k.startswith(prefix)},
            source=config.source,
        ),
    )


def _stream(stream_id: str, v: Mapping[str, Any]) -> StreamConfig:
    prefix = f"streams.{stream_id}."
    intermediate = v[prefix + "samza.intermediate"]
    offset_default = v.get(prefix + "samza.offset.default")
    if offset_default is None and intermediate:
        # As Samza's planner does: a downstream stage started after its upstream has written
        # must read what was written, so an intermediate stream starts at its oldest message.
        offset_default = "oldest"
    return StreamConfig(
        stream_id=stream_id,
        system=v.get(prefix + "samza.system"),
        physical_name=v[prefix + "samza.physical.name"],
        key_serde=v.get(prefix + "samza.key.serde"),
        msg_serde=v.get(prefix + "samza.msg.serde"),
        offset_default=offset_default,
        reset_offset=v[prefix + "samza.reset.offset"],
        partitions=v.get(prefix + "partitions"),
        replication_factor=v.get(prefix + "replication.factor"),
        intermediate=intermediate,
        framed=v[prefix + "samza.framed"],
        upstream_inputs=_system_streams(v[prefix + "samza.upstream.inputs"]),
        watermark_lateness_ms=v.get(prefix + "samza.watermark.lateness.ms"),
        linger_ms=v.get(prefix + "producer.linger.ms"),
        origins=v[prefix + "samza.origins"],
        event_time_fn=v.get(prefix + "samza.event.time.function"),
        watermark_idle_ms=v.get(prefix + "samza.watermark.idle.ms"),
        bootstrap=v[prefix + "samza.bootstrap"],
    )


def _system_streams(items: list[str]) -> tuple[SystemStream, ...]:
    out: list[SystemStream] = []
    for item in items:
        parsed = parse_system_stream(item)
        assert parsed is not None  # validated
        out.append(parsed)
    return tuple(out)


def _inherit(
    entry: StreamConfig, system: SystemConfig | None, explicit_reset: bool
) -> StreamConfig:
    """``entry`` with the settings it leaves unset taken from its system's defaults."""
    if system is None:
        return entry
    reset = entry.reset_offset
    if not explicit_reset and system.reset_offset is not None:
        reset = system.reset_offset
    return dataclasses.replace(
        entry,
        key_serde=entry.key_serde or system.key_serde,
        msg_serde=entry.msg_serde or system.msg_serde,
        offset_default=entry.offset_default or system.offset_default,
        reset_offset=reset,
    )


__all__ = [
    "BroadcastInput",
    "JobConfig",
    "MetricsConfig",
    "ResolvedConfig",
    "StreamConfig",
    "SystemConfig",
    "TaskConfig",
    "resolve",
]
