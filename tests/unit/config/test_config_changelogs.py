"""Each store's changelog is its own and is not an input (``config/changelogs.py``): a job file's
stores, and an application's tables named with ``with_changelog_stream``."""

from __future__ import annotations

from typing import Any

import pytest

from samzapy import (
    KV,
    ConfigError,
    InMemoryTableDescriptor,
    KafkaSystemDescriptor,
    KVSerde,
    RocksDbTableDescriptor,
    StreamApplication,
    StreamApplicationDescriptor,
)
from samzapy.config import load_config, resolve
from samzapy.testing import TestRunner

MINIMAL: dict[str, Any] = {
    "job.name": "wc",
    "task.class": "app.tasks:WordCount",
    "task.inputs": ["mem.words"],
    "systems.mem.samza.factory": "memory",
}


def problems(text: str) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as info:
        resolve(load_config(text=text, base=MINIMAL, overrides=(), env={}))
    return info.value.problems


def test_two_stores_with_one_changelog_are_refused_naming_both() -> None:
    assert problems(
        "stores.counts.factory: rocksdb\nstores.counts.changelog: mem.log\n"
        "stores.totals.factory: inmemory\nstores.totals.changelog: mem.log\n"
        "stores.other.factory: inmemory\nstores.other.changelog: mem.other-log\n"
    ) == (
        "stores.totals.changelog is mem.log, the changelog of store 'counts' too: each store "
        "needs a changelog of its own (a restore would load one store's entries into the "
        "other); give one of them another stream",
    )


def test_a_changelog_that_is_an_input_is_refused() -> None:
    assert problems("stores.counts.factory: inmemory\nstores.counts.changelog: mem.words\n") == (
        "stores.counts.changelog is mem.words, an input of the job: the store's writes would "
        "come back to its task as messages; give the changelog a stream of its own",
    )


KAFKA = KafkaSystemDescriptor("kafka")
PROFILES = KAFKA.get_input_descriptor("profiles", KVSerde("string", "json"))
PRICES = KAFKA.get_input_descriptor("prices", KVSerde("string", "json"))


@pytest.mark.parametrize(
    ("changelog", "message"),
    [
        (
            "shared",
            r"the changelog of table 'names' \(store 'names'\) and the changelog of table "
            r"'prices' \(store 'prices'\) are both stream kafka\.shared",
        ),
        (
            "profiles",
            r"input stream 'profiles' and the changelog of table 'prices' \(store 'prices'\) "
            r"are both stream kafka\.profiles",
        ),
    ],
)
def test_a_table_s_changelog_stream_must_be_its_own(changelog: str, message: str) -> None:
    """Two tables given one changelog would each get the other's entries back at a restore
    (and the restore of one truncates the other's records past its checkpoint). In an
    application the planner refuses it first, naming the tables (``operators/claims.py``)."""

    class Tables(StreamApplication):
        def describe(self, app_desc: StreamApplicationDescriptor) -> None:
            serde = KVSerde("string", "json")
            names = app_desc.get_table(
                RocksDbTableDescriptor("names", serde).with_changelog_stream("shared")
            )
            prices = app_desc.get_table(
                InMemoryTableDescriptor("prices", serde).with_changelog_stream(changelog)
            )
            app_desc.get_input_stream(PROFILES).send_to(names)
            app_desc.get_input_stream(PRICES).send_to(prices)

    runner = TestRunner.of(Tables)
    runner.add_input_stream(PROFILES, [KV("ann", 1)]).add_input_stream(PRICES, [KV("tea", 2)])
    with pytest.raises(ConfigError, match=message):
        runner.run(timeout=5)
