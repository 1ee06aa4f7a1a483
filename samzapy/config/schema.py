"""The known configuration keys: their patterns, kinds, defaults and how a value is typed.

A pattern is a dotted key in which ``<name>`` or ``<id>`` stands for one dotted segment (a
system, stream, serde or store name: no dots). A pattern ending in ``.*`` is an open prefix:
anything under it is accepted as given. A key with a ``factory`` is valid only for systems whose
``samza.factory`` is that short name. A string default may hold ``<name>``, ``<id>`` or
``<job.name>``, filled in when defaults are applied.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from samzapy.config.secrets import split_items


class Kind(enum.Enum):
    """How a key's value is typed."""

    INT = "int"
    BOOL = "bool"
    STR = "str"
    STR_LIST = "list-of-str"
    ENUM = "enum"
    ANY = "any"


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One known key (or open prefix) of samzapy's namespaces."""

    pattern: str
    kind: Kind
    default: Any
    doc: str
    choices: tuple[str, ...] | None = None
    minimum: int | None = None
    maximum: int | None = None
    #: An int key that takes -1 or a count >= 1, not 0 (a replication factor).
    replicas: bool = False
    #: A string key's form, and what it is in words for messages.
    form: tuple[re.Pattern[str], str] | None = None
    required: bool = False
    factory: str | None = None
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", _compile(self.pattern))

    @property
    def is_open(self) -> bool:
        """Whether this is an open prefix under which any key is accepted."""
        return self.pattern.endswith(".*")

    @property
    def expected(self) -> str:
        """What a valid value looks like, for messages: ``an integer >= 1``."""
        if self.kind is Kind.INT:
            if self.replicas:
                return f"-1 (the broker's default) or a replica count from 1 to {self.maximum}"
            if self.maximum is not None:
                return f"an integer from {self.minimum} to {self.maximum}"
            return "an integer" if self.minimum is None else f"an integer >= {self.minimum}"
        if self.kind is Kind.BOOL:
            return "a boolean (true or false)"
        if self.kind is Kind.STR:
            return "a string" if self.form is None else self.form[1]
        if self.kind is Kind.STR_LIST:
            return "a list of strings or a comma-separated string"
        if self.kind is Kind.ENUM:
            return "one of " + ", ".join(self.choices or ())
        return "any value"

    def coerce(self, value: Any) -> Any:
        """``value`` converted to this key's type; ValueError when it does not fit."""
        if self.kind is Kind.INT:
            number = to_int(value)
            if (
                number is None
                or (self.minimum is not None and number < self.minimum)
                or (self.maximum is not None and number > self.maximum)
                or (self.replicas and number == 0)
            ):
                raise ValueError(self.expected)
            return number
        if self.kind is Kind.BOOL:
            return _to_bool(value)
        if self.kind is Kind.STR:
            text = _to_str(value)
            if self.form is not None and not self.form[0].fullmatch(text):
                raise ValueError(self.expected)
            return text
        if self.kind is Kind.STR_LIST:
            return _to_str_list(value)
        if self.kind is Kind.ENUM:
            choice = _to_str(value).strip().lower()
            if choice not in (self.choices or ()):
                raise ValueError(self.expected)
            return choice
        return value

    def fill(self, **names: str) -> str:
        """The pattern with its placeholders replaced: ``fill(name="kafka")``."""
        key = self.pattern
        for placeholder, value in names.items():
            key = key.replace(f"<{placeholder}>", value)
        return key


def _compile(pattern: str) -> re.Pattern[str]:
    parts: list[str] = []
    for segment in pattern.split("."):
        if segment == "*":
            parts.append(r".+")
        elif segment.startswith("<") and segment.endswith(">"):
            parts.append(rf"(?P<{segment[1:-1]}>[^.]+)")
        else:
            parts.append(re.escape(segment))
    return re.compile(r"\.".join(parts))


_INT_TEXT = re.compile(r"[+-]?[0-9]+")


