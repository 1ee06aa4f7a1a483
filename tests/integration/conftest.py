"""The real Kafka broker that integration tests talk to, one per test session.

``kafka_bootstrap`` reuses the broker named by ``SAMZAPY_KAFKA_BOOTSTRAP`` when it is set;
otherwise it starts one with ``scripts/kafka.sh up`` in a temporary data directory, on
``KAFKA_PORT`` or on a free port, and stops it with ``scripts/kafka.sh down`` when the session
ends. A broker that cannot start is a test error carrying the script's output and the broker log's
tail: integration tests are never skipped for want of a broker.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "kafka.sh"
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


def _run_script(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), command],
        env=env,
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=False,
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
    data_dir = tmp_path_factory.mktemp("kafka")
    env = {
        **os.environ,
        "KAFKA_PORT": str(port),
        "KAFKA_CONTROLLER_PORT": str(controller_port),
        "SAMZAPY_KAFKA_DIR": str(data_dir),
        # Stops the broker even if this session is killed before its teardown runs.
        "KAFKA_OWNER_PID": str(os.getpid()),
    }
    started = _run_script("up", env)
    if started.returncode != 0:
        pytest.fail(
            f"could not start the Kafka broker on 127.0.0.1:{port} with {SCRIPT} up "
            f"(exit {started.returncode}):\n{started.stdout}{started.stderr}",
            pytrace=False,
        )
    # No pid file means `up` found a broker already answering on the port: not ours to stop.
    ours = (data_dir / "broker.pid").exists()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        if ours:
            stopped = _run_script("down", env)
            if stopped.returncode != 0:
                pytest.fail(
                    f"could not stop the Kafka broker with {SCRIPT} down "
                    f"(exit {stopped.returncode}):\n{stopped.stdout}{stopped.stderr}",
                    pytrace=False,
                )
