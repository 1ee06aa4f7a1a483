"""`samzapy run`: the quick-start, exit codes, signals and restarts, through the real command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from samzapy.api.envelope import KV_ACCELERATED

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def samzapy(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: float = 120):
    # ROOT too: from another directory, `-m samzapy` would find the installed checkout's.
    return subprocess.run(
        [sys.executable, "-m", "samzapy", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(HERE), str(ROOT))), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def write_partitions(root: Path, stream: str, partitions: dict[int, list[dict]]) -> None:
    d = root / stream
    d.mkdir(parents=True, exist_ok=True)
    for p, msgs in partitions.items():
        (d / f"{p}.jsonl").write_text("".join(json.dumps(m) + "\n" for m in msgs))


def job_yaml(tmp_path: Path, task: str, **extra: object) -> Path:
    cfg = {
        "job.name": "clitest",
        "task.class": f"jobs:{task}",
        "task.inputs": ["files.in"],
        "task.checkpoint.factory": "file",
        "task.checkpoint.dir": str(tmp_path / "checkpoints"),
        "systems.files.samza.factory": "file",
        "systems.files.path": str(tmp_path / "data"),
        **extra,
    }
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_quickstart_runs_and_counts_exactly(tmp_path: Path) -> None:
    env = {
        "SAMZAPY_STATE_DIR": str(tmp_path / "state"),
        "SAMZAPY_OUTPUT_DIR": str(tmp_path / "out"),
    }
    proc = samzapy("run", "configs/quickstart.yaml", env=env)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    expected: Counter[str] = Counter()
    bad = 0
    for f in sorted((ROOT / "examples/pageviews/data/page-views").glob("*.jsonl")):
        for view in read_jsonl(f):
            if "member_id" in view:
                expected[view["member_id"]] += 1
            else:
                bad += 1
    got: dict[str, int] = {}
    out = tmp_path / "out" / "quickstart"
    for f in sorted((out / "page-view-counts").glob("*.jsonl")):
        for row in read_jsonl(f):
            got[row["member_id"]] = row["views"]
    assert got == dict(expected)
    assert len(read_jsonl(out / "dead-letters" / "0.jsonl")) == bad == 2
    finished = [e for e in events(proc.stdout) if e["event"] == "job_finished"]
    assert finished and finished[0]["processed"] == sum(expected.values()) + bad
    started = next(e for e in events(proc.stdout) if e["event"] == "container_started")
    assert started["job"] == "quickstart" and started["tasks"] == 3
    assert started["kv_speedups"] is KV_ACCELERATED  # this interpreter builds KV the same way


def test_finished_job_restarted_processes_nothing_twice(tmp_path: Path) -> None:
    write_partitions(
        tmp_path / "data",
        "in",
        {0: [{"n": i} for i in range(50)], 1: [{"n": i} for i in range(30)]},
    )
    job = job_yaml(tmp_path, "Copy", **{"streams.out.partitions": 2})
    assert samzapy("run", str(job)).returncode == 0
    first = {p: read_jsonl(tmp_path / "data" / "out" / f"{p}.jsonl") for p in (0, 1)}
    assert [len(first[0]), len(first[1])] == [50, 30]
    # More input arrives; the restart resumes after the checkpoint.
    with open(tmp_path / "data" / "in" / "0.jsonl", "a") as f:
        f.write(json.dumps({"n": 50}) + "\n")
    assert samzapy("run", str(job)).returncode == 0
    second = {p: read_jsonl(tmp_path / "data" / "out" / f"{p}.jsonl") for p in (0, 1)}
    assert second[0] == first[0] + [{"n": 50}]
    assert second[1] == first[1]


def test_without_checkpoints_a_restart_warns_and_reads_every_input_again(tmp_path: Path) -> None:
    """``task.checkpoint.factory`` unset: a ``checkpoints_disabled`` warning, and a restart
    starts each input at its offset default (oldest: every message again)."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(20)]})
    job = job_yaml(tmp_path, "Copy", **{"task.checkpoint.factory": "", "task.checkpoint.dir": None})
    for run in (1, 2):
        proc = samzapy("run", str(job))
        assert proc.returncode == 0, proc.stderr + proc.stdout
        [warned] = [e for e in events(proc.stdout) if e["event"] == "checkpoints_disabled"]
        assert warned["level"] == "warning"
        out = read_jsonl(tmp_path / "data" / "out" / "0.jsonl")
        assert out == [{"n": i} for i in range(20)] * run
    assert not (tmp_path / "checkpoints").exists()