def to_int(value: Any) -> int | None:
    """An int, or digits in a string, as an int; None for anything else (bools included)."""
    if isinstance(value, int):
        return None if isinstance(value, bool) else value
    if isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
        return int(value.strip())
    return None


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and (lowered := value.strip().lower()) in ("true", "false"):
        return lowered == "true"
    raise ValueError("a boolean (true or false)")


def _to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise ValueError("a string")


def _to_str_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return split_items(value)
    if isinstance(value, list | tuple):
        return [_to_str(item).strip() for item in value]
    raise ValueError("a list of strings or a comma-separated string")


#: samzapy's own top-level namespaces; keys elsewhere are the job's own and pass untouched.
NAMESPACES = frozenset({"job", "task", "systems", "streams", "serializers", "metrics", "stores"})

#: Short system factory names and the serde names that need no registration.
SYSTEM_FACTORIES = ("memory", "file", "kafka")
#: Samza's Java class names of the systems samzapy has, accepted for their short names.
SAMZA_SYSTEM_FACTORIES = {
    "org.apache.samza.system.kafka.KafkaSystemFactory": "kafka",
    "org.apache.samza.system.inmemory.InMemorySystemFactory": "memory",
}
#: Factories whose systems drop keys (file writes messages only): no changelogs, no checkpoints.
KEYLESS_FACTORIES = ("file",)
BUILTIN_SERDES: tuple[str, ...] = ("string", "json", "bytes", "integer", "long", "double")
BUILTIN_SERDES += ("byte", "bytebuffer", "none")  # Samza's names of bytes; no serde
REPORTERS = ("log", "prometheus")
OFFSET_DEFAULTS = ("oldest", "upcoming")
KAFKA_SECURITY_PROTOCOLS = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
KAFKA_SASL_MECHANISMS = ("plain", "gssapi", "scram-sha-256", "scram-sha-512")

_I, _B, _S, _L, _E, _A = Kind.INT, Kind.BOOL, Kind.STR, Kind.STR_LIST, Kind.ENUM, Kind.ANY
#: A job name or id: part of its topics' names (what a Kafka topic name may hold), its
#: group's and its state directories' (so never ``.`` or ``..``).
_NAME = (
    re.compile(r"(?!\.\.?$)[A-Za-z0-9._-]+"),
    "letters, digits, '.', '_' and '-' (it names the job's topics, group and state directories)",
)


#: The largest values of Kafka's int16 (a replication factor) and int32 fields (a partition
#: count, a timeout the broker is sent): a larger one fails in the client's request encoding.
INT16_MAX, INT32_MAX = 2**15 - 1, 2**31 - 1


def _replicas(pattern: str, default: int | None, doc: str, factory: str | None = None) -> ConfigKey:
    """A replication factor: -1 (the default) or a replica count from 1 to 32767, never 0."""
    spec = ConfigKey(pattern, _I, default, doc, minimum=-1, maximum=INT16_MAX, replicas=True)
    return dataclasses.replace(spec, factory=factory)


def _int32(pattern: str, default: int | None, doc: str, minimum: int) -> ConfigKey:
    """An int key Kafka is sent as an int32: at most 2147483647."""
    return ConfigKey(pattern, _I, default, doc, minimum=minimum, maximum=INT32_MAX)


