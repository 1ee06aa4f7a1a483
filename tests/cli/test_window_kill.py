"""An event-time window on the `file` system only (its store has no changelog), killed with
-9 mid-run and restarted, ends with every pane's count exact (docs/configuration.md, "Store
snapshots"; docs/api.md, "State, restarts and guarantees").

The window's write buffer is made small, so RocksDB gets the store's writes (and the stored
watermark) between two commits, as a larger input does with the default 1 MiB: the kill
leaves the store ahead of the checkpoint. The restart must open the snapshot its checkpoint
names; keeping the store as it was counted the views after the checkpoint twice and dropped
replayed ones as late. Panes fired after the checkpoint may be written twice (at-least-once
outputs), each time with the same count.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from test_run import HERE, ROOT, events, samzapy, write_partitions
from test_run_apps import app_yaml

PARTITIONS = 2
VIEWS = 60_000  # per partition
MEMBERS = 40  # member m's views are on partition m % PARTITIONS, so each pane has one task


def views(partition: int) -> list[dict]:
    members = range(partition, MEMBERS, PARTITIONS)
    return [{"member": f"m{members[i % len(members)]}", "ts": i * 100} for i in range(VIEWS)]


def checkpointed(tmp_path: Path) -> list[int]:
    """Each task's checkpointed offset of its input (nothing yet: no entry)."""
    offsets = []
    for path in (tmp_path / "checkpoints").glob("*.json"):
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being replaced
        offsets += [int(e["offset"]) for e in document["offsets"] if e["stream"] == "views"]
    return offsets


def test_a_window_without_changelog_killed_mid_run_restarts_exact(tmp_path: Path) -> None:
    inputs = {p: views(p) for p in range(PARTITIONS)}
    write_partitions(tmp_path / "data", "views", inputs)
    settings = {
        "task.commit.ms": 100,
        "stores.per-member.write.buffer.max.bytes": 2048,
        "job.logged.store.base.dir": str(tmp_path / "state"),
    }
    follow = app_yaml(tmp_path, "ViewsPerTenSeconds", **settings, **{"systems.files.follow": True})
    proc = subprocess.Popen(
        [sys.executable, "-m", "samzapy", "run", str(follow)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(HERE), str(ROOT)))},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        # Killed once both tasks have checkpointed a third of their input.
        while len(done := checkpointed(tmp_path)) < PARTITIONS or min(done) < VIEWS // 3:
            assert proc.poll() is None, "the job stopped by itself"
            assert time.monotonic() < deadline, "the job processed too little"
            time.sleep(0.01)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    at_kill = checkpointed(tmp_path)
    assert max(at_kill) < VIEWS - 1, "the kill did not land in the run"

    batch = app_yaml(tmp_path, "ViewsPerTenSeconds", **settings)  # ends at the input's end
    done_run = samzapy("run", str(batch))
    assert done_run.returncode == 0, done_run.stdout + done_run.stderr

    expected = Counter(
        (view["member"], view["ts"] - view["ts"] % 10_000) for vs in inputs.values() for view in vs
    )
    panes, cut = [], 0
    for line in (tmp_path / "data" / "panes" / "0.jsonl").read_text().splitlines():
        try:
            panes.append(json.loads(line))
        except ValueError:
            cut += 1  # the line the kill cut short, ended by the restart
    assert cut <= 1
    wrong = [p for p in panes if p["views"] != expected[(p["member"], p["start"])]]
    assert wrong == []  # every pane written, each copy, with its exact count
    assert {(p["member"], p["start"]) for p in panes} == set(expected)  # none dropped as late
    # The restart opened the snapshot each checkpoint names.
    restored = [e for e in events(done_run.stdout) if e["event"] == "store_restored"]
    assert len(restored) == PARTITIONS
    assert all(e["snapshot"] is not None and e["kept_local"] is False for e in restored)