def test_failing_task_exits_1_logs_once_and_commits_nothing_past_it(tmp_path: Path) -> None:
    msgs = [{"n": i} for i in range(20)]
    msgs[12]["bad"] = True
    write_partitions(tmp_path / "data", "in", {0: msgs})
    job = job_yaml(tmp_path, "FailOnBad", **{"task.commit.ms": 1})
    proc = samzapy("run", str(job))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failed = [e for e in events(proc.stdout) if e["event"] == "task_failed"]
    assert len(failed) == 1
    assert failed[0]["task"] == "Partition 0"
    assert failed[0]["ssp"] == "files.in#0" and failed[0]["offset"] == "12"
    cp = tmp_path / "checkpoints"
    offsets = [o["offset"] for f in cp.glob("*.json") for o in json.loads(f.read_text())["offsets"]]
    assert all(int(o) <= 11 for o in offsets)


@pytest.mark.parametrize(("task", "hook"), [("FailInInit", "init"), ("FailOnClose", "close")])
def test_a_failure_starting_or_closing_the_tasks_is_logged_as_job_failed_only(
    tmp_path: Path, task: str, hook: str
) -> None:
    """README: task_failed is the run loop's line; a failure in init (the container starting)
    or close (its clean stop) is the job_failed line's, which names the task."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    proc = samzapy("run", str(job_yaml(tmp_path, task)))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failures = [e for e in events(proc.stdout) if e["level"] == "error"]
    assert [e["event"] for e in failures] == ["job_failed"]
    assert failures[0]["error"] == (
        f"{hook}() of task 'Partition 0' failed: RuntimeError('{hook} failed')"
    )


def test_bad_config_exits_2_and_names_the_key(tmp_path: Path) -> None:
    job = job_yaml(tmp_path, "Copy", **{"task.max.concurrency": "lots"})
    proc = samzapy("run", str(job))
    assert proc.returncode == 2
    assert "task.max.concurrency" in proc.stdout + proc.stderr
    assert "lots" in proc.stdout + proc.stderr


def test_unimportable_task_class_exits_2(tmp_path: Path) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    job = job_yaml(tmp_path, "NoSuchTask")
    proc = samzapy("run", str(job))
    assert proc.returncode == 2
    assert "task.class" in proc.stdout + proc.stderr


def test_missing_input_stream_exits_2_naming_it(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    job = job_yaml(tmp_path, "Copy")
    proc = samzapy("run", str(job))
    assert proc.returncode == 2  # a configuration problem, not a job failure
    [line] = [json.loads(x) for x in proc.stdout.splitlines() if '"input_missing"' in x]
    assert (line["system"], line["stream"]) == ("files", "in")
    assert "create it on system 'files' first" in line["hint"]


def started(
    job: Path, ready: Path, env: dict[str, str], *, hangup_ignored: bool = False
) -> subprocess.Popen[str]:
    """`samzapy run job`, once its task made the file ``ready`` (its path goes in
    SAMZAPY_TEST_READY_FILE); killed if it never does. ``hangup_ignored``: started as
    ``nohup`` starts it, with SIGHUP ignored."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "samzapy", "run", str(job)],
        preexec_fn=_ignore_hangup if hangup_ignored else None,
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": str(HERE),
            "SAMZAPY_TEST_READY_FILE": str(ready),
            **env,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the job never got ready"
            time.sleep(0.02)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        raise
    return proc