KNOWN_KEYS: tuple[ConfigKey, ...] = (
    # app (outside NAMESPACES: other app.* keys stay the job's own, as before)
    ConfigKey("app.class", _S, None, "An application: 'module:Class' (instead of task.class)."),
    # job
    ConfigKey(
        "job.name",
        _S,
        None,
        "The job's name (topics, state directories).",
        form=_NAME,
        required=True,
    ),
    ConfigKey("job.id", _S, "1", "Distinguishes runs of the same job.", form=_NAME),
    ConfigKey("job.loop", _E, "uvloop", "The event loop.", choices=("uvloop", "asyncio")),
    ConfigKey("job.container.thread.pool.size", _I, 0, "Threads for blocking work.", minimum=0),
    ConfigKey("job.container.id", _S, None, "This container's id (static share; group instance)."),
    ConfigKey(
        "job.coordinator.factory",
        _E,
        None,
        "How tasks are shared among containers.",
        choices=("kafka-group", "static"),
    ),
    ConfigKey("job.container.count", _I, 1, "Containers of a static job.", minimum=1),
    _int32("job.coordinator.session.timeout.ms", 10000, "Group session timeout.", 1000),
    ConfigKey(
        "job.coordinator.monitor-partition-change.frequency.ms",
        _I,
        60000,
        "How often the inputs' partition counts are checked; <= 0 is off.",
        minimum=-1,
    ),
    ConfigKey(
        "job.standbytasks.replication.factor",
        _I,
        1,
        "Copies of each stateful task: 1 active, the rest standbys (kafka-group).",
        minimum=1,
    ),
    ConfigKey("job.logged.store.base.dir", _S, "./state", "Where local stores live."),
    ConfigKey("job.redacted.keys", _L, (), "Further secret keys (globs), never shown."),
    ConfigKey("job.default.system", _S, None, "Where an app's intermediate streams live."),
    _int32("job.intermediate.stream.partitions", None, "Partitions of intermediate streams.", 1),
    # task
    ConfigKey("task.class", _S, None, "The task: 'module:Class' or 'dotted.Class'."),
    ConfigKey("task.inputs", _L, None, "Input streams, 'system.stream'.", required=True),
    ConfigKey("task.broadcast.inputs", _L, (), "'system.stream#N' or '#[A-B]' for all tasks."),
    ConfigKey("task.max.concurrency", _I, 1, "Messages in flight per task.", minimum=1),
    ConfigKey("task.commit.ms", _I, 60000, "Commit interval; <= 0 disables.", minimum=-1),
    ConfigKey("task.window.ms", _I, -1, "Window interval; -1 is off.", minimum=-1),
    ConfigKey("task.callback.timeout.ms", _I, -1, "process_async timeout; -1 off.", minimum=-1),
    ConfigKey("task.shutdown.ms", _I, 30000, "Graceful shutdown deadline.", minimum=0),
    ConfigKey("task.drop.deserialization.errors", _B, False, "Skip undecodable messages."),
    ConfigKey("task.drop.producer.errors", _B, False, "Ignore failed sends."),
    ConfigKey("task.drop.process.errors", _B, False, "Skip messages process() fails on."),
    ConfigKey("task.dead.letter.stream", _S, None, "Where dropped messages go: system.stream."),
    ConfigKey("task.checkpoint.factory", _S, None, "Checkpoint manager; unset is off."),
    ConfigKey(
        "task.checkpoint.dir", _S, "./state/<job.name>/checkpoints", "File checkpoints' dir."
    ),
    ConfigKey("task.checkpoint.system", _S, None, "System of the checkpoint stream."),
    _replicas("task.checkpoint.replication.factor", -1, "Checkpoint topic replicas."),
    ConfigKey("task.progress.interval.ms", _I, 10000, "Progress log interval.", minimum=-1),
    ConfigKey("task.poll.timeout.ms", _I, 100, "Longest wait of one poll.", minimum=1),
    ConfigKey("task.stall.timeout.ms", _I, 300000, "Stall watchdog; <= 0 is off.", minimum=-1),
    ConfigKey("task.stall.fail", _B, False, "Exit 1 when a task stalls."),
    ConfigKey(
        "task.processing.guarantee",
        _E,
        "at-least-once",
        "What a restart may repeat.",
        choices=("at-least-once", "exactly-once"),
    ),
    _int32("task.transaction.timeout.ms", -1, "Exactly-once: transaction timeout; -1 derives.", -1),
    ConfigKey(
        "task.transactional.state.checkpoint.enabled", _B, True, "RocksDB snapshot per commit."
    ),
    # systems, any factory
    ConfigKey("systems.<name>.samza.factory", _S, None, "memory, file, kafka or module:Class."),
    ConfigKey("systems.<name>.samza.key.serde", _S, None, "Default key serde."),
    ConfigKey("systems.<name>.samza.msg.serde", _S, None, "Default message serde."),
    ConfigKey("systems.<name>.samza.fetch.threshold", _I, 50000, "Buffered msgs.", minimum=1),
    ConfigKey(
        "systems.<name>.default.stream.samza.offset.default",
        _E,
        None,
        "Where streams without a checkpoint start.",
        choices=OFFSET_DEFAULTS,
    ),
    ConfigKey("systems.<name>.default.stream.samza.reset.offset", _B, None, "Ignore checkpoints."),
    # systems, per factory
    ConfigKey("systems.<name>.namespace", _S, "<name>", "Memory namespace.", factory="memory"),
    ConfigKey("systems.<name>.path", _S, None, "Directory.", required=True, factory="file"),
    ConfigKey("systems.<name>.follow", _B, False, "Wait for more lines.", factory="file"),
    ConfigKey(
        "systems.<name>.poll.interval.ms", _I, 200, "Poll period.", minimum=1, factory="file"
    ),
    ConfigKey("systems.<name>.bootstrap.servers", _A, None, "Brokers.", factory="kafka"),
    ConfigKey(
        "systems.<name>.connect.timeout.ms", _I, 60000, "Broker wait.", minimum=0, factory="kafka"
    ),
    _replicas(
        "systems.<name>.default.stream.replication.factor",
        -1,
        "Replicas of created topics.",
        "kafka",
    ),
    ConfigKey(
        "systems.<name>.security.protocol",
        _E,
        None,
        "Kafka security protocol.",
        choices=KAFKA_SECURITY_PROTOCOLS,
        factory="kafka",
    ),
    ConfigKey(
        "systems.<name>.sasl.mechanism",
        _E,
        None,
        "SASL mechanism.",
        choices=KAFKA_SASL_MECHANISMS,
        factory="kafka",
    ),
    ConfigKey("systems.<name>.sasl.plain.username", _S, None, "SASL user.", factory="kafka"),
    ConfigKey("systems.<name>.sasl.plain.password", _S, None, "SASL password.", factory="kafka"),
    ConfigKey("systems.<name>.sasl.kerberos.service.name", _S, None, "GSSAPI.", factory="kafka"),
    ConfigKey("systems.<name>.sasl.kerberos.domain.name", _S, None, "GSSAPI.", factory="kafka"),
    ConfigKey("systems.<name>.ssl.cafile", _S, None, "CA bundle.", factory="kafka"),
    ConfigKey("systems.<name>.ssl.capath", _S, None, "CA directory.", factory="kafka"),
    ConfigKey("systems.<name>.ssl.certfile", _S, None, "Client certificate.", factory="kafka"),
    ConfigKey("systems.<name>.ssl.keyfile", _S, None, "Client key.", factory="kafka"),
    ConfigKey("systems.<name>.ssl.password", _S, None, "Client key password.", factory="kafka"),
    ConfigKey("systems.<name>.consumer.*", _A, None, "Kafka consumer options.", factory="kafka"),
    ConfigKey("systems.<name>.producer.*", _A, None, "Kafka producer options.", factory="kafka"),
    # streams
    ConfigKey("streams.<id>.samza.system", _S, None, "The stream's system."),
    ConfigKey("streams.<id>.samza.physical.name", _S, "<id>", "The name on the system."),
    ConfigKey("streams.<id>.samza.key.serde", _S, None, "Key serde."),
    ConfigKey("streams.<id>.samza.msg.serde", _S, None, "Message serde."),
    ConfigKey(
        "streams.<id>.samza.offset.default",
        _E,
        None,
        "Where to start without a checkpoint.",
        choices=OFFSET_DEFAULTS,
    ),
    ConfigKey("streams.<id>.samza.reset.offset", _B, False, "Ignore checkpoints."),
    ConfigKey("streams.<id>.samza.bootstrap", _B, False, "Read to its head before other inputs."),
    _int32("streams.<id>.partitions", None, "Partitions on creation.", 1),
    _replicas("streams.<id>.replication.factor", None, "Replicas on creation."),
    ConfigKey("streams.<id>.samza.intermediate", _B, False, "Written and read by the job."),
    ConfigKey("streams.<id>.samza.framed", _B, False, "Carries control messages."),
    ConfigKey(
        "streams.<id>.samza.origins", _B, True, "Records carry their origin (readers dedupe)."
    ),
    ConfigKey("streams.<id>.samza.upstream.inputs", _L, (), "Inputs feeding it."),
    ConfigKey("streams.<id>.samza.watermark.lateness.ms", _I, None, "Lateness.", minimum=0),
    ConfigKey("streams.<id>.samza.watermark.idle.ms", _I, None, "Idle after this long.", minimum=1),
    ConfigKey(
        "streams.<id>.samza.event.time.function",
        _A,
        None,
        "An application's with_timestamp: (key, message) -> event time ms.",
    ),
    ConfigKey("streams.<id>.producer.linger.ms", _I, None, "Batch linger when written.", minimum=0),
    # serializers
    ConfigKey(
        "serializers.registry.<name>.class", _A, None, "A serde class, module:Class (or object)."
    ),
    # metrics
    ConfigKey("metrics.reporters", _L, (), "log, prometheus or module:Class."),
    ConfigKey("metrics.reporter.interval.ms", _I, 60000, "Report interval.", minimum=1),
    ConfigKey("metrics.prometheus.port", _I, 9090, "Prometheus port.", minimum=0, maximum=65535),
    ConfigKey("metrics.prometheus.host", _S, "127.0.0.1", "Prometheus address."),
    # stores (reserved)
    ConfigKey("stores.<name>.factory", _S, None, "Store factory."),
    ConfigKey("stores.<name>.key.serde", _S, None, "Key serde."),
    ConfigKey("stores.<name>.msg.serde", _S, None, "Value serde."),
    ConfigKey("stores.<name>.changelog", _S, None, "Changelog, 'system.stream'."),
    ConfigKey("stores.<name>.rocksdb.*", _A, None, "RocksDB options."),
    ConfigKey("stores.<name>.object.cache.size", _I, 0, "Read cache entries.", minimum=0),
    ConfigKey("stores.<name>.write.batch.size", _I, None, "Write buffer keys.", minimum=1),
    ConfigKey(
        "stores.<name>.write.buffer.max.bytes",
        _I,
        1 << 20,
        "Writes waiting for the commit, each key once.",
        minimum=0,
    ),
    ConfigKey(
        "stores.<name>.changelog.dedup.max.bytes",
        _I,
        None,
        "Former name of write.buffer.max.bytes.",
        minimum=0,
    ),
)


