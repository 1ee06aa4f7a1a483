"""resolve's views: defaults, inputs and broadcast parsing, systems, streams, to_dict."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from samzapy.api.system import SystemStream
from samzapy.config import (
    KNOWN_KEYS,
    BroadcastInput,
    JobConfig,
    MetricsConfig,
    ResolvedConfig,
    StreamConfig,
    load_config,
    resolve,
)

MINIMAL = """
job.name: wc
task.class: app.tasks:WordCount
task.inputs: [mem.words]
systems.mem.samza.factory: memory
"""


def resolved(text: str = "", *overrides: str) -> ResolvedConfig:
    return resolve(load_config(text=MINIMAL + text, overrides=overrides, env={}))


def test_job_defaults() -> None:
    assert resolved().job == JobConfig(
        name="wc",
        id="1",
        loop="uvloop",
        container_thread_pool_size=0,
        container_id=None,
        logged_store_base_dir="./state",
    )


def test_task_defaults() -> None:
    task = resolved().task
    assert task.task_class == "app.tasks:WordCount"
    assert task.inputs == (SystemStream("mem", "words"),)
    assert task.broadcast_inputs == ()
    assert task.max_concurrency == 1
    assert task.commit_ms == 60000
    assert task.window_ms == -1
    assert task.callback_timeout_ms == -1
    assert task.shutdown_ms == 30000
    assert task.drop_deserialization_errors is False
    assert task.drop_producer_errors is False
    assert task.checkpoint_factory is None
    assert task.checkpoint_dir == "./state/wc/checkpoints"
    assert task.progress_interval_ms == 10000
    assert task.poll_timeout_ms == 100


def test_system_defaults() -> None:
    system = resolved().systems["mem"]
    assert (system.name, system.factory) == ("mem", "memory")
    assert (system.key_serde, system.msg_serde) == (None, None)
    assert system.fetch_threshold == 50000
    assert (system.offset_default, system.reset_offset) == (None, None)
    assert dict(system.params) == {
        "samza.factory": "memory",
        "samza.fetch.threshold": 50000,
        "namespace": "mem",
    }


def test_file_system_defaults_and_params() -> None:
    config = resolved("systems.f.samza.factory: file\nsystems.f.path: /data/in\n")
    assert dict(config.systems["f"].params) == {
        "samza.factory": "file",
        "samza.fetch.threshold": 50000,
        "path": "/data/in",
        "follow": False,
        "poll.interval.ms": 200,
    }


def test_stream_defaults() -> None:
    assert resolved("streams.page-views_1.partitions: 3\n").streams["page-views_1"] == StreamConfig(
        stream_id="page-views_1",
        system=None,
        physical_name="page-views_1",
        key_serde=None,
        msg_serde=None,
        offset_default=None,
        reset_offset=False,
        partitions=3,
        replication_factor=None,
        intermediate=False,
        framed=False,
        upstream_inputs=(),
        watermark_lateness_ms=None,
    )


def test_metrics_defaults() -> None:
    assert resolved().metrics == MetricsConfig(
        reporters=(), reporter_interval_ms=60000, prometheus_port=9090, prometheus_host="127.0.0.1"
    )


def test_every_known_default_is_listed() -> None:
    defaults = {k.pattern: k.default for k in KNOWN_KEYS if k.default not in (None, ())}
    assert defaults == {
        "job.id": "1",
        "job.loop": "uvloop",
        "job.container.thread.pool.size": 0,
        "job.container.count": 1,
        "job.coordinator.session.timeout.ms": 10000,
        "job.coordinator.monitor-partition-change.frequency.ms": 60000,
        "job.standbytasks.replication.factor": 1,
        "job.logged.store.base.dir": "./state",
        "task.max.concurrency": 1,
        "task.commit.ms": 60000,
        "task.window.ms": -1,
        "task.callback.timeout.ms": -1,
        "task.shutdown.ms": 30000,
        "task.drop.deserialization.errors": False,
        "task.drop.producer.errors": False,
        "task.drop.process.errors": False,
        "task.checkpoint.dir": "./state/<job.name>/checkpoints",
        "task.checkpoint.replication.factor": -1,
        "task.progress.interval.ms": 10000,
        "task.poll.timeout.ms": 100,
        "task.stall.timeout.ms": 300000,
        "task.stall.fail": False,
        "task.processing.guarantee": "at-least-once",
        "task.transaction.timeout.ms": -1,
        "task.transactional.state.checkpoint.enabled": True,
        "systems.<name>.samza.fetch.threshold": 50000,
        "stores.<name>.object.cache.size": 0,
        "stores.<name>.write.buffer.max.bytes": 1 << 20,
        "systems.<name>.namespace": "<name>",
        "systems.<name>.follow": False,
        "systems.<name>.poll.interval.ms": 200,
        "systems.<name>.connect.timeout.ms": 60000,
        "systems.<name>.default.stream.replication.factor": -1,
        "streams.<id>.samza.physical.name": "<id>",
        "streams.<id>.samza.reset.offset": False,
        "streams.<id>.samza.bootstrap": False,
        "streams.<id>.samza.intermediate": False,
        "streams.<id>.samza.framed": False,
        "streams.<id>.samza.origins": True,
        "metrics.reporter.interval.ms": 60000,
        "metrics.prometheus.port": 9090,
        "metrics.prometheus.host": "127.0.0.1",
    }


def test_inputs_split_at_the_first_dot_and_keep_order_without_duplicates() -> None:
    task = resolved(
        "systems.kafka.samza.factory: kafka\n",
        "task.inputs=[kafka.page.views, mem.words, kafka.page.views]",
    ).task
    assert task.inputs == (SystemStream("kafka", "page.views"), SystemStream("mem", "words"))


def test_broadcast_inputs_parse_to_partitions() -> None:
    task = resolved("task.broadcast.inputs: 'mem.ctl.v1#[0-2], mem.other#4, mem.ctl.v1#5'\n").task
    assert task.broadcast_inputs == (
        BroadcastInput(SystemStream("mem", "ctl.v1"), (0, 1, 2, 5)),
        BroadcastInput(SystemStream("mem", "other"), (4,)),
    )


def test_checkpoint_settings() -> None:
    task = resolved("task.checkpoint.factory: file\ntask.checkpoint.dir: /cp\n").task
    assert (task.checkpoint_factory, task.checkpoint_dir) == ("file", "/cp")


def test_views_are_frozen() -> None:
    config = resolved()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.task.max_concurrency = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.systems["x"] = config.systems["mem"]  # type: ignore[index]


def test_stream_lookup_matches_system_and_physical_name() -> None:
    config = resolved(
        "systems.kafka.samza.factory: kafka\n"
        "streams.pv.samza.system: kafka\n"
        "streams.pv.samza.physical.name: page.views\n"
        "streams.pv.partitions: 8\n"
        "streams.any.samza.physical.name: shared\n"
        "streams.any.samza.msg.serde: json\n"
    )
    assert config.stream(SystemStream("kafka", "page.views")).stream_id == "pv"
    assert config.stream(SystemStream("kafka", "page.views")).partitions == 8
    other = config.stream(SystemStream("mem", "page.views"))
    assert (other.stream_id, other.partitions) == ("page.views", None)
    shared = config.stream(SystemStream("mem", "shared"))
    assert (shared.stream_id, shared.system, shared.msg_serde) == ("any", "mem", "json")


def test_stream_without_entry_gets_defaults_and_its_system_settings() -> None:
    config = resolved(
        "systems.mem.samza.msg.serde: json\n"
        "systems.mem.default.stream.samza.offset.default: oldest\n"
        "systems.mem.default.stream.samza.reset.offset: true\n"
    )
    stream = config.stream(SystemStream("mem", "words"))
    assert (stream.stream_id, stream.system, stream.physical_name) == ("words", "mem", "words")
    assert (stream.msg_serde, stream.key_serde) == ("json", None)
    assert (stream.offset_default, stream.reset_offset) == ("oldest", True)


def test_stream_settings_win_over_system_defaults() -> None:
    config = resolved(
        "systems.mem.samza.msg.serde: json\n"
        "systems.mem.default.stream.samza.offset.default: oldest\n"
        "systems.mem.default.stream.samza.reset.offset: true\n"
        "streams.w.samza.system: mem\n"
        "streams.w.samza.physical.name: words\n"
        "streams.w.samza.msg.serde: string\n"
        "streams.w.samza.offset.default: upcoming\n"
        "streams.w.samza.reset.offset: false\n"
    )
    stream = config.stream(SystemStream("mem", "words"))
    assert stream is config.streams["w"]
    assert (stream.msg_serde, stream.offset_default, stream.reset_offset) == (
        "string",
        "upcoming",
        False,
    )


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ("", "oldest"),
        ("systems.mem.default.stream.samza.offset.default: upcoming\n", "oldest"),
        ("streams.mid.samza.offset.default: upcoming\n", "upcoming"),
    ],
)
def test_intermediate_streams_start_at_oldest_unless_the_stream_says_otherwise(
    settings: str, expected: str
) -> None:
    config = resolved(
        "streams.mid.samza.system: mem\nstreams.mid.samza.intermediate: true\n" + settings,
        "task.inputs=mem.a, mem.mid",
    )
    assert config.stream(SystemStream("mem", "mid")).offset_default == expected
    assert config.stream(SystemStream("mem", "a")).offset_default == (
        "upcoming" if "systems.mem" in settings else None
    )


def test_control_message_stream_keys_are_exposed() -> None:
    stream = resolved(
        "streams.mid.samza.system: mem\n"
        "streams.mid.samza.intermediate: true\n"
        "streams.mid.samza.framed: true\n"
        "streams.mid.samza.upstream.inputs: [mem.a.b, mem.c]\n"
        "streams.mid.samza.watermark.lateness.ms: 500\n",
        "task.inputs=mem.a.b, mem.c, mem.mid",
    ).streams["mid"]
    assert stream.intermediate and stream.framed
    assert stream.upstream_inputs == (SystemStream("mem", "a.b"), SystemStream("mem", "c"))
    assert stream.watermark_lateness_ms == 500


def test_to_dict_is_the_effective_config_with_sorted_keys() -> None:
    config = resolved(
        "task.max.concurrency: '4'\nstreams.s.partitions: 2\napp.greeting: hi\n",
        "task.inputs=mem.words, mem.more",
    )
    values: dict[str, Any] = config.to_dict()
    assert list(values) == sorted(values)
    assert values["task.max.concurrency"] == 4
    assert values["task.inputs"] == ["mem.words", "mem.more"]
    assert values["task.commit.ms"] == 60000
    assert values["task.checkpoint.dir"] == "./state/wc/checkpoints"
    assert values["systems.mem.namespace"] == "mem"
    assert values["streams.s.samza.physical.name"] == "s"
    assert values["app.greeting"] == "hi"
    assert "task.checkpoint.factory" not in values  # unset optional keys are left out