def signal_masks(pid: int) -> dict[str, int]:
    """The signal masks of process ``pid``'s /proc/<pid>/status (SigPnd, ShdPnd, SigCgt, ...),
    by field, as ints."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in lines)
    names = ("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
    return {name: int(fields[name], 16) for name in names}


def taken(proc: subprocess.Popen[str], sig: signal.Signals, timeout: float = 60) -> None:
    """Wait until ``sig``, sent to ``proc``, is no longer pending (SigPnd and ShdPnd of its
    /proc/<pid>/status): a thread of it has taken the signal, which an idle machine does at
    once and a loaded one maybe much later. A signal sent before that would be pending beside
    it, then taken in signal-number order (SIGINT before SIGTERM), or be merged into it if the
    same: the test would not send what it means to."""
    bit = 1 << (sig - 1)
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        masks = signal_masks(proc.pid)
        if not (masks["SigPnd"] | masks["ShdPnd"]) & bit:
            return
        assert time.monotonic() < deadline, f"the job never took {sig.name}"
        time.sleep(0.01)


def _ignore_hangup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def signalled(
    job: Path, ready: Path, sig: int, env: dict[str, str], after_s: float = 0
) -> tuple[int, str, str]:
    """``started``, ``after_s`` more, then ``sig``: the exit code and output."""
    proc = started(job, ready, env)
    try:
        time.sleep(after_s)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signal_stops_cleanly_commits_and_exits_0(tmp_path: Path, sig: signal.Signals) -> None:
    """SIGHUP too (a closed terminal or ssh session, `kill -HUP`), as Samza's JVM runs its
    shutdown hook on it: by default it killed the process at once, exit 129, uncommitted and
    without a log line."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(100)]})
    ready = tmp_path / "ready"
    job = job_yaml(
        tmp_path,
        "CountSignals",
        **{
            "systems.files.follow": True,
            "task.commit.ms": 600000,
            "metrics.reporters": ["log"],
        },
    )
    code, out, err = signalled(job, ready, sig, {"SAMZAPY_TEST_READY_AFTER": "100"})
    assert code == 0, out + err
    checkpoint = json.loads((tmp_path / "checkpoints").glob("*.json").__next__().read_text())
    assert checkpoint["offsets"][0]["offset"] == "99"
    assert len(read_jsonl(tmp_path / "data" / "out" / "0.jsonl")) == 100
    found = events(out)
    # docs/deploy.md: signal_received's action is graceful_stop for the first signal.
    received = [(e["signal"], e["action"]) for e in found if e["event"] == "signal_received"]
    assert received == [(sig.name, "graceful_stop")]
    assert [e["reason"] for e in found if e["event"] == "stop_requested"] == [sig.name]
    # metrics.reporters' log: a metrics_reported "once more at stop", after the job's end.
    names = [e["event"] for e in found]
    assert names[-3:] == ["job_finished", "metrics_reported", "container_exited"], names


def test_started_with_sighup_ignored_the_job_keeps_running_through_a_hangup(
    tmp_path: Path,
) -> None:
    """`nohup samzapy run job.yaml &`: the hangup nohup shields the job from does not stop
    it (a SIGHUP ignored at start stays ignored); SIGTERM still stops it cleanly."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(10)]})
    ready = tmp_path / "ready"
    job = job_yaml(tmp_path, "CountSignals", **{"systems.files.follow": True})
    proc = started(job, ready, {"SAMZAPY_TEST_READY_AFTER": "10"}, hangup_ignored=True)
    try:
        proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out + err
    received = [e["signal"] for e in events(out) if e["event"] == "signal_received"]
    assert received == ["SIGTERM"]


#: A call the stop waits for: an async task's, and a sync task's on the thread pool.
HANGING = pytest.mark.parametrize(
    ("task", "extra", "env"),
    [
        pytest.param("HangOnFirst", {}, {}, id="async"),
        pytest.param(
            "BlockFirstOnPool",
            {"job.container.thread.pool.size": 2},
            {"SAMZAPY_TEST_BLOCK_S": "30"},
            id="thread-pool",
        ),
    ],
)


def checkpointed_offsets(tmp_path: Path) -> list[str]:
    return [
        entry["offset"]
        for path in (tmp_path / "checkpoints").glob("*.json")
        for entry in json.loads(path.read_text())["offsets"]
    ]


@HANGING
def test_a_second_signal_while_the_stop_waits_exits_1_at_once(
    tmp_path: Path, task: str, extra: dict[str, object], env: dict[str, str]
) -> None:
    """README, "Running": SIGTERM waits for in-flight work up to task.shutdown.ms; "a second
    signal exits at once with 1", committing nothing past what was done."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(10)]})
    ready = tmp_path / "ready"
    job = job_yaml(tmp_path, task, **{"task.shutdown.ms": 60000, **extra})
    proc = started(job, ready, env)
    try:
        proc.send_signal(signal.SIGTERM)
        taken(proc, signal.SIGTERM)  # else the second would merge into it
        time.sleep(1.0)
        assert proc.poll() is None, "the first signal did not wait for the call in flight"
        forced_at = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, out + err
    assert time.monotonic() - forced_at < 5
    assert [e["event"] for e in events(out)][-1] == "shutdown_forced", out
    offsets = checkpointed_offsets(tmp_path)
    assert offsets == [], offsets  # the message in flight never completed


