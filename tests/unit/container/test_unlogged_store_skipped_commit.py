"""A store without changelog written after its last snapshot is not marked clean at a stop:
a reader of a framed stream whose stop cancelled a call in flight skips its final commit
(``checkpoint_skipped``), so the last checkpoint stands while the store holds writes past it.
Marked with that checkpoint's snapshot, the restart kept the store and counted the messages
after the checkpoint twice, with no warning; unmarked, it opens the snapshot."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

from structlog.testing import capture_logs
from test_unlogged_store_crash import stored

from samzapy import (
    AsyncStreamTask,
    InitableTask,
    OutgoingMessageEnvelope,
    RequestScope,
    SystemStream,
)
from samzapy.testing import TestRunner

WORDS = SystemStream("memory", "words")
LINES = {0: [f"w{i % 7} w{(i * 3) % 5}" for i in range(60)]}


class CountWords(InitableTask, AsyncStreamTask):
    """Stage 1 sends the words of its lines to ``words``; stage 2 counts them in the store,
    commits at the 30th and, with ``hang_at``, stops the container at that word and hangs."""

    runner: ClassVar[Any] = None
    hang_at: ClassVar[int | None] = None
    seen: ClassVar[int] = 0

    def init(self, context: Any) -> None:
        self.store = context.get_store("counts")

    async def process_async(self, env: Any, collector: Any, coordinator: Any) -> None:
        if env.system_stream_partition.system_stream != WORDS:
            for word in env.message.split():
                collector.send(OutgoingMessageEnvelope(WORDS, word, key=word))
            return
        self.store.put(env.message, (self.store.get(env.message) or 0) + 1)
        CountWords.seen += 1
        if CountWords.seen == 30:
            coordinator.commit(RequestScope.CURRENT_TASK)
        if CountWords.seen == CountWords.hang_at:
            CountWords.runner.container.request_stop("test")
            await asyncio.Event().wait()  # cancelled at task.shutdown.ms


def _runner(tmp_path: Path, namespace: str | None = None, **extra: Any) -> TestRunner:
    config = {
        "task.inputs": ["memory.lines", "memory.words"],
        "stores.counts.factory": "rocksdb",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "job.logged.store.base.dir": str(tmp_path / "state"),
        "task.commit.ms": -1,
        "task.shutdown.ms": 100,
        **extra,
    }
    runner = TestRunner(CountWords, config, namespace=namespace)
    return runner.add_input("lines", LINES).add_intermediate("words", 1)


def test_a_stop_that_skipped_its_commit_leaves_the_store_to_its_snapshot(tmp_path: Path) -> None:
    CountWords.seen, CountWords.hang_at = 0, 80
    first = CountWords.runner = _runner(tmp_path)
    with capture_logs() as stopping:
        first.run(timeout=20)
    assert [e for e in stopping if e["event"] == "checkpoint_skipped"]
    CountWords.hang_at = None
    with capture_logs() as logs:
        _runner(tmp_path, first.namespace).run(timeout=20)
    (restored,) = [e for e in logs if e["event"] == "store_restored"]
    assert restored["kept_local"] is False and restored["snapshot"] is not None
    assert stored(tmp_path, tasks=1) == Counter(w for line in LINES[0] for w in line.split())


def test_with_snapshots_off_the_store_written_past_its_commit_is_kept_with_a_warning(
    tmp_path: Path,
) -> None:
    """No snapshot to go back to: the store is kept as the stop left it, as after a crash,
    and the restart says so (marked clean, it was kept in silence)."""
    off = {"task.transactional.state.checkpoint.enabled": False}
    CountWords.seen, CountWords.hang_at = 0, 80
    first = CountWords.runner = _runner(tmp_path, **off)
    first.run(timeout=20)
    CountWords.hang_at = None
    with capture_logs() as logs:
        _runner(tmp_path, first.namespace, **off).run(timeout=20)
    (warned,) = [e for e in logs if e["event"] == "store_kept_past_checkpoint"]
    assert warned["log_level"] == "warning"