def _by_namespace() -> Mapping[str, tuple[ConfigKey, ...]]:
    table: dict[str, list[ConfigKey]] = {}
    for spec in KNOWN_KEYS:
        table.setdefault(spec.pattern.split(".", 1)[0], []).append(spec)
    # exact patterns before open prefixes, so a typed key wins over a prefix
    return {ns: tuple(sorted(specs, key=lambda s: s.is_open)) for ns, specs in table.items()}


_KEYS_BY_NAMESPACE = _by_namespace()


def lookup(key: str) -> tuple[ConfigKey, ...]:
    """Every known key or open prefix whose pattern matches ``key``, exact patterns first."""
    specs = _KEYS_BY_NAMESPACE.get(key.split(".", 1)[0], ())
    return tuple(spec for spec in specs if spec.regex.fullmatch(key))


def keys_in(namespace: str) -> tuple[ConfigKey, ...]:
    """The known keys of one namespace (``"systems"``), exact patterns first."""
    return _KEYS_BY_NAMESPACE.get(namespace, ())


__all__ = [
    "BUILTIN_SERDES",
    "INT16_MAX",
    "INT32_MAX",
    "KAFKA_SASL_MECHANISMS",
    "KEYLESS_FACTORIES",
    "KAFKA_SECURITY_PROTOCOLS",
    "KNOWN_KEYS",
    "NAMESPACES",
    "OFFSET_DEFAULTS",
    "REPORTERS",
    "SAMZA_SYSTEM_FACTORIES",
    "SYSTEM_FACTORIES",
    "ConfigKey",
    "Kind",
    "keys_in",
    "lookup",
]
