"""Every command and code block of README.md and docs/*.md runs, as written, in document order.

Each document is walked top to bottom the way a newcomer follows it, in a sandbox: a copy of
the repository (its tracked and new files) whose ``.venv`` is the virtualenv running these
tests. A fenced block is one of:

- preceded by ``<!-- file: NAME -->``: the text says to save it as NAME. It is written into the
  sandbox, where the blocks after it use it; when NAME is a file of the repository, the block
  must equal it instead;
- preceded by ``<!-- not run: REASON -->``: it cannot run here (a Docker engine, a synopsis)
  and says why;
- a shell block: each command runs with ``bash`` in the sandbox's root and must exit 0. The
  commands that run until stopped (a Kafka job) get SIGINT, as Ctrl-C would, once they have
  shown they work, and must then exit 0;
- a ``yaml`` fragment of a job file: ``samzapy validate`` must accept it, completed with the
  keys a job needs that it leaves out (``job.name``, ``task.class``, ``task.inputs``, a
  ``kafka`` system);
- a ``python`` block: run with the virtualenv's ``python`` and must exit 0.

The environment is the user's: ``.venv/bin`` first on ``PATH`` (as after ``source
.venv/bin/activate``), and ``KAFKA_BOOTSTRAP`` set to a free port, so ``make kafka-up`` and
every job of the walk use a broker of this test's own.
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from samzapy.config import load_config

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
SHELL = ("", "sh", "shell", "bash", "console")
COMMAND_TIMEOUT_S = 300

pytestmark = pytest.mark.timeout(900)

# -- reading the blocks -----------------------------------------------------------------------

_FENCE = re.compile(r"^```(?P<language>[^\n`]*)\n(?P<text>.*?)^```[ \t]*$", re.M | re.S)
_MARKER = re.compile(r"<!--\s*(?P<kind>file|not run):\s*(?P<value>.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    document: str
    line: int
    language: str
    text: str
    file: str | None
    not_run: str | None

    def __str__(self) -> str:
        return f"{self.document}:{self.line}"


def blocks(document: str) -> list[Block]:
    """The fenced blocks of ``document`` with the marker on the line before each, if any."""
    text = (ROOT / document).read_text()
    found: list[Block] = []
    for fence in _FENCE.finditer(text):
        before = text[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        marker = _MARKER.fullmatch(before)
        kind, value = (marker["kind"], marker["value"]) if marker else (None, None)
        found.append(
            Block(
                document=document,
                line=text.count("\n", 0, fence.start()) + 1,
                language=fence["language"].strip(),
                text=fence["text"],
                file=value if kind == "file" else None,
                not_run=value if kind == "not run" else None,
            )
        )
    return found


ALL_BLOCKS = [block for document in DOCUMENTS for block in blocks(document)]


def test_the_documents_have_blocks() -> None:
    assert {b.document for b in ALL_BLOCKS} >= {"README.md", "docs/configuration.md"}


def test_the_readme_opens_with_the_run_and_test_commands_ci_uses() -> None:
    """The first two blocks hold one command each: the main job (no broker needed), then the
    tests, which is what .ci/run runs on a clean clone."""
    first, second = blocks("README.md")[:2]
    assert first.text.strip() == "make run"
    assert second.text.strip() == "make test"
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert second.text.strip() in ci


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_fence_opens_or_closes_a_block(document: str) -> None:
    """A fence the reading above misses (indented, as in a list item, or written with
    tildes) would be a block that Markdown shows and nothing runs."""
    fences = re.findall(r"^ {0,3}(?:```|~~~)", (ROOT / document).read_text(), re.M)
    assert len(fences) == 2 * len(blocks(document)), f"{document}: a fence is not at a line's start"


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=str)
def test_every_block_is_run_or_says_why_not(block: Block) -> None:
    if block.not_run is not None:
        assert len(block.not_run) > 10, f"{block}: say why the block cannot run here"
    elif block.file is not None:
        assert block.language in ("python", "yaml"), f"{block}: a file is python or yaml"
    else:
        assert block.language in (*SHELL, "yaml", "python"), (
            f"{block}: a ```{block.language} block cannot run; mark it "
            "<!-- not run: REASON --> or make it shell, yaml or python"
        )


# -- the sandbox ------------------------------------------------------------------------------


def _repository_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


@dataclass
class Sandbox:
    root: Path
    env: dict[str, str]
    bootstrap: str
    kafka_started: bool = False
    #: How many times the README's page-view counter has run (check_kafka_counts).
    count_runs: int = 0

    def bash(
        self, command: str, timeout: float = COMMAND_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", command],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


#: What the Makefile rebuilds the virtualenv from (its BUILD_INPUTS).
BUILD_INPUTS = ("pyproject.toml", "setup.py", "samzapy/_speedups.c")


def test_the_sandbox_checks_the_makefiles_build_inputs() -> None:
    makefile = (ROOT / "Makefile").read_text()
    line = next(x for x in makefile.splitlines() if x.startswith("BUILD_INPUTS = "))
    assert tuple(line.split("=", 1)[1].split()) == BUILD_INPUTS


@pytest.fixture
def sandbox(tmp_path: Path, free_ports: Callable[[int], list[int]]) -> Iterator[Sandbox]:
    venv = Path(sys.prefix)
    stamps = [venv / ".installed", venv / ".runtime"]
    # The walk's `make` would otherwise install samzapy into this virtualenv again, from the
    # sandbox's copy: the virtualenv would then import samzapy from a deleted directory.
    newest = max((ROOT / name).stat().st_mtime for name in BUILD_INPUTS)
    if not all(s.exists() and s.stat().st_mtime >= newest for s in stamps):
        pytest.fail(
            f"{venv} was not made by `make venv`, or is older than {', '.join(BUILD_INPUTS)}: "
            "run `make venv` first",
            pytrace=False,
        )
    root = tmp_path / "samzapy"
    for name in _repository_files():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, root / name)  # the mtimes too: make sees the venv as fresh
    (root / ".venv").symlink_to(venv)
    port, controller = free_ports(2)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        KAFKA_BOOTSTRAP=f"127.0.0.1:{port}",
        KAFKA_CONTROLLER_PORT=str(controller),
        # Stops the broker even if this session is killed before the walk's end.
        KAFKA_OWNER_PID=str(os.getpid()),
    )
    env.pop("KAFKA_PORT", None)
    box = Sandbox(root, env, env["KAFKA_BOOTSTRAP"])
    try:
        yield box
    finally:
        if box.kafka_started:
            box.bash("scripts/kafka.sh down", timeout=120)


# -- running the blocks -----------------------------------------------------------------------


def commands(text: str) -> Iterator[str]:
    """The commands of a shell block: one per line (a trailing backslash continues it)."""
    pending = ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        command = (pending + line).strip()
        pending = ""
        if command and not command.startswith("#"):
            yield command


def without_comment(command: str) -> str:
    return re.sub(r"\s+#.*$", "", command).strip()


def events(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def run_until(sandbox: Sandbox, command: str, ready: Callable[[list[dict[str, Any]]], bool]) -> str:
    """Run a command that runs until stopped; SIGINT it (Ctrl-C) once ``ready(events)``."""
    log = sandbox.root / f".doc-command-{time.monotonic_ns()}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=sandbox.root,
            env=sandbox.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while not ready(events(log.read_text())):
            assert proc.poll() is None, f"{command!r} exited {proc.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"{command!r} never got ready:\n{log.read_text()}"
            time.sleep(0.25)
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert code == 0, f"{command!r} stopped by SIGINT exited {code}:\n{log.read_text()}"
    return log.read_text()


def validate_fragment(sandbox: Sandbox, block: Block) -> None:
    fragment = sandbox.root / f".doc-fragment-{block.line}.yaml"
    fragment.write_text(block.text)
    given = load_config(text=block.text, env=sandbox.env)  # flat, as samzapy reads it
    completion = {
        "job.name": "docs",
        "task.class": "examples.pageviews.tasks:SafePageViewCounter",
        "task.inputs": "[kafka.page-views]",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": sandbox.bootstrap,
    }
    overrides: list[str] = []
    for key, value in completion.items():
        if key not in given and not (key.startswith("systems.kafka.") and _defines_kafka(given)):
            overrides += ["--set", f"{key}={value}"]
    proc = subprocess.run(
        ["samzapy", "validate", str(fragment), *overrides],
        cwd=sandbox.root,
        env=sandbox.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, f"{block}: samzapy validate refused it:\n{proc.stderr}"


def _defines_kafka(flat: Mapping[str, Any]) -> bool:
    return "systems.kafka.samza.factory" in flat


def _counted_and_windowed(logged: list[dict[str, Any]]) -> bool:
    """Every page view of the run counted (6,000 new ones in each), and a window (every
    10 s) run since, which wrote the counts out."""
    done = [e for e in logged if e["event"] == "progress" and e["processed"] == 6000]
    if not done:
        return False
    counted_at = datetime.fromisoformat(done[0]["timestamp"])
    return any(datetime.fromisoformat(e["timestamp"]) > counted_at + WINDOW for e in logged)


#: Longer than the counting job's task.window.ms.
WINDOW = timedelta(seconds=11)

#: Commands that run until stopped, and when they have shown they work.
UNTIL_STOPPED: dict[str, Callable[[list[dict[str, Any]]], bool]] = {
    "samzapy run configs/kafka-pageviews.yaml": _counted_and_windowed,
}


class Walk:
    """Runs a document's blocks in order; ``checks`` add what a command must have done."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.ran: list[str] = []
        self.checks: dict[str, Callable[[Sandbox, str], None]] = {}

    def run(self, document: str) -> None:
        for block in blocks(document):
            if block.not_run is not None:
                continue
            if block.file is not None:
                self.save(block)
            elif block.language == "yaml":
                validate_fragment(self.sandbox, block)
            elif block.language == "python":
                self.python(block)
            else:
                for command in commands(block.text):
                    self.shell(block, command)

    def save(self, block: Block) -> None:
        name = block.file
        assert name is not None
        if (ROOT / name).exists():
            assert block.text == (ROOT / name).read_text(), f"{block} differs from {name}"
        else:
            (self.sandbox.root / name).write_text(block.text)

    def python(self, block: Block) -> None:
        script = self.sandbox.root / f".doc-block-{block.line}.py"
        script.write_text(block.text)
        proc = self.sandbox.bash(f"python {script.name}")
        assert proc.returncode == 0, f"{block} failed:\n{proc.stdout}{proc.stderr}"
        self.ran.append(f"python:{block.line}")

    def shell(self, block: Block, command: str) -> None:
        bare = without_comment(command)
        if bare == "make kafka-up":
            self.sandbox.kafka_started = True
        if bare in UNTIL_STOPPED:
            output = run_until(self.sandbox, bare, UNTIL_STOPPED[bare])
        else:
            proc = self.sandbox.bash(command)
            output = proc.stdout + proc.stderr
            assert proc.returncode == 0, f"{block}: {command!r} exited {proc.returncode}:\n{output}"
        self.ran.append(bare)
        check = self.checks.get(bare)
        if check is not None:
            check(self.sandbox, output)


