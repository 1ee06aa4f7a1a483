"""A `file` job killed with -9 and restarted (docs/configuration.md, "The `file` system"):
"after a crash the job redoes the uncommitted part, so a file may hold lines of it twice
(at-least-once)", and a line its writer left cut "gets its newline when the producer opens
the file": no line is lost, and none is joined to another."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from test_run import HERE, ROOT, events, job_yaml, samzapy, write_partitions

MESSAGES = 50_000
PAD = "x" * 200  # 64 KiB write-outs, so the kill lands between and within them


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1] if path.exists() else []


def test_kill_9_mid_write_then_restart_loses_no_line_and_joins_none(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_partitions(data, "in", {0: [{"n": i, "pad": PAD} for i in range(MESSAGES)]})
    out = data / "out" / "0.jsonl"
    follow = job_yaml(tmp_path, "Copy", **{"systems.files.follow": True, "task.commit.ms": 100})
    proc = subprocess.Popen(
        [sys.executable, "-m", "samzapy", "run", str(follow)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(HERE)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        checkpoints = tmp_path / "checkpoints"
        # Killed once a checkpoint is written and a few write-outs are past it.
        while not any(checkpoints.glob("*.json")) or _size(out) < 256 * 1024:
            assert proc.poll() is None, "the job stopped by itself"
            assert time.monotonic() < deadline, "the job wrote too little"
            time.sleep(0.01)
        time.sleep(random.uniform(0, 0.05))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    written = out.read_bytes()
    assert 0 < written.count(b"\n") < MESSAGES, "the kill did not land in the run"
    # A kill seldom lands inside a write(2); cut the last line as one that did would.
    cut = written.rstrip(b"\n").rsplit(b"\n", 1)[-1][:37]
    with out.open("ab") as file:
        file.write(cut)

    batch = job_yaml(tmp_path, "Copy")  # follow: false, so the restart ends at the input's end
    done = samzapy("run", str(batch))
    assert done.returncode == 0, done.stdout + done.stderr

    lines = _lines(out)
    cut_at = lines.index(cut)  # the cut line is a line of its own ...
    undecodable = []
    seen: Counter[int] = Counter()
    for i, line in enumerate(lines):
        try:
            seen[json.loads(line)["n"]] += 1
        except ValueError:
            undecodable.append(i)
    assert undecodable == [cut_at]  # ... and the only bad one: no line was joined to it
    assert set(seen) == set(range(MESSAGES))  # every message's line, whole
    first = json.loads(lines[cut_at + 1])["n"]
    assert 0 < first <= json.loads(lines[cut_at - 1])["n"] + 1  # at the checkpoint, not 0
    redone = sum(seen.values()) - MESSAGES
    assert redone == cut_at - first  # what was written twice is what followed the checkpoint
    [ended] = [e for e in events(done.stdout) if e["event"] == "partial_line_ended"]
    assert (ended["stream"], ended["partition"], ended["partial_bytes"]) == ("out", 0, len(cut))
