"""The kafka system's configuration: typed keys in, aiokafka keyword arguments out.

The factory hands over the system's own keys (``systems.<name>.`` stripped). This module is
pure apart from reading the TLS files named by ``ssl.*``:

- ``bootstrap.servers``: ``"host:port,host:port"`` or a list; ``consumer.bootstrap.servers``
  and ``producer.bootstrap.servers`` (Samza's names) win for their side.
- ``consumer.<kafka.name>`` / ``producer.<kafka.name>``: passed to AIOKafkaConsumer /
  AIOKafkaProducer with dots turned into underscores (``producer.linger.ms`` ->
  ``linger_ms``), checked against the real constructor and coerced to the type of its
  default. Options samzapy manages itself (group, offsets reset, serializers, partitioner)
  are refused with the reason.
- ``security.protocol``, ``sasl.*`` and ``ssl.*``: see ``security``; one set-up shared by
  the admin, the consumer and the producer.
- ``connect.timeout.ms`` and ``default.stream.replication.factor``.

``kafka_settings`` reports every problem of the system's keys in one ConfigError.
``client_option_problems`` is the ``consumer.*``/``producer.*`` part alone, for any mapping of
the system's keys, typed or not: ``samzapy validate`` and ``samzapy run`` check the options
with it even when other keys of the job are wrong (a key set to null is checked by name).
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, codec

from samzapy.api.errors import ConfigError
from samzapy.config.loader import Problem, collecting, config_error
from samzapy.config.schema import INT32_MAX, to_int
from samzapy.system.kafka.security import security_options

DEFAULT_CONNECT_TIMEOUT_MS = 60_000
#: -1: the broker's ``default.replication.factor``.
DEFAULT_REPLICATION_FACTOR = -1

#: What samzapy sets on every producer unless the job overrides it.
PRODUCER_DEFAULTS: Mapping[str, Any] = {"enable_idempotence": True, "acks": "all", "linger_ms": 5}
#: What samzapy always sets on its consumers.
CONSUMER_FIXED: Mapping[str, Any] = {
    "group_id": None,
    "enable_auto_commit": False,
    "auto_offset_reset": "none",
}

_GROUP = "samzapy assigns partitions itself and keeps offsets in its checkpoints"
_SERDES = "samzapy applies the stream's serdes; configure serdes instead"
_SECURITY = "set the system's security.protocol, sasl.* and ssl.* keys instead"
#: One security set-up serves the admin, the consumer and the producer (``security``): a
#: side's own would bypass its checks, and the client refuses most of it only once built.
_SECURITY_ARGUMENTS = dict.fromkeys(
    (
        "security_protocol",
        "ssl_context",
        "sasl_mechanism",
        "sasl_plain_username",
        "sasl_plain_password",
        "sasl_kerberos_service_name",
        "sasl_kerberos_domain_name",
    ),
    _SECURITY,
)
_REFUSED: Mapping[str, Mapping[str, str]] = {
    "consumer": {
        "loop": "samzapy runs its clients on its own event loop",
        "group_id": _GROUP,
        "group_instance_id": _GROUP,
        "enable_auto_commit": _GROUP,
        "auto_commit_interval_ms": _GROUP,
        "partition_assignment_strategy": _GROUP,
        "auto_offset_reset": (
            "a partition whose checkpointed offset Kafka no longer holds starts at the "
            "stream's samza.offset.default"
        ),
        "key_deserializer": _SERDES,
        "value_deserializer": _SERDES,
        **_SECURITY_ARGUMENTS,
        "sasl_oauth_token_provider": "OAUTHBEARER token providers are not configurable yet",
    },
    "producer": {
        "loop": "samzapy runs its clients on its own event loop",
        "key_serializer": _SERDES,
        "value_serializer": _SERDES,
        "partitioner": "samzapy picks partitions itself (by key, or sticky without one)",
        "transactional_id": (
            "samzapy names each task's transactional producer itself (task.processing."
            "guarantee: exactly-once)"
        ),
        "transaction_timeout_ms": "set task.transaction.timeout.ms instead",
        **_SECURITY_ARGUMENTS,
        "sasl_oauth_token_provider": "OAUTHBEARER token providers are not configurable yet",
    },
}
#: Kafka's Java names that aiokafka spells differently.
_JAVA_NAMES: Mapping[str, Mapping[str, str]] = {
    "consumer": {},
    "producer": {"batch_size": "max_batch_size"},
}

_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def _signature_defaults(cls: Any) -> dict[str, Any]:
    parameters = inspect.signature(cls.__init__).parameters.values()
    return {
        p.name: p.default
        for p in parameters
        if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }


#: The keyword arguments each side accepts, with their defaults (read from aiokafka itself).
ACCEPTED: Mapping[str, Mapping[str, Any]] = {
    "consumer": _signature_defaults(AIOKafkaConsumer),
    "producer": _signature_defaults(AIOKafkaProducer),
}


@dataclass(frozen=True)
class KafkaSettings:
    """Everything the admin, consumer and producer of one kafka system are built from."""

    system_name: str
    #: The brokers of the admin (``bootstrap.servers``, else a side's own).
    servers: tuple[str, ...]
    consumer_servers: tuple[str, ...]
    producer_servers: tuple[str, ...]
    #: security_protocol, ssl_context and sasl_* arguments, for every client.
    security: Mapping[str, Any] = field(default_factory=dict)
    consumer_options: Mapping[str, Any] = field(default_factory=dict)
    producer_options: Mapping[str, Any] = field(default_factory=dict)
    connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS
    replication_factor: int = DEFAULT_REPLICATION_FACTOR

    @property
    def client_id(self) -> str:
        """How the brokers see samzapy's clients of this system (unless the job sets one)."""
        return f"samzapy-{self.system_name}"

    def admin_kwargs(self) -> dict[str, Any]:
        """Arguments of AIOKafkaAdminClient."""
        return {
            "bootstrap_servers": list(self.servers),
            "client_id": f"{self.client_id}-admin",
            **self.security,
        }

    def consumer_kwargs(self, *, servers: tuple[str, ...] | None = None) -> dict[str, Any]:
        """Arguments of AIOKafkaConsumer (group-less, no auto-commit, no offset reset)."""
        return {
            "bootstrap_servers": list(servers or self.consumer_servers),
            "client_id": self.client_id,
            **self.security,
            **self.consumer_options,
            **CONSUMER_FIXED,
        }

    def producer_kwargs(self, defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Arguments of AIOKafkaProducer: idempotent, acks=all, 5 ms linger by default;
        ``defaults`` (a kind of producer's own) replace those, and the job's options both."""
        options = dict(self.producer_options)
        if "acks" in options and "enable_idempotence" not in options:
            # As Kafka's own producer: an explicit acks other than all turns idempotence off.
            options.setdefault("enable_idempotence", options["acks"] in ("all", -1))
        return {
            "bootstrap_servers": list(self.producer_servers),
            "client_id": self.client_id,
            **PRODUCER_DEFAULTS,
            **(defaults or {}),
            **self.security,
            **options,
        }


def kafka_settings(system_name: str, config: Mapping[str, Any]) -> KafkaSettings:
    """Translate the system's keys; one ConfigError lists every key that does not fit."""

    def key(name: str) -> str:
        return f"systems.{system_name}.{name}"

    problems: list[Problem] = []
    checked = collecting(problems)

    general = checked(
        lambda: _servers(key("bootstrap.servers"), config.get("bootstrap.servers")), ()
    )
    consumer_servers = checked(
        lambda: _servers(
            key("consumer.bootstrap.servers"), config.get("consumer.bootstrap.servers")
        ),
        (),
    )
    producer_servers = checked(
        lambda: _servers(
            key("producer.bootstrap.servers"), config.get("producer.bootstrap.servers")
        ),
        (),
    )
    servers = general or consumer_servers or producer_servers
    if not servers and not problems:
        problems.append(
            Problem(
                key("bootstrap.servers"),
                f"{key('bootstrap.servers')} must be set to the Kafka brokers, "
                "'host:port,host:port' or a list (or set consumer.bootstrap.servers and "
                "producer.bootstrap.servers)",
            )
        )
    security = checked(lambda: security_options(key, config), {})
    options = {side: _pass_through(side, key, config, problems) for side in _REFUSED}
    connect_timeout_ms = checked(
        lambda: _int(
            key("connect.timeout.ms"), config.get("connect.timeout.ms"), DEFAULT_CONNECT_TIMEOUT_MS
        ),
        DEFAULT_CONNECT_TIMEOUT_MS,
    )
    replication_factor = checked(
        lambda: _replication_factor(
            key("default.stream.replication.factor"),
            config.get("default.stream.replication.factor"),
        ),
        DEFAULT_REPLICATION_FACTOR,
    )
    if problems:
        raise config_error(problems, None)
    return KafkaSettings(
        system_name=system_name,
        servers=servers,
        consumer_servers=consumer_servers or servers,
        producer_servers=producer_servers or servers,
        security=security,
        consumer_options=options["consumer"],
        producer_options=options["producer"],
        connect_timeout_ms=connect_timeout_ms,
        replication_factor=replication_factor,
    )


def client_option_problems(system_name: str, config: Mapping[str, Any]) -> list[str]:
    """What is wrong with the ``consumer.*`` and ``producer.*`` keys of ``config`` (the
    system's keys, ``systems.<system_name>.`` stripped): names the aiokafka client does not
    take or that samzapy manages, and values of the wrong type. Pure."""

    def key(name: str) -> str:
        return f"systems.{system_name}.{name}"

    problems: list[Problem] = []
    for side in _REFUSED:
        _pass_through(side, key, config, problems)
    return [problem.message for problem in problems]


def _servers(key: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        items = list(value)
    else:
        raise ConfigError(
            f"{key} must be 'host:port,host:port' or a list of 'host:port', got {value!r}",
            key=key,
        )
    servers = tuple(item.strip() for item in items if item.strip())
    for server in servers:
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit() or any(c.isspace() for c in server):
            raise ConfigError(f"{key} holds {server!r}, expected 'host:port'", key=key)
    return servers


def _int(key: str, value: Any, default: int, minimum: int = 0) -> int:
    if value is None:
        return default
    number = to_int(value)
    if number is None or number < minimum:
        raise ConfigError(f"{key} must be an integer >= {minimum}, got {value!r}", key=key)
    return number


def _replication_factor(key: str, value: Any) -> int:
    number = _int(key, value, DEFAULT_REPLICATION_FACTOR, minimum=-1)
    if number == 0:
        raise ConfigError(
            f"{key} must be -1 (the broker's default) or a replica count >= 1, got 0", key=key
        )
    return number


def _pass_through(
    side: str, key: Callable[[str], str], config: Mapping[str, Any], problems: list[Problem]
) -> dict[str, Any]:
    """``<side>.<dotted.name>`` keys as keyword arguments of the side's aiokafka class; each
    key that does not fit is added to ``problems``. A key set to None is only checked by name
    (None means "not set")."""
    accepted = ACCEPTED[side]
    refused = _REFUSED[side]
    java = _JAVA_NAMES[side]
    prefix = f"{side}."
    options: dict[str, Any] = {}
    for name, value in config.items():
        if not name.startswith(prefix) or name == f"{side}.bootstrap.servers":
            continue
        full = key(name)
        dotted = name[len(prefix) :]
        argument = dotted.replace(".", "_").replace("-", "_")
        argument = java.get(argument, argument)
        if argument in refused:
            problems.append(Problem(full, f"{full} cannot be set: {refused[argument]}"))
        elif argument not in accepted:
            problems.append(Problem(full, _unknown(side, full, dotted, accepted, refused)))
        elif value is not None:
            try:
                options[argument] = _checked(
                    full, argument, _coerce(full, value, accepted[argument])
                )
            except ConfigError as exc:
                problems.append(Problem(full, str(exc)))
    if side == "producer":
        _idempotence_problems(key, options, problems)
    return options


#: The values an aiokafka argument takes, where the client refuses others only once built.
_CHOICES: dict[str, tuple[Any, ...]] = {
    "acks": (0, 1, -1, "all"),
    "compression_type": ("gzip", "snappy", "lz4", "zstd"),
    "isolation_level": ("read_uncommitted", "read_committed"),
}
#: Integer arguments the client takes only from 1 up (a request timeout of 0 fails every
#: request, which the job would report as a broker it cannot reach).
_POSITIVE = frozenset({"max_poll_records", "request_timeout_ms"})
#: The options Kafka's Java clients type as int (sent in requests as int32; linger_ms is a long).
_INT32 = frozenset({"fetch_max_bytes", "fetch_min_bytes", "fetch_max_wait_ms", "max_batch_size"})
_INT32 |= {"max_partition_fetch_bytes", "request_timeout_ms", "max_request_size"}
_INT32 |= {"session_timeout_ms", "heartbeat_interval_ms", "max_poll_interval_ms"}
_INT32 |= {"max_poll_records"}


def _checked(key: str, argument: str, value: Any) -> Any:
    """``value`` if the client takes it: one of the argument's choices (a codec whose library
    is installed); a count, size or time (an integer argument) not below zero."""
    choices = _CHOICES.get(argument)
    if choices is not None and value not in choices:
        listed = ", ".join(str(c) for c in choices)
        raise ConfigError(f"{key} must be one of {listed}, got {value!r}", key=key)
    if argument == "compression_type" and not getattr(codec, f"has_{value}")():
        raise ConfigError(
            f"{key} {value} needs the cramjam package, which is not installed: "
            f"pip install 'aiokafka[{value}]', or use gzip",
            key=key,
        )
    minimum = 1 if argument in _POSITIVE else 0
    if type(value) is int and value < minimum and argument != "acks":
        raise ConfigError(f"{key} must be an integer >= {minimum}, got {value}", key=key)
    if type(value) is int and value > INT32_MAX and argument in _INT32:
        raise ConfigError(
            f"{key} must be an integer from {minimum} to {INT32_MAX}, got {value}", key=key
        )
    return value


def _idempotence_problems(
    key: Callable[[str], str], options: Mapping[str, Any], problems: list[Problem]
) -> None:
    """An idempotent producer needs acks=all: the client refuses both set otherwise."""
    acks = options.get("acks", "all")
    if options.get("enable_idempotence") is True and acks not in ("all", -1):
        problems.append(
            Problem(
                key("producer.acks"),
                f"{key('producer.acks')} must be all (or -1) when producer.enable.idempotence "
                f"is true, got {acks!r}: set one of them differently",
            )
        )


def _unknown(
    side: str,
    full: str,
    dotted: str,
    accepted: Mapping[str, Any],
    refused: Mapping[str, str],
) -> str:
    names = [arg.replace("_", ".") for arg in accepted if arg not in refused]
    close = difflib.get_close_matches(dotted, names, n=3, cutoff=0.6)
    cls = "AIOKafkaConsumer" if side == "consumer" else "AIOKafkaProducer"
    hint = (
        f"; did you mean {' or '.join(f'{side}.{name}' for name in close)}?"
        if close
        else f"; valid names are {', '.join(f'{side}.{name}' for name in sorted(names))}"
    )
    return f"{full} is not an option of the Kafka {side} ({cls} has no {dotted!r}){hint}"


def _coerce(key: str, value: Any, default: Any) -> Any:
    """``value`` as the type of the argument's default (text from YAML or ``--set``)."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise ConfigError(f"{key} must be true or false, got {value!r}", key=key)
    if isinstance(default, int):
        number = to_int(value)
        if number is None:
            raise ConfigError(f"{key} must be an integer, got {value!r}", key=key)
        return number
    if isinstance(default, float):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str) and _FLOAT_TEXT.fullmatch(value.strip()):
            return float(value.strip())
        raise ConfigError(f"{key} must be a number, got {value!r}", key=key)
    if isinstance(default, str):
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"{key} must be a string, got {value!r}", key=key)
    # No usable default (None or a sentinel): integers and booleans written as text.
    if isinstance(value, str):
        text = value.strip()
        if _INT_TEXT.fullmatch(text):
            return int(text)
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
    return value


__all__ = [
    "ACCEPTED",
    "CONSUMER_FIXED",
    "DEFAULT_CONNECT_TIMEOUT_MS",
    "DEFAULT_REPLICATION_FACTOR",
    "PRODUCER_DEFAULTS",
    "KafkaSettings",
    "client_option_problems",
    "kafka_settings",
]
