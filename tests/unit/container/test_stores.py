"""Tasks' key-value stores in the container: opened for init, logged, restored exactly."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import pytest
from structlog.testing import capture_logs

from samzapy import (
    AsyncStreamTask,
    InitableTask,
    RequestScope,
    StoreError,
    StreamTask,
    TaskError,
)
from samzapy.system.inmemory import InMemoryBroker
from samzapy.testing import TestRunner

WORDS = ["apple", "pear", "fig", "kiwi", "plum", "lime"]


def store_config(tmp_path: Path, factory: str, **extra: Any) -> dict[str, Any]:
    return {
        "stores.counts.factory": factory,
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "stores.counts.changelog": "memory.counts-changelog",
        "job.logged.store.base.dir": str(tmp_path / "state"),
        **extra,
    }


#: Each write's changelog record sent as it happens (no deduplication until the commit), so
#: that a crash leaves changelog records past the checkpoint for the restore to drop.
PER_WRITE = {"stores.counts.write.buffer.max.bytes": 0}


def input_words(n: int) -> dict[int, list[str]]:
    return {p: [WORDS[(i * 7 + p) % len(WORDS)] for i in range(n)] for p in range(2)}


def changelog_state(broker: InMemoryBroker) -> dict[str, int]:
    """Each task's store as its changelog partition says (latest record per key), summed
    over the tasks: every task counts the words of its own input partition."""
    total: Counter[str] = Counter()
    for p in range(broker.partition_count("counts-changelog") or 0):
        state: dict[str, int] = {}
        for key, value in broker.records("counts-changelog", p):
            if value is None:
                state.pop(key.decode(), None)
            else:
                state[key.decode()] = int.from_bytes(value, "big", signed=True)
        total.update(state)
    return dict(total)


class WordCount(InitableTask, StreamTask):
    fail_at: int | None = None
    stop_at: int | None = None

    def init(self, context: Any) -> None:
        self.store = context.get_store("counts")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        word = envelope.message
        self.store.put(word, (self.store.get(word) or 0) + 1)
        n = int(envelope.offset)
        if WordCount.stop_at is not None and n == WordCount.stop_at:
            coordinator.commit(RequestScope.CURRENT_TASK)
            # Each task, once it got there: the container stops when both have (a sync
            # task's turn, which the commit ends here, may reach this offset before the
            # other task has processed anything).
            coordinator.shutdown(RequestScope.CURRENT_TASK)
        if WordCount.fail_at is not None and n == WordCount.fail_at:
            raise RuntimeError("crash after writing beyond the last checkpoint")


def expected(words: dict[int, list[str]]) -> dict[str, int]:
    return dict(Counter(w for ws in words.values() for w in ws))


class CommitAt99(InitableTask, AsyncStreamTask):
    """WordCount's count with a commit at offset 99 and, with ``WordCount.fail_at``, a failure
    at that offset once every task has gone past its commit: each task's store and changelog
    then hold writes past its checkpoint, whichever order the tasks' commits end in (a commit
    that snapshots a store waits for a thread, while the other tasks go on)."""

    past_commit: ClassVar[set[str]] = set()
    all_past = asyncio.Event()

    def init(self, context: Any) -> None:
        self.store = context.get_store("counts")
        self.task = str(context.task_name)

    async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        word = envelope.message
        self.store.put(word, (self.store.get(word) or 0) + 1)
        n = int(envelope.offset)
        if n == 99:
            coordinator.commit(RequestScope.CURRENT_TASK)
        elif n == 100:  # its commit at 99 is done
            CommitAt99.past_commit.add(self.task)
            if len(CommitAt99.past_commit) == 2:  # both tasks
                CommitAt99.all_past.set()
        if WordCount.fail_at is not None and n == WordCount.fail_at:
            await CommitAt99.all_past.wait()
            raise RuntimeError("crash after writing beyond the last checkpoint")


@pytest.fixture(autouse=True)
def _reset() -> None:
    WordCount.fail_at = WordCount.stop_at = None
    CommitAt99.past_commit = set()
    CommitAt99.all_past = asyncio.Event()


#: Without a write cache, and with one smaller than the vocabulary (it writes back as it goes).
CACHES = pytest.mark.parametrize("cache", [{}, {"stores.counts.object.cache.size": 4}])


@CACHES
@pytest.mark.parametrize("factory", ["inmemory", "rocksdb"])
def test_counts_are_exact_and_logged_to_the_changelog(
    tmp_path: Path, factory: str, cache: dict[str, int]
) -> None:
    words = input_words(300)
    runner = TestRunner(WordCount, store_config(tmp_path, factory, **cache))
    runner.add_input("words", words).run()
    assert changelog_state(runner.broker) == expected(words)


@CACHES
@pytest.mark.parametrize("factory", ["inmemory", "rocksdb"])
def test_crash_after_the_checkpoint_restores_exactly_not_at_least_once(
    tmp_path: Path, factory: str, cache: dict[str, int]
) -> None:
    words = input_words(300)
    config = store_config(tmp_path, factory, **{"task.commit.ms": -1, **PER_WRITE}, **cache)
    # First run: commits at offset 99 of each partition's... (explicit commit), then keeps
    # writing to the store and the changelog until it fails at offset 250.
    WordCount.fail_at = 250

    first = TestRunner(CommitAt99, config).add_input("words", words)
    with pytest.raises(TaskError):
        first.run()
    WordCount.fail_at = None
    # The restart drops the changelog records written after the checkpoint and processes
    # offsets 100.. again: every word counted exactly once.
    with capture_logs() as logs:
        TestRunner(WordCount, config, namespace=first.namespace).add_input("words", words).run()
    assert changelog_state(first.broker) == expected(words)
    restored = [e for e in logs if e["event"] == "store_restored"]
    assert len(restored) == 2
    assert all(e["dropped_after_checkpoint"] > 0 for e in restored)
    assert all(e["kept_local"] is False for e in restored)


@pytest.mark.parametrize("factory", ["inmemory", "rocksdb"])
def test_by_default_the_changelog_gets_each_key_once_per_commit_and_a_crash_stays_exact(
    tmp_path: Path, factory: str
) -> None:
    words = input_words(300)  # 300 words a partition, of len(WORDS) distinct ones
    config = store_config(tmp_path, factory, **{"task.commit.ms": -1})
    first = TestRunner(CommitAt99, config).add_input("words", words)
    WordCount.fail_at = 250
    with pytest.raises(TaskError):
        first.run()
    WordCount.fail_at = None
    # One commit (at 99) sent each word the task had written once; what came after it waits
    # in the buffer, and the crash drops it: nothing past the checkpoint to take back.
    for p in range(2):
        sent = first.broker.records("counts-changelog", p)
        assert len(sent) == len({w for w in words[p][:100]})
    with capture_logs() as logs:
        TestRunner(WordCount, config, namespace=first.namespace).add_input("words", words).run()
    assert changelog_state(first.broker) == expected(words)
    restored = [e for e in logs if e["event"] == "store_restored"]
    assert [e["dropped_after_checkpoint"] for e in restored] == [0, 0]


@pytest.mark.parametrize("factory", ["inmemory", "rocksdb"])
def test_a_write_cache_sends_each_key_once_per_commit(tmp_path: Path, factory: str) -> None:
    words = input_words(300)
    config = store_config(
        tmp_path, factory, **{"task.commit.ms": -1, "stores.counts.object.cache.size": 100}
    )

    class CommitEvery100(WordCount):
        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            super().process(envelope, collector, coordinator)
            if int(envelope.offset) % 100 == 99:
                coordinator.commit(RequestScope.CURRENT_TASK)

    runner = TestRunner(CommitEvery100, config).add_input("words", words)
    runner.run()
    assert changelog_state(runner.broker) == expected(words)
    for p, partition_words in words.items():
        intervals = [partition_words[i : i + 100] for i in range(0, 300, 100)]
        assert len(runner.broker.records("counts-changelog", p)) == sum(
            len(set(interval)) for interval in intervals
        )


def stopped_at_49(config: dict[str, Any], words: dict[int, list[str]]) -> TestRunner:
    """A run of WordCount that commits and stops at offset 49 of each partition."""
    WordCount.stop_at = 49
    first = TestRunner(WordCount, config).add_input("words", words)
    first.run()
    WordCount.stop_at = None
    return first


def test_clean_restart_keeps_the_local_rocksdb_store(tmp_path: Path) -> None:
    words = input_words(100)
    config = store_config(tmp_path, "rocksdb")
    first = stopped_at_49(config, words)
    with capture_logs() as logs:
        TestRunner(WordCount, config, namespace=first.namespace).add_input("words", words).run()
    restored = [e for e in logs if e["event"] == "store_restored"]
    assert [e["kept_local"] for e in restored] == [True, True]
    assert [e["records"] for e in restored] == [0, 0]
    assert changelog_state(first.broker) == expected(words)


def test_deleted_state_directory_is_restored_from_the_changelog(tmp_path: Path) -> None:
    import shutil

    words = input_words(100)
    config = store_config(tmp_path, "rocksdb")
    first = stopped_at_49(config, words)
    shutil.rmtree(tmp_path / "state")
    with capture_logs() as logs:
        TestRunner(WordCount, config, namespace=first.namespace).add_input("words", words).run()
    restored = [e for e in logs if e["event"] == "store_restored"]
    assert [e["kept_local"] for e in restored] == [False, False]
    assert all(e["records"] > 0 for e in restored)
    assert changelog_state(first.broker) == expected(words)


def test_a_clean_marker_that_is_no_offset_is_not_trusted(tmp_path: Path) -> None:
    """A clean-close marker whose text the changelog's system cannot read as an offset (a
    damaged file) is no marker: the store is rebuilt from its changelog, with a warning,
    rather than the start failing on a bare ValueError."""
    words = input_words(100)
    config = store_config(tmp_path, "rocksdb")
    first = stopped_at_49(config, words)
    markers = sorted((tmp_path / "state").rglob("CLEAN_OFFSET"))
    assert len(markers) == 2
    for marker in markers:
        marker.write_text("garbage\n")
    with capture_logs() as logs:
        TestRunner(WordCount, config, namespace=first.namespace).add_input("words", words).run()
    restored = [e for e in logs if e["event"] == "store_restored"]
    # Not kept: opened from the snapshot the checkpoint names, as after a crash.
    assert [e["kept_local"] for e in restored] == [False, False]
    assert all(e["snapshot"] is not None for e in restored)
    unusable = [e for e in logs if e["event"] == "store_marker_unusable"]
    assert len(unusable) == 2 and all(e["marker"] == "garbage" for e in unusable)
    assert changelog_state(first.broker) == expected(words)


def test_a_changelog_made_again_behind_the_checkpoint_is_logged_as_state_lost(
    tmp_path: Path,
) -> None:
    """A changelog that holds less than the checkpoint says (a memory changelog in a new
    process, a topic recreated) cannot give the state back: the restore says so."""
    words = input_words(100)
    config = store_config(tmp_path, "inmemory")
    first = stopped_at_49(config, words)
    for p in range(2):
        first.broker.partition("counts-changelog", p).records.clear()
    with capture_logs() as logs:
        TestRunner(WordCount, config, namespace=first.namespace).add_input("words", words).run()
    lost = [e for e in logs if e["event"] == "changelog_behind_checkpoint"]
    assert sorted(e["changelog"] for e in lost) == [
        "memory.counts-changelog#0",
        "memory.counts-changelog#1",
    ]
    assert all(e["upcoming"] == "0" and int(e["checkpointed"]) > 0 for e in lost)


def test_undeclared_store_names_the_store_and_the_task(tmp_path: Path) -> None:
    class Asks(InitableTask, StreamTask):
        def init(self, context: Any) -> None:
            context.get_store("nope")

        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            pass

    with pytest.raises(TaskError) as err:
        TestRunner(Asks, store_config(tmp_path, "inmemory")).add_input("words", ["a"]).run()
    assert isinstance(err.value.__cause__, StoreError)
    assert "'nope'" in str(err.value.__cause__) and "Partition 0" in str(err.value.__cause__)


def test_iterators_are_closed_when_the_call_that_opened_them_ends(tmp_path: Path) -> None:
    class KeepsIterator(InitableTask, StreamTask):
        def init(self, context: Any) -> None:
            self.store = context.get_store("counts")
            self.kept: Any = None

        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            self.store.put(envelope.message, 1)
            if self.kept is None:
                self.kept = self.store.all()
            else:
                list(self.kept)

    with pytest.raises(TaskError) as err:
        TestRunner(KeepsIterator, store_config(tmp_path, "inmemory")).add_input(
            "words", ["a", "b"]
        ).run()
    assert isinstance(err.value.__cause__, StoreError)
    assert "counts" in str(err.value.__cause__)


def test_a_failing_serde_names_the_store_and_key(tmp_path: Path) -> None:
    class Bad(InitableTask, StreamTask):
        def init(self, context: Any) -> None:
            self.store = context.get_store("counts")

        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            self.store.put(envelope.message, "not a number")

    with pytest.raises(TaskError) as err:
        TestRunner(Bad, store_config(tmp_path, "inmemory")).add_input("words", ["a"]).run()
    message = str(err.value.__cause__)
    assert "counts" in message and "'a'" in message


def test_restore_writes_back_the_checkpointed_values_of_keys_touched_after_it(
    tmp_path: Path,
) -> None:
    words = input_words(300)
    config = store_config(tmp_path, "inmemory", **{"task.commit.ms": -1})

    WordCount.fail_at = 250
    first = TestRunner(CommitAt99, config).add_input("words", words)
    with pytest.raises(TaskError):
        first.run()
    WordCount.fail_at = None

    class InitFails(WordCount):
        def init(self, context: Any) -> None:
            raise RuntimeError("stop right after the restore")

    # The restore runs before init: once it is done, the changelog's latest records are the
    # checkpointed state (offsets 0..99 of each partition), not what was written after.
    with pytest.raises(TaskError, match="init"):
        TestRunner(InitFails, config, namespace=first.namespace).add_input("words", words).run()
    checkpointed = {p: ws[:100] for p, ws in words.items()}
    assert changelog_state(first.broker) == expected(checkpointed)


def test_pooled_sync_tasks_count_exactly_with_logged_stores(tmp_path: Path) -> None:
    words = input_words(200)
    config = store_config(tmp_path, "rocksdb", **{"job.container.thread.pool.size": 2})
    runner = TestRunner(WordCount, config)
    runner.add_input("words", words).run()
    assert changelog_state(runner.broker) == expected(words)


# -- store snapshots --------------------------------------------------------------------------


def crashed_at_250(tmp_path: Path, **extra: Any) -> tuple[TestRunner, dict[str, Any]]:
    """A first run that commits at offset 99 of each partition, writes on and fails at 250
    (its local stores hold writes past the checkpoint, and, each write sent as it happens,
    its changelogs too)."""
    config = store_config(tmp_path, "rocksdb", **{"task.commit.ms": -1, **PER_WRITE, **extra})
    WordCount.fail_at = 250
    first = TestRunner(CommitAt99, config).add_input("words", input_words(300))
    with pytest.raises(TaskError):
        first.run()
    WordCount.fail_at = None
    return first, config


def snapshots_of(tmp_path: Path) -> dict[str, list[str]]:
    root = tmp_path / "state" / "test-job" / "counts"
    return {
        d.name: sorted(s.name for s in d.iterdir())
        for d in sorted(root.glob("*.snapshots"))
        if d.is_dir()
    }


def test_a_crash_restarts_from_the_checkpoints_snapshot_replaying_nothing(tmp_path: Path) -> None:
    first, config = crashed_at_250(tmp_path)
    # The first run's commit at 99 snapshotted each task's store, and its checkpoint names it.
    checkpointed = {t: ids for t, ids in snapshots_of(tmp_path).items()}
    assert sorted(checkpointed) == ["Partition_0.snapshots", "Partition_1.snapshots"]
    assert all(len(ids) == 1 for ids in checkpointed.values())
    words = input_words(300)
    with capture_logs() as logs:
        TestRunner(WordCount, config, namespace=first.namespace).add_input("words", words).run()
    assert changelog_state(first.broker) == expected(words)
    restored = [e for e in logs if e["event"] == "store_restored"]
    assert len(restored) == 2
    for event in restored:
        task_dir = str(event["task"]).replace(" ", "_") + ".snapshots"
        assert event["snapshot"] is not None and event["kept_local"] is False
        assert event["snapshot"] == checkpointed[task_dir][0]
        # Nothing replayed: the snapshot is the checkpoint's state; what the crashed run wrote
        # after it is read only to be dropped.
        assert event["records"] == 0
        assert event["dropped_after_checkpoint"] > 0
    # The clean end's checkpoint names a newer snapshot, the only one left.
    after = snapshots_of(tmp_path)
    assert all(len(ids) == 1 for ids in after.values())
    assert all(after[t] != checkpointed[t] for t in after)


def test_without_snapshots_a_crash_replays_the_whole_changelog(tmp_path: Path) -> None:
    off = {"task.transactional.state.checkpoint.enabled": False}
    first, config = crashed_at_250(tmp_path, **off)
    assert snapshots_of(tmp_path) == {}
    words = input_words(300)
    with capture_logs() as logs:
        TestRunner(WordCount, config, namespace=first.namespace).add_input("words", words).run()
    assert changelog_state(first.broker) == expected(words)
    restored = [e for e in logs if e["event"] == "store_restored"]
    assert [e["snapshot"] for e in restored] == [None, None]
    assert all(e["records"] == 100 for e in restored)  # offsets 0..99, one write each


def test_a_missing_snapshot_falls_back_to_the_changelog(tmp_path: Path) -> None:
    import shutil

    first, config = crashed_at_250(tmp_path)
    for directory in (tmp_path / "state" / "test-job" / "counts").glob("*.snapshots"):
        shutil.rmtree(directory)
    words = input_words(300)
    with capture_logs() as logs:
        TestRunner(WordCount, config, namespace=first.namespace).add_input("words", words).run()
    assert changelog_state(first.broker) == expected(words)
    unused = [e for e in logs if e["event"] == "store_snapshot_unused"]
    assert [e["reason"] for e in unused] == ["not on this host"] * 2
    restored = [e for e in logs if e["event"] == "store_restored"]
    assert [e["snapshot"] for e in restored] == [None, None]
    assert all(e["records"] == 100 for e in restored)


def test_a_commit_that_wrote_nothing_to_a_store_takes_no_new_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from samzapy.storage.rocksdb import RocksDBStorageEngine

    taken: list[Path] = []
    original = RocksDBStorageEngine.snapshot

    def counting(self: RocksDBStorageEngine, directory: Path) -> None:
        taken.append(directory)
        original(self, directory)

    monkeypatch.setattr(RocksDBStorageEngine, "snapshot", counting)

    class WritesUntil99(WordCount):
        """Counts offsets 0..99 only, and asks for a commit every 50 messages."""

        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            if int(envelope.offset) < 100:
                super().process(envelope, collector, coordinator)
            if int(envelope.offset) % 50 == 49:
                coordinator.commit(RequestScope.CURRENT_TASK)

    config = store_config(tmp_path, "rocksdb", **{"task.commit.ms": -1})
    TestRunner(WritesUntil99, config).add_input("words", input_words(300)).run()
    # Per task: commits at 49 and 99 snapshot; those at 149..299 and the final one find the
    # changelog where the last snapshot left it, and take none.
    assert len(taken) == 4
    last = {path.parent.name: [path.name] for path in taken}
    assert snapshots_of(tmp_path) == last
