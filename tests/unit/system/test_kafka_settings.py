"""The kafka system's configuration translated to aiokafka arguments (no broker needed)."""

from __future__ import annotations

import importlib.util
import inspect
import ssl
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, codec

from samzapy.api.errors import ConfigError
from samzapy.config import load_config, resolve
from samzapy.system.kafka import KafkaSystemFactory, kafka_settings
from samzapy.system.kafka.settings import ACCEPTED, KafkaSettings, client_option_problems
from samzapy.system.ports import OffsetDefault
from samzapy.system.registry import system_factory_class

SERVERS = {"bootstrap.servers": "k1:9092,k2:9093"}


def settings() -> KafkaSettings:
    return kafka_settings("kafka", SERVERS)


def dotted(config: dict[str, Any]) -> KafkaSettings:
    """Settings of system ``kafka`` from its keys (dotted, prefix stripped) and SERVERS."""
    return kafka_settings("kafka", {**SERVERS, **config})


class TestBootstrapServers:
    def test_a_comma_separated_string_or_a_list(self) -> None:
        assert settings().servers == ("k1:9092", "k2:9093")
        listed = kafka_settings("kafka", {"bootstrap.servers": ["a:1", " b:2 "]})
        assert (
            listed.servers == listed.consumer_servers == listed.producer_servers == ("a:1", "b:2")
        )

    def test_each_side_s_own_key_wins_for_that_side(self) -> None:
        translated = dotted(
            {"consumer.bootstrap.servers": "c:1", "producer.bootstrap.servers": ["p:1", "p:2"]}
        )
        assert translated.servers == ("k1:9092", "k2:9093")
        assert translated.consumer_kwargs()["bootstrap_servers"] == ["c:1"]
        assert translated.producer_kwargs()["bootstrap_servers"] == ["p:1", "p:2"]
        assert translated.admin_kwargs()["bootstrap_servers"] == ["k1:9092", "k2:9093"]

    def test_samza_s_side_keys_alone_are_enough(self) -> None:
        translated = kafka_settings(
            "kafka",
            {"consumer.bootstrap.servers": "c:1", "producer.bootstrap.servers": "p:1"},
        )
        assert translated.servers == ("c:1",)  # the admin follows the consumer
        assert translated.producer_servers == ("p:1",)

    def test_missing_servers_name_the_key(self) -> None:
        with pytest.raises(
            ConfigError, match=r"^systems\.kafka\.bootstrap\.servers must be set to the Kafka"
        ) as info:
            kafka_settings("kafka", {})
        assert info.value.key == "systems.kafka.bootstrap.servers"

    @pytest.mark.parametrize(
        ("value", "message"),
        [
            ("localhost", r"holds 'localhost', expected 'host:port'"),
            ("a:1,b:x", r"holds 'b:x', expected 'host:port'"),
            (9092, r"must be 'host:port,host:port' or a list of 'host:port', got 9092"),
            (["a:1", 2], r"must be 'host:port,host:port' or a list"),
        ],
    )
    def test_malformed_servers_are_refused(self, value: Any, message: str) -> None:
        with pytest.raises(ConfigError, match=rf"^systems\.kafka\.bootstrap\.servers {message}"):
            kafka_settings("kafka", {"bootstrap.servers": value})


