"""A window without an aggregator over a stream of KVs keeps each message as its value serde
gives it back: `json` gives a KV back as a list, so `pane.message[0].value` would fail far
from the cause. As a stream-stream join does (docs/tables.md, Errors), the window refuses
such a serde at the first message, naming itself; pickle, the default, keeps KVs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from samzapy import KV, KafkaSystemDescriptor, KVSerde, StreamApplication, TaskError, Windows
from samzapy.testing import TestRunner

KAFKA = KafkaSystemDescriptor("kafka")
VIEWS = (
    KAFKA.get_input_descriptor("views", KVSerde("string", "json"))
    .with_timestamp(lambda kv: kv.value["t"])
    .with_watermarks()
)


def run(kind: str, value_serde: Any) -> list[list[Any]]:
    panes: list[list[Any]] = []

    class Panes(StreamApplication):
        def describe(self, app_desc):  # type: ignore[no-untyped-def]
            if kind == "tumbling":
                window = Windows.keyed_tumbling_window(
                    lambda kv: kv.key, timedelta(seconds=10), value_serde=value_serde
                )
            else:
                window = Windows.keyed_session_window(
                    lambda kv: kv.key, timedelta(seconds=10), value_serde=value_serde
                )
            app_desc.get_input_stream(VIEWS).window(window.with_event_time(), "w").sink(
                lambda pane, c, k: panes.append(pane.message)
            )

    views = [KV("a", {"t": 1}), KV("a", {"t": 2}), KV("a", {"t": 30_000})]
    TestRunner.of(Panes).add_input_stream(VIEWS, views).run(timeout=10)
    return panes


@pytest.mark.parametrize("kind", ["tumbling", "session"])
def test_a_value_serde_that_gives_kvs_back_as_lists_is_refused(kind: str) -> None:
    with pytest.raises(TaskError) as raised:
        run(kind, "json")
    assert raised.value.operator == "w"
    assert isinstance(raised.value.__cause__, TypeError)
    assert "gives them back as lists" in str(raised.value.__cause__)


@pytest.mark.parametrize("kind", ["tumbling", "session"])
def test_the_default_serde_keeps_the_kvs(kind: str) -> None:
    assert run(kind, None) == [[KV("a", {"t": 1}), KV("a", {"t": 2})], [KV("a", {"t": 30_000})]]