def test_reset_stores_empties_a_window_without_changelog_for_a_rerun_from_the_start(
    tmp_path: Path,
) -> None:
    """``samzapy checkpoint set --to oldest --reset-stores`` on a finished job: the rerun
    starts the window's store empty, so every pane comes again with its exact count (kept,
    the store's watermark at the end of time found every view late: no pane at all)."""
    inputs = {p: views(p)[:3_000] for p in range(PARTITIONS)}
    write_partitions(tmp_path / "data", "views", inputs)
    settings = {"job.logged.store.base.dir": str(tmp_path / "state")}
    batch = app_yaml(tmp_path, "ViewsPerTenSeconds", **settings)
    expected = Counter(
        (view["member"], view["ts"] - view["ts"] % 10_000) for vs in inputs.values() for view in vs
    )
    panes_file = tmp_path / "data" / "panes" / "0.jsonl"

    first = samzapy("run", str(batch))
    assert first.returncode == 0, first.stdout + first.stderr
    first_panes = panes_file.read_text().splitlines()
    reset = samzapy("checkpoint", "set", str(batch), "--to", "oldest", "--reset-stores")
    assert reset.returncode == 0, reset.stdout + reset.stderr
    assert "stores per-member: changelog offsets and snapshots dropped" in reset.stdout
    again = samzapy("run", str(batch))
    assert again.returncode == 0, again.stdout + again.stderr

    rerun = [json.loads(line) for line in panes_file.read_text().splitlines()[len(first_panes) :]]
    assert Counter({(p["member"], p["start"]): p["views"] for p in rerun}) == expected
    assert len(rerun) == len(expected)
    restored = [e for e in events(again.stdout) if e["event"] == "store_restored"]
    assert len(restored) == PARTITIONS and not any(e["kept_local"] for e in restored)


def test_a_rerun_reads_nothing_more_of_an_ended_partition_whose_watermark_it_tracks(
    tmp_path: Path,
) -> None:
    """docs/configuration.md, the `file` system: a partition with watermarks ended with its
    watermark at the end of time, checkpointed; lines appended after the run are not read
    (each would be late), and the rerun says why (test_run_apps reads a plain input's)."""
    inputs = {p: views(p)[:500] for p in range(PARTITIONS)}
    write_partitions(tmp_path / "data", "views", inputs)
    batch = app_yaml(tmp_path, "ViewsPerTenSeconds")
    first = samzapy("run", str(batch))
    assert first.returncode == 0, first.stdout + first.stderr
    panes = (tmp_path / "data" / "panes" / "0.jsonl").read_text()
    with (tmp_path / "data" / "views" / "0.jsonl").open("a") as more:
        more.writelines(json.dumps({"member": "m0", "ts": 10**9 + i}) + "\n" for i in range(5))
    again = samzapy("run", str(batch))
    assert again.returncode == 0, again.stdout + again.stderr
    ended = [e for e in events(again.stdout) if e["event"] == "task_ended"]
    assert len(ended) == PARTITIONS
    assert all(e["processed"] == 0 and e["ended_before_restart"] for e in ended)
    assert (tmp_path / "data" / "panes" / "0.jsonl").read_text() == panes


def test_a_rerun_through_a_partition_by_says_which_partitions_it_reads_no_more(
    tmp_path: Path,
) -> None:
    """The same with a partition_by before the window: its memory stream starts empty in the
    rerun, so the tasks are not all ended and run, reading nothing of the lines appended;
    each says which of its partitions ended before (else only `processed: 0` showed it)."""
    inputs = {p: views(p)[:200] for p in range(PARTITIONS)}
    write_partitions(tmp_path / "data", "views", inputs)
    batch = app_yaml(tmp_path, "ViewsPerTenSecondsByMember")
    first = samzapy("run", str(batch))
    assert first.returncode == 0, first.stdout + first.stderr
    with (tmp_path / "data" / "views" / "0.jsonl").open("a") as more:
        more.writelines(json.dumps({"member": "m0", "ts": 10**9 + i}) + "\n" for i in range(5))
    again = samzapy("run", str(batch))
    assert again.returncode == 0, again.stdout + again.stderr
    told = {
        e["task"]: e["ssps"]
        for e in events(again.stdout)
        if e["event"] == "partitions_ended_before_restart"
    }
    assert told == {f"Partition {p}": [f"files.views#{p}"] for p in range(PARTITIONS)}
    ended = [e for e in events(again.stdout) if e["event"] == "task_ended"]
    assert [e["processed"] for e in ended] == [0] * PARTITIONS
