"""The real Kafka brokers that integration and contract tests talk to.

``kafka_bootstrap`` is the session's broker: it reuses the broker named by
``SAMZAPY_KAFKA_BOOTSTRAP`` when that is set; otherwise it starts one with
``scripts/kafka.sh up`` in a temporary data directory, on ``KAFKA_PORT`` or on a free port, and
stops it with ``scripts/kafka.sh down`` when the session ends. ``own_kafka_broker`` is a broker
of the test module's own, on free ports, that its tests may stop and start again (outages).
A broker starts only when a test asks for it, so a run of unit tests needs no Java; one that
cannot start is a test error carrying the script's output and the broker log's tail: tests are
never skipped for want of a broker.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "kafka.sh"
# tests/docker/ runs containers of the image that `make docker-test` builds on the Docker engine
# it starts (scripts/docker.sh sets SAMZAPY_DOCKER_IMAGE); `make test` alone has neither.
collect_ignore = [] if os.environ.get("SAMZAPY_DOCKER_IMAGE") else ["docker"]
# A cold start fetches the jars (about 10 s) and waits at most 60 s for the broker.
SCRIPT_TIMEOUT_S = 150


def _free_ports(count: int) -> list[int]:
    """Ports the kernel reports free, held open together so that they are distinct."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@pytest.fixture
def free_ports() -> Callable[[int], list[int]]:
    """``free_ports(n)``: n distinct ports of 127.0.0.1 that are free now."""
    return _free_ports


class ScriptBroker:
    """One broker run by ``scripts/kafka.sh`` from its own data directory."""

    def __init__(self, data_dir: Path, port: int, controller_port: int) -> None:
        self.data_dir = data_dir
        self.port = port
        self.env = {
            **os.environ,
            "KAFKA_PORT": str(port),
            "KAFKA_CONTROLLER_PORT": str(controller_port),
            "SAMZAPY_KAFKA_DIR": str(data_dir),
            # Stops the broker even if this session is killed before its teardown runs.
            "KAFKA_OWNER_PID": str(os.getpid()),
        }

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ours(self) -> bool:
        """False when ``up`` found another broker answering on the port: not ours to stop."""
        return (self.data_dir / "broker.pid").exists()

    def up(self) -> None:
        self._run("up", "start")

    def down(self) -> None:
        self._run("down", "stop")

    def _run(self, command: str, verb: str) -> None:
        done = subprocess.run(
            [str(SCRIPT), command],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            pytest.fail(
                f"could not {verb} the Kafka broker on {self.bootstrap} with {SCRIPT} {command} "
                f"(exit {done.returncode}):\n{done.stdout}{done.stderr}",
                pytrace=False,
            )


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a Kafka broker that answers for the whole session."""
    given = os.environ.get("SAMZAPY_KAFKA_BOOTSTRAP")
    if given:
        yield given
        return

    if "KAFKA_PORT" in os.environ:
        port = int(os.environ["KAFKA_PORT"])
        controller_port = int(os.environ.get("KAFKA_CONTROLLER_PORT", port + 1))
    else:
        port, controller_port = _free_ports(2)
    broker = ScriptBroker(tmp_path_factory.mktemp("kafka"), port, controller_port)
    broker.up()
    ours = broker.ours
    try:
        yield broker.bootstrap
    finally:
        if ours:
            broker.down()


@pytest.fixture(scope="module")
def own_kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScriptBroker]:
    """A broker for one test module alone, on free ports; stopped after the module."""
    port, controller_port = _free_ports(2)
    broker = ScriptBroker(tmp_path_factory.mktemp("own-kafka"), port, controller_port)
    broker.up()
    try:
        yield broker
    finally:
        broker.down()