class TestPassThrough:
    def test_dotted_names_become_keyword_arguments_of_the_right_type(self) -> None:
        translated = dotted(
            {
                "consumer.max.partition.fetch.bytes": "4194304",
                "consumer.check.crcs": "false",
                "consumer.client.rack": "rack-1",
                "producer.linger.ms": 20,
                "producer.compression.type": "gzip",
                "producer.batch.size": "65536",
                "producer.request.timeout.ms": "5000",
            }
        )
        consumer = translated.consumer_kwargs()
        assert consumer["max_partition_fetch_bytes"] == 4194304
        assert consumer["check_crcs"] is False
        assert consumer["client_rack"] == "rack-1"
        producer = translated.producer_kwargs()
        assert producer["linger_ms"] == 20
        assert producer["compression_type"] == "gzip"
        assert producer["max_batch_size"] == 65536  # Kafka's batch.size
        assert producer["request_timeout_ms"] == 5000

    def test_every_argument_is_one_the_aiokafka_class_takes(self) -> None:
        translated = dotted({"consumer.fetch.max.wait.ms": 100, "producer.acks": 1})
        consumer_params = inspect.signature(AIOKafkaConsumer.__init__).parameters
        producer_params = inspect.signature(AIOKafkaProducer.__init__).parameters
        assert set(translated.consumer_kwargs()) <= set(consumer_params)
        assert set(translated.producer_kwargs()) <= set(producer_params)
        assert set(ACCEPTED["producer"]) == set(producer_params) - {"self"}

    def test_samzapy_s_producer_defaults_and_their_overrides(self) -> None:
        defaults = settings().producer_kwargs()
        assert (defaults["enable_idempotence"], defaults["acks"], defaults["linger_ms"]) == (
            True,
            "all",
            5,
        )
        assert defaults["client_id"] == "samzapy-kafka"
        overridden = dotted({"producer.enable.idempotence": "false", "producer.linger.ms": 0})
        assert overridden.producer_kwargs()["enable_idempotence"] is False
        assert overridden.producer_kwargs()["linger_ms"] == 0

    @pytest.mark.parametrize(("acks", "idempotent"), [("1", False), (0, False), ("-1", True)])
    def test_acks_other_than_all_turn_idempotence_off(self, acks: Any, idempotent: bool) -> None:
        kwargs = dotted({"producer.acks": acks}).producer_kwargs()
        assert kwargs["acks"] == int(acks)
        assert kwargs["enable_idempotence"] is idempotent
        explicit = dotted({"producer.acks": "1", "producer.enable.idempotence": False})
        assert explicit.producer_kwargs()["enable_idempotence"] is False

    def test_the_consumer_is_group_less_and_never_resets_on_its_own(self) -> None:
        kwargs = settings().consumer_kwargs()
        assert kwargs["group_id"] is None
        assert kwargs["enable_auto_commit"] is False
        assert kwargs["auto_offset_reset"] == "none"

    def test_an_unknown_name_suggests_close_ones(self) -> None:
        with pytest.raises(
            ConfigError,
            match=r"^systems\.kafka\.consumer\.max\.partition\.fetch\.byte is not an option of "
            r"the Kafka consumer \(AIOKafkaConsumer has no 'max\.partition\.fetch\.byte'\); "
            r"did you mean consumer\.max\.partition\.fetch\.bytes\?",
        ) as info:
            dotted({"consumer.max.partition.fetch.byte": 1})
        assert info.value.key == "systems.kafka.consumer.max.partition.fetch.byte"

    def test_a_name_far_from_any_lists_the_valid_ones(self) -> None:
        with pytest.raises(ConfigError, match=r"; valid names are producer\.acks, .*linger\.ms"):
            dotted({"producer.zzz": 1})

    @pytest.mark.parametrize(
        ("key", "reason"),
        [
            ("consumer.group.id", "samzapy assigns partitions itself"),
            ("consumer.enable.auto.commit", "samzapy assigns partitions itself"),
            ("consumer.auto.offset.reset", "starts at the stream's samza.offset.default"),
            ("consumer.value.deserializer", "configure serdes instead"),
            ("producer.partitioner", "samzapy picks partitions itself"),
            ("producer.transactional.id", "names each task.s transactional producer itself"),
            ("producer.ssl.context", "set the system's security.protocol, sasl.\\* and ssl.\\*"),
            # A side's own security would bypass the system's checks (and the admin's set-up):
            # the client refused SSL without a context, or SASL on the producer, only once built.
            ("consumer.security.protocol", "set the system's security.protocol, sasl.\\*"),
            ("producer.security.protocol", "set the system's security.protocol, sasl.\\*"),
            ("consumer.sasl.mechanism", "set the system's security.protocol, sasl.\\*"),
            ("producer.sasl.plain.password", "set the system's security.protocol, sasl.\\*"),
            ("consumer.sasl.kerberos.service.name", "set the system's security.protocol"),
        ],
    )
    def test_options_samzapy_manages_are_refused_with_the_reason(
        self, key: str, reason: str
    ) -> None:
        with pytest.raises(ConfigError, match=rf"^systems\.kafka\.{key} cannot be set: .*{reason}"):
            dotted({key: "x"})

    @pytest.mark.parametrize(
        ("key", "value", "expected"),
        [
            ("producer.linger.ms", "soon", "an integer"),
            ("consumer.check.crcs", "yes", "true or false"),
            ("producer.api.version", ["2", "0"], None),  # no default type: taken as given
        ],
    )
    def test_values_that_do_not_fit_the_option_s_type(
        self, key: str, value: Any, expected: str | None
    ) -> None:
        if expected is None:
            assert dotted({key: value}).producer_options == {"api_version": ["2", "0"]}
            return
        with pytest.raises(ConfigError, match=rf"^systems\.kafka\.{key} must be {expected}"):
            dotted({key: value})

    def test_every_key_that_does_not_fit_is_listed_in_one_error(self) -> None:
        with pytest.raises(ConfigError) as info:
            dotted({"consumer.group.id": "x", "producer.lingr.ms": 5, "connect.timeout.ms": -1})
        assert [p.split(" ")[0] for p in info.value.problems] == [
            "systems.kafka.consumer.group.id",
            "systems.kafka.producer.lingr.ms",
            "systems.kafka.connect.timeout.ms",
        ]

    def test_client_option_problems_checks_any_keys_and_names_set_to_null(self) -> None:
        keys = {
            "consumer.fetch.max.wait.mss": None,
            "consumer.fetch.max.wait.ms": None,
            "producer.linger.ms": "soon",
            "producer.acks": "all",
            "bootstrap.servers": "not checked here",
        }
        assert [p.split(" ")[0] for p in client_option_problems("kafka", keys)] == [
            "systems.kafka.consumer.fetch.max.wait.mss",
            "systems.kafka.producer.linger.ms",
        ]
        assert client_option_problems("kafka", {"producer.linger.ms": 5}) == []

    @pytest.mark.parametrize(
        ("name", "value", "problem"),
        [
            ("producer.acks", 2, "must be one of 0, 1, -1, all, got 2"),
            (
                "producer.compression.type",
                "zip",
                "must be one of gzip, snappy, lz4, zstd, got 'zip'",
            ),
            ("producer.linger.ms", -5, "must be an integer >= 0, got -5"),
            ("consumer.max.poll.records", "-1", "must be an integer >= 1, got -1"),
            ("consumer.max.poll.records", 0, "must be an integer >= 1, got 0"),
            ("consumer.request.timeout.ms", 0, "must be an integer >= 1, got 0"),
            ("producer.request.timeout.ms", 0, "must be an integer >= 1, got 0"),
            (
                "consumer.isolation.level",
                "read_comitted",
                "must be one of read_uncommitted, read_committed, got 'read_comitted'",
            ),
        ],
    )
    def test_values_the_client_refuses_only_once_built_are_problems_naming_the_key(
        self, name: str, value: Any, problem: str
    ) -> None:
        """aiokafka refuses these when the client is built, after the job connected, in words
        that name no key: validate names them first."""
        assert client_option_problems("kafka", {name: value}) == [f"systems.kafka.{name} {problem}"]

    @pytest.mark.parametrize(
        ("name", "value"), [("producer.acks", -1), ("producer.acks", "all"), ("producer.acks", 0)]
    )
    def test_every_value_of_acks_the_client_takes_is_taken(self, name: str, value: Any) -> None:
        assert client_option_problems("kafka", {name: value}) == []

    def test_an_idempotent_producer_with_acks_other_than_all_is_a_problem(self) -> None:
        """aiokafka refuses the pair when the producer is built (a traceback, exit 1)."""
        keys = {"producer.acks": 1, "producer.enable.idempotence": True}
        assert client_option_problems("kafka", keys) == [
            "systems.kafka.producer.acks must be all (or -1) when producer.enable.idempotence "
            "is true, got 1: set one of them differently"
        ]
        assert client_option_problems("kafka", {**keys, "producer.acks": "all"}) == []
        assert client_option_problems("kafka", {**keys, "producer.enable.idempotence": False}) == []

    def test_a_codec_whose_library_is_not_installed_is_a_problem(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(codec, "has_lz4", lambda: False)
        monkeypatch.setattr(codec, "has_zstd", lambda: True)
        assert client_option_problems("kafka", {"producer.compression.type": "lz4"}) == [
            "systems.kafka.producer.compression.type lz4 needs the cramjam package, which is "
            "not installed: pip install 'aiokafka[lz4]', or use gzip"
        ]
        assert client_option_problems("kafka", {"producer.compression.type": "zstd"}) == []
        assert client_option_problems("kafka", {"producer.compression.type": "gzip"}) == []


class TestTimeoutsAndReplication:
    def test_defaults(self) -> None:
        assert settings().connect_timeout_ms == 60000
        assert settings().replication_factor == -1

    def test_values_given_as_text(self) -> None:
        translated = dotted(
            {"connect.timeout.ms": "1500", "default.stream.replication.factor": "3"}
        )
        assert (translated.connect_timeout_ms, translated.replication_factor) == (1500, 3)

    @pytest.mark.parametrize(
        ("key", "value", "message"),
        [
            ("connect.timeout.ms", -1, "must be an integer >= 0, got -1"),
            ("connect.timeout.ms", "1m", "must be an integer >= 0, got '1m'"),
            ("default.stream.replication.factor", 0, "must be -1 .* or a replica count >= 1"),
            ("default.stream.replication.factor", -2, "must be an integer >= -1, got -2"),
        ],
    )
    def test_bad_values_name_the_key(self, key: str, value: Any, message: str) -> None:
        with pytest.raises(ConfigError, match=rf"^systems\.kafka\.{key} {message}"):
            dotted({key: value})


class TestSecurity:
    def test_plaintext_by_default_for_every_client(self) -> None:
        translated = settings()
        for kwargs in (
            translated.admin_kwargs(),
            translated.consumer_kwargs(),
            translated.producer_kwargs(),
        ):
            assert kwargs["security_protocol"] == "PLAINTEXT"
            assert "ssl_context" not in kwargs

    def test_sasl_settings_reach_every_client(self) -> None:
        translated = dotted(
            {
                "security.protocol": "sasl_plaintext",  # as the schema hands it: lower case
                "sasl.mechanism": "scram-sha-512",
                "sasl.plain.username": "alice",
                "sasl.plain.password": 1234,
            }
        )
        expected = {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "alice",
            "sasl_plain_password": "1234",
        }
        for kwargs in (
            translated.admin_kwargs(),
            translated.consumer_kwargs(),
            translated.producer_kwargs(),
        ):
            assert {k: kwargs[k] for k in expected} == expected

    def test_sasl_plain_needs_a_password(self) -> None:
        with pytest.raises(
            ConfigError,
            match=r"^systems\.kafka\.sasl\.plain\.password must be set: sasl\.mechanism PLAIN",
        ):
            dotted({"security.protocol": "SASL_SSL", "sasl.plain.username": "alice"})

    def test_gssapi_without_its_library_is_a_problem(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """aiokafka's client asserts the library when built: a traceback after connecting."""
        find_spec = importlib.util.find_spec
        monkeypatch.setattr(
            importlib.util, "find_spec", lambda name: None if name == "gssapi" else find_spec(name)
        )
        with pytest.raises(
            ConfigError,
            match=r"^systems\.kafka\.sasl\.mechanism GSSAPI needs the gssapi package, which is "
            r"not installed: pip install 'aiokafka\[gssapi\]'$",
        ):
            dotted({"security.protocol": "sasl_plaintext", "sasl.mechanism": "gssapi"})

    def test_every_security_problem_is_named_at_once(self) -> None:
        with pytest.raises(ConfigError) as caught:
            dotted(
                {
                    "security.protocol": "SASL_SSL",
                    "sasl.mechanism": "SCRAM-SHA-256",
                    "ssl.cafile": "/nonexistent/ca.pem",
                }
            )
        assert [p.split(" ")[0] for p in caught.value.problems] == [
            "cannot",  # the TLS context, from systems.kafka.ssl.cafile
            "systems.kafka.sasl.plain.username",
            "systems.kafka.sasl.plain.password",
        ]
        assert "systems.kafka.ssl.cafile" in caught.value.problems[0]

    def test_ssl_files_become_one_context(self, monkeypatch: pytest.MonkeyPatch) -> None:
        made: list[dict[str, Any]] = []
        context = ssl.create_default_context()

        def fake_context(**kwargs: Any) -> ssl.SSLContext:
            made.append(kwargs)
            return context

        monkeypatch.setattr("samzapy.system.kafka.security.create_ssl_context", fake_context)
        translated = dotted(
            {
                "security.protocol": "SSL",
                "ssl.cafile": "/etc/kafka/ca.pem",
                "ssl.certfile": "/etc/kafka/client.pem",
                "ssl.keyfile": "/etc/kafka/client.key",
                "ssl.password": "secret",
            }
        )
        assert made == [
            {
                "cafile": "/etc/kafka/ca.pem",
                "certfile": "/etc/kafka/client.pem",
                "keyfile": "/etc/kafka/client.key",
                "password": "secret",
            }
        ]
        assert translated.consumer_kwargs()["ssl_context"] is context
        assert translated.producer_kwargs()["ssl_context"] is context
        assert translated.admin_kwargs()["ssl_context"] is context

    def test_tls_without_files_uses_the_default_cas(self) -> None:
        context = dotted({"security.protocol": "SSL"}).security["ssl_context"]
        assert isinstance(context, ssl.SSLContext)
        assert context.verify_mode == ssl.CERT_REQUIRED

    def test_a_missing_tls_file_names_its_key(self, tmp_path: Path) -> None:
        missing = tmp_path / "ca.pem"
        with pytest.raises(
            ConfigError, match=r"^cannot build the TLS context from systems\.kafka\.ssl\.cafile: "
        ) as info:
            dotted({"security.protocol": "SASL_SSL", "ssl.cafile": str(missing), **_user()})
        assert info.value.key == "systems.kafka.ssl.cafile"

    @pytest.mark.parametrize(
        ("config", "message"),
        [
            ({"ssl.cafile": "/ca.pem"}, r"ssl\.cafile is set but .* is PLAINTEXT: set it to SSL"),
            (
                {"security.protocol": "SSL", "sasl.plain.username": "a"},
                r"sasl\.plain\.username is set but .* is SSL: set it to SASL_PLAINTEXT",
            ),
            ({"security.protocol": "TLS"}, r"security\.protocol must be one of PLAINTEXT, SSL"),
            (
                {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"},
                r"sasl\.mechanism must be one of PLAIN, GSSAPI",
            ),
        ],
    )
    def test_settings_the_protocol_would_ignore_are_errors(
        self, config: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(ConfigError, match=rf"^systems\.kafka\.{message}"):
            dotted(config)


def _user() -> dict[str, str]:
    return {"sasl.plain.username": "alice", "sasl.plain.password": "pw"}


class TestFactory:
    def test_kafka_carries_raw_bytes_and_starts_upcoming(self) -> None:
        assert KafkaSystemFactory.default_msg_serde == "none"
        assert KafkaSystemFactory.default_key_serde == "none"
        assert KafkaSystemFactory.default_offset == OffsetDefault.UPCOMING

    def test_the_registry_names_it(self) -> None:
        assert system_factory_class("kafka") is KafkaSystemFactory
        samza = "org.apache.samza.system.kafka.KafkaSystemFactory"
        assert system_factory_class(samza) is KafkaSystemFactory

    def test_a_bad_key_fails_when_the_factory_is_built(self) -> None:
        with pytest.raises(ConfigError, match=r"systems\.events\.producer\.lnger\.ms is not"):
            KafkaSystemFactory("events", {**SERVERS, "producer.lnger.ms": 5})

    def test_a_job_s_yaml_reaches_the_factory_typed(self) -> None:
        config = resolve(
            load_config(
                text="""
job.name: j
task.class: app:Task
task.inputs: [kafka.in]
systems:
  kafka:
    samza.factory: kafka
    bootstrap.servers: [b1:9092, b2:9092]
    connect.timeout.ms: 1500
    security.protocol: SASL_PLAINTEXT
    sasl.plain.username: alice
    sasl.plain.password: ${KAFKA_PASSWORD}
    consumer:
      max.partition.fetch.bytes: 2097152
    producer.linger.ms: 10
""",
                env={"KAFKA_PASSWORD": "pw"},
            )
        )
        factory = KafkaSystemFactory("kafka", config.systems["kafka"].params)
        translated = factory.settings
        assert translated.servers == ("b1:9092", "b2:9092")
        assert translated.connect_timeout_ms == 1500
        assert translated.replication_factor == -1
        assert translated.consumer_kwargs()["max_partition_fetch_bytes"] == 2097152
        assert translated.producer_kwargs()["linger_ms"] == 10
        assert translated.security == {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "alice",
            "sasl_plain_password": "pw",
        }