@pytest.mark.parametrize(
    ("task", "extra"),
    [
        pytest.param("BlockFirstOnPool", {"job.container.thread.pool.size": 2}, id="pool"),
        pytest.param("BlockFirstInExecutor", {}, id="default-executor"),
    ],
)
def test_a_stop_leaves_a_call_on_the_thread_pool_behind_and_exits_0_at_once(
    tmp_path: Path, task: str, extra: dict[str, object]
) -> None:
    """task.shutdown.ms (docs/configuration.md): a sync task's call on the thread pool that
    outlasts it cannot be cancelled; the task is closed and committed without it, and the
    process exits 0 without waiting for its thread (CPython joins a pool's threads at exit:
    it had logged container_exited and then waited the 30 s out, and a second signal then
    killed it, exit 143). The checkpoint leaves the call's message out, what the call sends
    is not delivered, and the rerun processes the message. The same for a blocking call an
    async task waits for on the loop's default executor (the loop's close waited for it)."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(3)]})
    ready = tmp_path / "ready"
    job = job_yaml(tmp_path, task, **{"task.shutdown.ms": 500, **extra})
    proc = started(job, ready, {"SAMZAPY_TEST_BLOCK_S": "30"})
    try:
        stopped_at = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out + err
    assert time.monotonic() - stopped_at < 5, "it waited for the call's thread"
    found = [e["event"] for e in events(out)]
    assert "shutdown_timed_out" in found and found[-1] == "container_exited", found
    # Nothing processed: the partition resumes at offset 0, the call's message.
    assert checkpointed_offsets(tmp_path) == ["-1"]
    assert read_jsonl(tmp_path / "data" / "out" / "0.jsonl") == []

    rerun = samzapy("run", str(job))  # the call does not block this time
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert read_jsonl(tmp_path / "data" / "out" / "0.jsonl") == [{"n": i} for i in range(3)]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_task_module_imports_is_one_line_and_exit_1(
    tmp_path: Path, sig: signal.Signals
) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    ready = tmp_path / "importing"
    (tmp_path / "slowtasks.py").write_text(
        "import pathlib, time\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "time.sleep(60)\n"
        "from jobs import Copy\n"
    )
    job = job_yaml(tmp_path, "Copy")
    job.write_text(job.read_text().replace("jobs:Copy", "slowtasks:Copy"))
    returncode, out, err = signalled(
        job, ready, sig, {"PYTHONPATH": os.pathsep.join([str(HERE), str(tmp_path)])}
    )
    assert returncode == 1, out + err
    assert "Traceback" not in err and "Traceback" not in out
    interrupted = [e for e in events(out) if e["event"] == "job_interrupted"]
    assert [e["stage"] for e in interrupted] == ["start-up"]
    assert not (tmp_path / "checkpoints").exists()
    assert not (tmp_path / "data" / "out").exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_container_starts_stops_it_cleanly_before_any_message(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """A signal during start-up, after the task's module is imported (here in the task's
    init): the container stops as a stop is asked, exit 0, nothing processed."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    ready = tmp_path / "initializing"
    returncode, out, err = signalled(job_yaml(tmp_path, "SlowInit"), ready, sig, {})
    assert returncode == 0, out + err
    found = events(out)
    assert [e["reason"] for e in found if e["event"] == "startup_stopped"] == [sig.name]
    assert [e["exit_code"] for e in found if e["event"] == "container_exited"] == [0]
    assert not any(e["event"] == "job_interrupted" for e in found)
    assert not (tmp_path / "data" / "out").exists()


@pytest.mark.parametrize(("configured", "expected"), [(None, "uvloop"), ("asyncio", "asyncio")])
def test_job_runs_on_uvloop_unless_configured_otherwise(
    tmp_path: Path, configured: str | None, expected: str
) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    extra = {"job.loop": configured} if configured else {}
    proc = samzapy("run", str(job_yaml(tmp_path, "LoopName", **extra)))
    assert proc.returncode == 0, proc.stdout
    assert read_jsonl(tmp_path / "data" / "out" / "0.jsonl") == [{"loop": expected}]
    chosen = [e for e in events(proc.stdout) if e["event"] == "event_loop_chosen"]
    assert chosen[0]["loop"] == expected


