"""An application with a RocksDB table and a stream-stream join on the real broker, through
`samzapy run` under exactly-once, killed with -9 twice.

``PaidOrders`` fills the changelogged table ``profiles`` from a stream of profile updates,
joins orders with their payments (processing time, by order id) and enriches each pair with
the member's profile. The profiles are all processed before the first order is produced, so
the expected output is fixed: each (order, payment) pair once, with the member's latest name.

Orders and payments arrive in three stages: while the first run joins (killed with -9), while
the second run joins (killed with -9), and before the third run (which starts on a host
without the local state, so that its stores come back from their changelogs alone, where the
second run's came from this host's snapshots). Most pairs have their halves in different
stages: they join only if the join's stores were restored, and every pair joined after the
first kill is enriched only if the table was (its input is not read again). A read_committed
reader must see every pair exactly once, enriched.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from table_jobs import ORDERS_PAYMENTS, PROFILES  # noqa: E402
from test_app_jobs import app_job_file, plan  # noqa: E402
from test_kafka_jobs import (  # noqa: E402
    Job,
    checkpoint_entries,
    create_topic,
    kill_when,
    name,
    open_transaction,
    output_count,
    produce,
    read_all,
    wait_for,
)

#: Fewer partitions, fewer restores: each costs about 0.6 s under exactly-once.
PARTITIONS = 2
MEMBERS = 300
#: Each member's profile is updated this many times: the table must hold the last.
UPDATES = 2
METHODS = ("card", "cash", "wire", "voucher")
ORDERS = 12_000
#: The stages (0: during the first run, 1: during the second, 2: before the third) of each
#: pair's order and payment, by order number modulo 6.
STAGES = ((0, 0), (0, 1), (1, 0), (1, 2), (2, 1), (0, 2))
#: A stage fed while a run joins arrives in this many chunks, this far apart (about 3 s).
FEED_CHUNKS = 60
FEED_PAUSE_S = 0.025
#: A run is killed once it has committed at least this many pairs.
KILL_AFTER = 300
INPUTS = ("orders", "payments")
STORES = (PROFILES, f"{ORDERS_PAYMENTS}-L", f"{ORDERS_PAYMENTS}-R")

Item = tuple[int, bytes | None, bytes]


# -- the inputs and the output expected ----------------------------------------------------------


def partition_of(member: str) -> int:
    """Every input places a member on one partition, so its profile, orders and payments
    reach one task (co-partitioned as the joins need)."""
    return int(member[1:]) % PARTITIONS


def record(member: str, value: dict[str, Any]) -> Item:
    return (partition_of(member), member.encode(), json.dumps(value).encode())


class Scenario:
    """The profiles, the orders and payments of each stage, and the output expected of them
    (order id -> enriched pair)."""

    def __init__(self, rng: random.Random) -> None:
        members = [f"m{i}" for i in range(MEMBERS)]
        names = {m: [f"{m}-{u}-{rng.randrange(10**6)}" for u in range(UPDATES)] for m in members}
        # Update by update, so that each member's updates are in order on its partition.
        self.profiles = [record(m, {"name": names[m][u]}) for u in range(UPDATES) for m in members]
        self.stages: list[dict[str, list[Item]]] = [
            {"orders": [], "payments": []} for _ in range(3)
        ]
        #: order id -> the stages of its order and payment
        self.stage_of: dict[str, tuple[int, int]] = {}
        self.expected: dict[str, dict[str, Any]] = {}
        for i in range(ORDERS):
            member, order = rng.choice(members), f"o{i}"
            amount, method = rng.randint(1, 9999), rng.choice(METHODS)
            order_stage, payment_stage = self.stage_of[order] = STAGES[i % len(STAGES)]
            self.stages[order_stage]["orders"].append(
                record(member, {"order": order, "amount": amount})
            )
            self.stages[payment_stage]["payments"].append(
                record(member, {"order": order, "method": method})
            )
            self.expected[order] = {
                "order": order,
                "member": member,
                "amount": amount,
                "method": method,
                "name": names[member][-1],
            }

    def produced(self, stream: str, through: int) -> list[Item]:
        """The records of ``stream`` (orders or payments) of stages 0..``through``, in the
        order they were produced."""
        return [item for stage in self.stages[: through + 1] for item in stage[stream]]

    def complete(self, through: int) -> set[str]:
        """The pairs whose halves both come in stages 0..``through``."""
        return {o for o, stages in self.stage_of.items() if max(stages) <= through}

    def split(self, at: int) -> set[str]:
        """The pairs with one half in stages 0..``at`` and the other after them."""
        return {o for o, stages in self.stage_of.items() if min(stages) <= at < max(stages)}


class Feeder:
    """Produces one stage's records in a thread, in FEED_CHUNKS chunks of each topic,
    FEED_PAUSE_S apart: the job reads them as they come, so a kill finds it joining."""

    def __init__(self, bootstrap: str, topics: dict[str, str], stage: dict[str, list[Item]]):
        self.failure: BaseException | None = None
        n = FEED_CHUNKS
        self.chunks = [
            (topics[stream], records[len(records) * i // n : len(records) * (i + 1) // n])
            for i in range(n)
            for stream, records in stage.items()
        ]
        self.thread = threading.Thread(target=self._run, args=(bootstrap,), daemon=True)
        self.thread.start()

    def _run(self, bootstrap: str) -> None:
        try:
            asyncio.run(self._feed(bootstrap))
        except BaseException as exc:
            self.failure = exc

    async def _feed(self, bootstrap: str) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        await producer.start()
        try:
            for topic, records in self.chunks:
                sent = [await producer.send(topic, v, key=k, partition=p) for p, k, v in records]
                await asyncio.gather(*sent)
                await asyncio.sleep(FEED_PAUSE_S)
        finally:
            await producer.stop()

    def join(self) -> None:
        self.thread.join(60)
        assert not self.thread.is_alive(), "the feeder did not finish"
        if self.failure is not None:
            raise AssertionError(f"the feeder failed: {self.failure!r}") from self.failure


# -- what the broker holds -----------------------------------------------------------------------


def checkpointed_ids(bootstrap: str, job: Path, topic: str, items: list[Item]) -> set[str]:
    """The order ids of ``items`` (every record of ``topic``, in the order produced: offset
    order on each partition) that the committed checkpoints cover."""
    offsets = {
        entry["partition"]: int(entry["offset"])
        for entry in checkpoint_entries(bootstrap, job, exactly_once=True)
        if entry["stream"] == topic
    }
    placed: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    for p, _, value in items:
        placed[p].append(json.loads(value)["order"])
    return {o for p, ids in placed.items() for o in ids[: offsets.get(p, -1) + 1]}


def consumed(bootstrap: str, job: Path, topic: str) -> bool:
    """Whether the committed checkpoints cover every record of ``topic``."""
    offsets = {
        entry["partition"]: int(entry["offset"])
        for entry in checkpoint_entries(bootstrap, job, exactly_once=True)
        if entry["stream"] == topic
    }
    ends = end_offsets(bootstrap, topic)
    return all(offsets.get(p, -1) >= end - 1 for p, end in ends.items())


def committed_pairs(bootstrap: str, topic: str) -> list[tuple[str, dict[str, Any]]]:
    """The output as a read_committed reader sees it: (key, value) records."""
    return [
        (r.key.decode(), json.loads(r.value))
        for r in asyncio.run(read_all(bootstrap, topic, committed=True))
    ]


def committed_count(bootstrap: str, topic: str) -> int:
    # Cheap first: nothing is committed while the end offsets are all 0.
    if output_count(bootstrap, topic) == 0:
        return 0
    return len(committed_pairs(bootstrap, topic))


async def _end_offsets(bootstrap: str, topic: str, isolation: str) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return {tp.partition: end for tp, end in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


def end_offsets(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> dict[int, int]:
    """Each partition's high watermark; read_committed: its last stable offset."""
    return asyncio.run(_end_offsets(bootstrap, topic, isolation))