# -- what the README's steps must have done ---------------------------------------------------


def bundled_counts() -> tuple[Counter[str], int]:
    counts: Counter[str] = Counter()
    malformed = 0
    for path in sorted((ROOT / "examples/pageviews/data/page-views").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            view = json.loads(line)
            if "member_id" in view:
                counts[view["member_id"]] += 1
            else:
                malformed += 1
    return counts, malformed


def read_jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_make_run(sandbox: Sandbox, output: str) -> None:
    counts, malformed = bundled_counts()
    out = sandbox.root / "output" / "quickstart"
    got = {
        row["member_id"]: row["views"]
        for path in (out / "page-view-counts").glob("*.jsonl")
        for row in read_jsonl(path)
    }
    assert got == dict(counts)
    assert len(read_jsonl(out / "dead-letters" / "0.jsonl")) == malformed


def check_readme_job(sandbox: Sandbox, output: str) -> None:
    counts, _ = bundled_counts()
    rows = read_jsonl(sandbox.root / "output/pageviews/page-view-counts/0.jsonl")
    assert {row["member_id"]: row["views"] for row in rows} == dict(counts)
    assert events(output)[-1]["event"] == "container_exited"


def check_loader(sandbox: Sandbox, output: str) -> None:
    (finished,) = [e for e in events(output) if e["event"] == "job_finished"]
    assert finished["processed"] == 6000


def check_kafka_counts(sandbox: Sandbox, output: str) -> None:
    """The counts in page-view-counts are the bundled data's times the number of times the
    README loaded them (once, then again after the first run): one latest record per member.
    The second run's are twice the first's only if the restart kept the counts."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    sandbox.count_runs += 1

    async def latest() -> dict[str, int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=sandbox.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            partitions = [TopicPartition("page-view-counts", p) for p in range(3)]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            ends = await consumer.end_offsets(partitions)
            found: dict[str, int] = {}
            while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    for record in records:
                        row = json.loads(record.value)
                        found[row["member_id"]] = row["views"]
            return found
        finally:
            await consumer.stop()

    counts, _ = bundled_counts()
    loads = sandbox.count_runs
    assert asyncio.run(latest()) == {member: n * loads for member, n in counts.items()}


def check_window_counts(sandbox: Sandbox, output: str) -> None:
    """views-per-minute holds one DEFAULT pane per member and minute of page-views.csv, with
    that member's views in that minute: Spark's watermarks and end-of-stream closed them all,
    and the event times came from the Spark records' frames."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def panes() -> list[dict[str, Any]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=sandbox.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            await consumer._client.force_metadata_update()
            ids = sorted(consumer.partitions_for_topic("views-per-minute") or ())
            partitions = [TopicPartition("views-per-minute", p) for p in ids]
            consumer.assign(partitions)
            for tp, offset in (await consumer.beginning_offsets(partitions)).items():
                consumer.seek(tp, offset)
            ends = await consumer.end_offsets(partitions)
            found: list[dict[str, Any]] = []
            while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    found.extend(json.loads(record.value) for record in records)
            return found
        finally:
            await consumer.stop()

    with open(sandbox.root / "page-views.csv") as f:
        rows = list(csv.DictReader(f))
    expected = Counter((r["member_id"], int(r["ts"]) - int(r["ts"]) % 60_000) for r in rows)
    got = asyncio.run(panes())
    assert Counter((p["member_id"], p["minute"]) for p in got) == Counter(set(expected))
    assert {(p["member_id"], p["minute"]): p["views"] for p in got} == dict(expected)
    assert {p["firing"] for p in got} == {"DEFAULT"}
    assert events(output)[-1]["event"] == "container_exited"


README_CHECKS: dict[str, Callable[[Sandbox, str], None]] = {
    "make run": check_make_run,
    "samzapy run job.yaml": check_readme_job,
    "samzapy run configs/kafka-load-pageviews.yaml": check_loader,
    "samzapy run configs/kafka-pageviews.yaml": check_kafka_counts,
    "samzapy run views-per-minute.yaml": check_window_counts,
}


def test_readme_from_top_to_bottom(sandbox: Sandbox) -> None:
    walk = Walk(sandbox)
    walk.checks.update(README_CHECKS)
    walk.run("README.md")
    assert set(README_CHECKS) <= set(walk.ran), "a checked command is no longer in the README"
    # The README says `make kafka-down` stops the broker when you are done.
    proc = sandbox.bash("make kafka-down")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sandbox.kafka_started = False


# -- what deploy.md's steps must have done -----------------------------------------------------


def check_quickstart_read_everything(sandbox: Sandbox, output: str) -> None:
    """deploy.md runs the quick start twice: it counts the 6000 page views, then, after
    `checkpoint set --to oldest`, reads them all again."""
    (finished,) = [e for e in events(output) if e["event"] == "job_finished"]
    assert finished["processed"] == 6000


def check_task_0_moved(sandbox: Sandbox, output: str) -> None:
    """The edited line moves task 0 only, to resume at offset 1000, as its comment says."""
    moved = [line.split() for line in output.splitlines() if "->" in line]
    assert moved == [["Partition", "0", "input.page-views#0", *moved[0][3:]]], output
    assert moved[0][-5:] == ["999", "(resumes", "at", "offset", "1000)"], output


DOCUMENT_CHECKS: dict[str, dict[str, Callable[[Sandbox, str], None]]] = {
    "docs/deploy.md": {
        "samzapy run configs/quickstart.yaml": check_quickstart_read_everything,
        "samzapy checkpoint set configs/quickstart.yaml --to moved.jsonl": check_task_0_moved,
    },
}


@pytest.mark.parametrize("document", [d for d in DOCUMENTS if d != "README.md"])
def test_document_as_written(sandbox: Sandbox, document: str) -> None:
    walk = Walk(sandbox)
    checks = DOCUMENT_CHECKS.get(document, {})
    walk.checks.update(checks)
    walk.run(document)
    assert set(checks) <= set(walk.ran), "a checked command is no longer in the document"