@pytest.mark.parametrize("reporters", [[], ["prometheus"]])
def test_a_task_class_job_starts_without_the_parts_it_does_not_use(
    tmp_path: Path, reporters: list[str]
) -> None:
    """Start-up time: a task-class job on the file system imports neither aiokafka (about
    0.1 s), nor the high-level API's operators, nor prometheus_client (about 50 ms) unless it
    serves Prometheus."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    extra = {"metrics.reporters": reporters, "metrics.prometheus.port": 0}
    proc = samzapy("run", str(job_yaml(tmp_path, "ModulesLoaded", **extra)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    loaded = read_jsonl(tmp_path / "data" / "out" / "0.jsonl")
    expected = {"aiokafka": False, "prometheus_client": bool(reporters), "samzapy.operators": False}
    assert loaded == [expected]


def test_console_script_finds_task_classes_from_the_working_directory(tmp_path: Path) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}, {"n": 2}]})
    (tmp_path / "mytasks.py").write_text((HERE / "jobs.py").read_text())
    job = job_yaml(tmp_path, "Copy")
    job.write_text(job.read_text().replace("jobs:Copy", "mytasks:Copy"))
    script = Path(sys.executable).parent / "samzapy"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [str(script), "run", str(job)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert read_jsonl(tmp_path / "data" / "out" / "0.jsonl") == [{"n": 1}, {"n": 2}]


def test_changed_partition_count_stops_the_job_naming_the_input(tmp_path: Path) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}], 1: [{"n": 2}]})
    job = job_yaml(tmp_path, "Copy", **{"streams.out.partitions": 3})
    assert samzapy("run", str(job)).returncode == 0
    write_partitions(tmp_path / "data", "in", {2: [{"n": 3}]})
    proc = samzapy("run", str(job))
    assert proc.returncode == 1
    (failed,) = [e for e in events(proc.stdout) if e["event"] == "job_failed"]
    assert "input files.in had 2 partitions" in failed["error"]
    assert "has 3 now" in failed["error"]


def test_every_problem_s_cause_is_logged_at_debug_before_the_one_config_invalid_line(
    tmp_path: Path,
) -> None:
    (tmp_path / "badtask.py").write_text("raise ValueError('the task module broke')\n")
    (tmp_path / "badserde.py").write_text("raise KeyError('the serde module broke')\n")
    job = job_yaml(
        tmp_path,
        "Copy",
        **{"task.class": "badtask:Task", "serializers.registry.broken.class": "badserde:Serde"},
    )
    proc = samzapy("run", str(job), "--log-level", "debug", cwd=tmp_path)

    assert proc.returncode == 2, proc.stdout + proc.stderr
    logged = events(proc.stdout)
    causes = [json.dumps(e) for e in logged if e["event"] == "config_error_cause"]
    assert len(causes) == 2
    assert "the task module broke" in causes[0] and "the serde module broke" in causes[1]
    assert logged[-1]["event"] == "config_invalid"
    assert [p.split(":")[0] for p in logged[-1]["problems"]] == [
        "task.class",
        "serializers.registry.broken.class",
    ]


def test_the_lag_of_a_followed_file_leaves_out_its_blank_lines(tmp_path: Path) -> None:
    """docs/deploy.md, Metrics: ``lag`` counts the messages after the last one processed. A
    file's blank lines hold an offset each but are never delivered: once the job has processed
    every message of a file it follows, its lag is 0, not the blank lines at its end."""
    (tmp_path / "data" / "in").mkdir(parents=True)
    (tmp_path / "data" / "in" / "0.jsonl").write_text('{"n": 1}\n\n{"n": 2}\n\n\n')
    job = job_yaml(
        tmp_path,
        "Copy",
        **{
            "systems.files.follow": True,
            "metrics.reporters": ["log"],
            "metrics.reporter.interval.ms": 100,
        },
    )
    log = tmp_path / "run.log"
    with log.open("w") as handle:
        proc = subprocess.Popen(
            [sys.executable, "-m", "samzapy", "run", str(job)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(HERE)},
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    try:
        reports: list[dict] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            text = log.read_text()
            lines = text.splitlines() if text.endswith("\n") else text.splitlines()[:-1]
            reports = [e["metrics"] for e in events("\n".join(lines)) if "metrics" in e]
            done = [r for r in reports if r["task.Partition 0"]["messages-processed"] == 2]
            if len(done) >= 3:  # a few reports after the last message was processed
                break
            time.sleep(0.05)
        assert len(done) >= 3, log.read_text()[-2000:]
        assert done[-1]["partition.files.in#0"]["lag"] == 0, done[-1]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0


def test_a_reporter_that_fails_at_the_stop_is_logged_and_the_others_still_report(
    tmp_path: Path,
) -> None:
    """A metrics reporter whose stop raises (its endpoint gone) is logged; the job, which
    finished, still exits 0, and the reporters after it stop too: the log reporter's last
    report, "so the final counts of a job always reach the log", is there."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(5)]})
    job = job_yaml(tmp_path, "Copy", **{"metrics.reporters": ["jobs:FailsAtStop", "log"]})
    proc = samzapy("run", str(job))
    assert proc.returncode == 0, proc.stdout[-3000:]
    logged = events(proc.stdout)
    (failed,) = [e for e in logged if e["event"] == "metrics_reporter_failed"]
    assert failed["reporter"] == "jobs:FailsAtStop"
    assert failed["exception"][0]["exc_value"] == "the metrics endpoint went away"
    reports = [e for e in logged if e["event"] == "metrics_reported"]
    assert reports[-1]["metrics"]["container"]["messages-processed"] == 5
    assert logged[-1]["event"] == "container_exited"
