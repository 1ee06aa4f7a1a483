"""TestRunner's persistent stores: kept for a restart within the process, removed at exit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import os, sys
    from samzapy import InitableTask, StreamTask
    from samzapy.testing import TestRunner

    class Count(StreamTask, InitableTask):
        def init(self, context):
            self.store = context.get_store("counts")

        def process(self, envelope, collector, coordinator):
            self.store.put(envelope.message, (self.store.get(envelope.message) or 0) + 1)

    config = {
        "stores.counts.factory": "rocksdb",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "json",
    }
    runner = TestRunner(Count, config, namespace="restart")
    runner.add_input("words", ["a", "b"]).run(timeout=10)
    path = runner._store_dir()
    print(path)
    assert os.listdir(path), "the store is on disk while the process runs"
    again = TestRunner(Count, config, namespace="restart")
    assert again._store_dir() == path  # a restart in the process finds it
    """
)


def test_a_runners_store_directory_is_removed_when_the_process_exits(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    path = Path(done.stdout.strip().splitlines()[-1])
    assert path.is_relative_to(tmp_path)
    assert not path.exists()
