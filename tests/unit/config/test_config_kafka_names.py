"""Names a job gives Kafka are checked when the job file is validated, each problem naming the
key to change, the name and Kafka's limit, instead of a bare InvalidTopicError at start-up."""

from __future__ import annotations

from typing import Any

import pytest

from samzapy import StreamApplication
from samzapy.api.errors import ConfigError
from samzapy.config import load_config, resolve
from samzapy.config.kafka_names import MAX_TOPIC_NAME_LENGTH, topic_name_problem
from samzapy.operators import load_application

KAFKA: dict[str, Any] = {
    "job.name": "wc",
    "task.class": "app.tasks:WordCount",
    "task.inputs": ["kafka.words"],
    "systems.kafka.samza.factory": "kafka",
    "systems.kafka.bootstrap.servers": "127.0.0.1:9092",
}


def problems(**keys: Any) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as info:
        resolve(load_config(base={**KAFKA, **keys}))
    return info.value.problems


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("a" * 249, None),
        ("a.b_c-D9", None),
        ("a" * 250, "is 250 characters long, and Kafka refuses a topic name longer than 249"),
        ("page views", "holds ' ': a Kafka topic name may hold only"),
        ("päge/views", "holds '/', 'ä': a Kafka topic name may hold only"),
        ("..", "is '..', which Kafka refuses as a topic name"),
    ],
)
def test_topic_name_problem_says_what_kafka_refuses(name: str, reason: str | None) -> None:
    found = topic_name_problem(name)
    assert (found is None) if reason is None else (found is not None and reason in found)


class LongNames(StreamApplication):
    """partition_by, then a window: an intermediate stream and a changelog named after the job."""

    def describe(self, app_desc: Any) -> None:
        from datetime import timedelta

        from samzapy import KafkaSystemDescriptor, KVSerde, Windows

        kafka = KafkaSystemDescriptor("kafka")
        words = kafka.get_input_descriptor("words", "string")
        window = Windows.keyed_tumbling_window(
            lambda kv: kv.key,
            timedelta(seconds=5),
            lambda: 0,
            lambda kv, n: n + 1,
            key_serde="string",
            value_serde="long",
        )
        (
            app_desc.get_input_stream(words)
            .partition_by(lambda w: w, lambda w: w, KVSerde("string", "string"), "by-word")
            .window(window, "per-window")
            .sink(lambda pane, collector, coordinator: None)
        )


def app_problems(**keys: Any) -> tuple[str, ...]:
    base = {k: v for k, v in KAFKA.items() if k not in ("task.class", "task.inputs")}
    with pytest.raises(ConfigError) as info:
        app = load_application(load_config(base={**base, **keys}), LongNames)
        resolve(app.config)
    return info.value.problems


def test_a_long_job_name_is_refused_naming_job_name_the_derived_topic_and_the_limit() -> None:
    name = "j" * 230  # <job.name>-1-partition_by-by-word is 253 characters
    found = app_problems(**{"job.name": name})
    intermediate = f"{name}-1-partition_by-by-word"
    assert any(
        p.startswith(f"job.name, job.id: Kafka topic '{intermediate}' (intermediate stream)")
        and f"is {len(intermediate)} characters long" in p
        and f"longer than {MAX_TOPIC_NAME_LENGTH}" in p
        and "shorten job.name (230 characters) or job.id (1) by 4 or more" in p
        for p in found
    ), found


def test_a_long_job_id_is_refused_through_the_window_changelog() -> None:
    # <job.name>-<job.id>-per-window-changelog: 3 + 227 + 21 = 251 characters
    found = app_problems(**{"job.id": "i" * 227})
    changelog = f"wc-{'i' * 227}-per-window-changelog"
    assert any(
        f"Kafka topic '{changelog}' (changelog of store 'per-window')" in p
        and "shorten job.name (2 characters) or job.id (227)" in p
        for p in found
    ), found


def test_names_that_fit_pass() -> None:
    app = load_application(
        load_config(
            base={
                **{k: v for k, v in KAFKA.items() if k not in ("task.class", "task.inputs")},
                "job.name": "j" * 226,
            }
        ),
        LongNames,
    )
    resolve(app.config)  # 249 characters exactly: no problem


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (
            {"task.inputs": ["kafka.page views"]},
            "task.inputs: Kafka topic 'page views' (input) holds ' '",
        ),
        (
            {"stores.s.factory": "inmemory", "stores.s.changelog": "kafka.s/changelog"},
            "stores.s.changelog: Kafka topic 's/changelog' (changelog of store 's') holds '/'",
        ),
        (
            {"streams.out.samza.system": "kafka", "streams.out.samza.physical.name": "o" * 250},
            "streams.out.samza.physical.name: Kafka topic '" + "o" * 250 + "' (stream 'out') "
            "is 250 characters long",
        ),
        (
            {"task.inputs": ["kafka.page.views", "kafka.page_views"]},
            "task.inputs: Kafka topics 'page_views' (input) and 'page.views' (input) differ "
            "only by '.' against '_'",
        ),
        (
            {"job.name": "j" * 32750},
            "job.name, job.id: the job's Kafka consumer group 'samzapy.<job.name>.<job.id>' and "
            "transactional ids",
        ),
    ],
)
def test_user_named_topics_and_ids_kafka_refuses_are_problems(
    keys: dict[str, Any], message: str
) -> None:
    found = problems(**keys)
    assert any(p.startswith(message) for p in found), found


def test_names_on_other_systems_are_not_kafka_s_business() -> None:
    resolve(
        load_config(
            base={
                "job.name": "j" * 300,
                "task.class": "app.tasks:WordCount",
                "task.inputs": ["mem.page views"],
                "systems.mem.samza.factory": "memory",
            }
        )
    )
