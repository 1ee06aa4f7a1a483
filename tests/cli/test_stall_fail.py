"""The stall watchdog's ``task.stall.fail`` through the real ``samzapy run``
(docs/configuration.md): "`true`: a stalled task fails the container (exit 1), so the
orchestrator restarts it." With the default, ``false``, the stall is reported
(``task_stalled``) and the process runs on.

The task asks for a commit after message 4 and its call for message 5 (``HUNG``) never
completes; ``task.stall.timeout.ms`` is half a second, so the watchdog (checking every eighth
of a second) finds the task stalled well within ``BOUND_S`` of the call's start.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from test_run import (
    checkpointed_offsets,
    events,
    job_yaml,
    read_jsonl,
    samzapy,
    started,
    write_partitions,
)

MESSAGES, HUNG = 10, 5
#: How long after the call hangs the failing container has exited, and the other still runs.
BOUND_S = 4.0
HANG = {"SAMZAPY_TEST_HANG": "1"}


def job(tmp_path: Path, **extra: object) -> Path:
    messages: list[dict[str, object]] = [{"n": i} for i in range(MESSAGES)]
    messages[HUNG - 1]["commit"] = True
    messages[HUNG]["hang"] = True
    write_partitions(tmp_path / "data", "in", {0: messages})
    settings = {"task.stall.timeout.ms": 500, "task.commit.ms": 60000, **extra}
    return job_yaml(tmp_path, "HangOnMarked", **settings)


def test_with_stall_fail_a_stalled_task_exits_1_and_a_restart_processes_its_message(
    tmp_path: Path,
) -> None:
    path = job(tmp_path, **{"task.stall.fail": True})
    proc = started(path, tmp_path / "ready", HANG)
    hung_at = time.monotonic()
    try:
        out, err = proc.communicate(timeout=BOUND_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, out + err
    assert time.monotonic() - hung_at < BOUND_S
    logged = events(out)
    [stalled] = [e for e in logged if e["event"] == "task_stalled"]
    where = ("Partition 0", "files.in#0", str(HUNG))
    assert (stalled["task"], stalled["ssp"], stalled["offset"]) == where
    [failed] = [e for e in logged if e["event"] == "task_failed"]
    assert (failed["task"], failed["ssp"], failed["offset"]) == where
    assert failed["error"].startswith(
        f"task 'Partition 0' stalled on files.in#0 at offset {HUNG}: completed nothing for "
    )
    assert failed["error"].endswith("(task.stall.fail is true)")
    [exited] = [e for e in logged if e["event"] == "job_failed"]
    assert (exited["error"], exited["exit_code"]) == (failed["error"], 1)
    # The checkpoint stays before the hung message, which the restart (not hanging) processes.
    assert checkpointed_offsets(tmp_path) == [str(HUNG - 1)]
    assert [m["n"] for m in read_jsonl(tmp_path / "data" / "out" / "0.jsonl")] == list(range(HUNG))

    rerun = samzapy("run", str(path))
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    output = read_jsonl(tmp_path / "data" / "out" / "0.jsonl")
    assert [m["n"] for m in output] == list(range(MESSAGES))
    assert checkpointed_offsets(tmp_path) == [str(MESSAGES - 1)]


def test_without_stall_fail_a_stalled_task_is_reported_and_the_process_runs_on(
    tmp_path: Path,
) -> None:
    path = job(tmp_path, **{"task.shutdown.ms": 200})
    proc = started(path, tmp_path / "ready", HANG)
    try:
        time.sleep(BOUND_S)
        assert proc.poll() is None, "the process exited by itself"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out + err
    found = [e["event"] for e in events(out)]
    assert found.count("task_stalled") == 1, found
    assert found.index("task_stalled") < found.index("stop_requested"), found
    assert "task_failed" not in found and "job_failed" not in found, found
    assert checkpointed_offsets(tmp_path) == [str(HUNG - 1)]