# -- the job's runs ------------------------------------------------------------------------------


def kill_while_joining(bootstrap: str, run: Job, topic: str, before: int) -> bool:
    """SIGKILL ``run`` once it has committed KILL_AFTER pairs more than ``before``, at a
    moment when its output has an open transaction if one comes within 2 s (looked at while
    the run stands still, so that the kill leaves it open: ``kill_when``; the feeder may be
    done by then, and the run idle); whether the kill left uncommitted pairs behind."""
    wait_for(
        lambda: committed_count(bootstrap, topic) >= before + KILL_AFTER,
        60,
        f"{KILL_AFTER} pairs committed by this run",
        run.proc,
    )
    kill_when(run, lambda: open_transaction(bootstrap, topic), "its kill", 2, anyway=True)
    return len(asyncio.run(read_all(bootstrap, topic))) > committed_count(bootstrap, topic)


def restores(run: Job) -> list[dict[str, Any]]:
    """The run's ``store_restored`` events, one per store and task."""
    found = [e for e in run.events() if e["event"] == "store_restored"]
    assert Counter(e["store"] for e in found) == dict.fromkeys(STORES, PARTITIONS), found
    return found


@pytest.mark.timeout(240)
def test_a_table_and_a_join_are_restored_and_read_committed_exactly_once_across_kill_9s(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    rng = random.Random(25)
    scenario = Scenario(rng)
    topics = {key: name(key) for key in ("profiles", "orders", "payments", "paid")}
    for topic in topics.values():
        asyncio.run(create_topic(kafka_bootstrap, topic, PARTITIONS))
    asyncio.run(produce(kafka_bootstrap, topics["profiles"], scenario.profiles))
    job = app_job_file(
        tmp_path,
        kafka_bootstrap,
        "table_jobs:PaidOrders",
        **{f"app.{key}": topic for key, topic in topics.items()},
        **{
            "task.processing.guarantee": "exactly-once",
            # Sends reach the broker within 5 ms (exactly-once lingers 100 ms by default):
            # a transaction's records then stay open on the broker for most of the 200 ms
            # between commits, where a kill can find them (kill_while_joining).
            "systems.kafka.producer.linger.ms": 5,
            # A restart after a kill waits this long for the group to drop the dead member:
            # the broker's least (group.min.session.timeout.ms).
            "job.coordinator.session.timeout.ms": 6000,
        },
    )
    planned = plan(job)
    assert planned["stores"] == sorted(STORES)
    assert [t["description"] for t in planned["tables"]] == [
        f"rocksdb store {PROFILES}, changelogged"
    ]
    paid = topics["paid"]

    # 1. The table is filled, and checkpointed, before any order exists.
    runs = [Job(job, "unused", tmp_path / "run-0.log")]
    wait_for(
        lambda: consumed(kafka_bootstrap, job, topics["profiles"]),
        60,
        "the profiles checkpointed",
        runs[0].proc,
    )
    # 2. Stages 0 and 1, each fed while a run joins it, killed with -9 in the middle; each
    # run checked at its kill, then restarted at once (the feeder may still be at work).
    aborted = []
    for stage in (0, 1):
        run = runs[-1]
        if stage:
            # The restart first catches up with what was fed after the kill.
            wait_for(
                lambda: all(consumed(kafka_bootstrap, job, topics[s]) for s in INPUTS),
                60,
                "stage 0 checkpointed",
                run.proc,
            )
        before = committed_count(kafka_bootstrap, paid)
        feeder = Feeder(kafka_bootstrap, topics, scenario.stages[stage])
        aborted.append(kill_while_joining(kafka_bootstrap, run, paid, before))
        committed = {value["order"] for _, value in committed_pairs(kafka_bootstrap, paid)}
        assert committed < scenario.complete(stage), (
            f"stage {stage}: every pair complete so far was committed before the kill"
        )
        # The split pairs whose first half came in this stage and is checkpointed: the
        # restart's stores hold that half, and nothing else will.
        covered = set().union(
            *(
                checkpointed_ids(kafka_bootstrap, job, topics[s], scenario.produced(s, stage))
                for s in INPUTS
            )
        )
        held = {o for o in scenario.split(stage) if min(scenario.stage_of[o]) == stage}
        assert held & covered, f"stage {stage}: no split pair had a half checkpointed at the kill"
        if stage == 1:
            # 3. The last restart on a host without the local state, and stage 2.
            shutil.rmtree(tmp_path / "state")
        runs.append(Job(job, "unused", tmp_path / f"run-{stage + 1}.log"))
        feeder.join()
    for stream in INPUTS:
        asyncio.run(produce(kafka_bootstrap, topics[stream], scenario.stages[2][stream]))
    wait_for(
        lambda: committed_count(kafka_bootstrap, paid) >= ORDERS,
        90,
        "every pair, read committed",
        runs[-1].proc,
    )
    assert runs[-1].stop() == 0, runs[-1].tail()

    got = committed_pairs(kafka_bootstrap, paid)
    counts = Counter(value["order"] for _, value in got)
    duplicated = sorted(o for o, c in counts.items() if c > 1)
    missing = sorted(set(scenario.expected) - set(counts))
    assert not duplicated and not missing, (
        f"{len(duplicated)} pairs duplicated (e.g. {duplicated[:5]}), {len(missing)} missing "
        f"(e.g. {missing[:5]})"
    )
    wrong = [(key, value) for key, value in got if value != scenario.expected[value["order"]]]
    assert not wrong, f"{len(wrong)} pairs enriched wrongly, e.g. {wrong[:3]}"
    assert all(key == value["member"] for key, value in got)
    assert any(aborted), "no kill left an open transaction behind: the test proved less"
    # Every store of every task came back: in the second run from this host's snapshots of
    # the checkpoint; in the third, without them, by replaying its changelog (the only copy
    # of the profiles, whose input is not read again).
    assert all(e["snapshot"] is not None for e in restores(runs[1])), restores(runs[1])
    replayed: Counter[str] = Counter()
    for event in restores(runs[2]):
        assert event["snapshot"] is None, event
        replayed[event["store"]] += event["records"]
    assert replayed[PROFILES] >= MEMBERS and min(replayed.values()) > 0, replayed
