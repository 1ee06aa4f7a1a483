"""``scripts/kafka.sh`` stops only the broker it was asked about: one broker, one data dir per port.

The real script runs against real brokers on free ports. It is reached through a symlink in a
sandbox (``<tmp>/scripts/kafka.sh`` beside ``<tmp>/kafka/pom.xml``), so its default data dirs,
``<tmp>/.kafka/<port>``, are the sandbox's and never the checkout's: the layout ``make kafka-up``
uses. One broker serves the module; one test starts a second beside it (two at most on 2 cores),
and every broker started here is stopped in a ``finally``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

REPO = Path(__file__).resolve().parents[2]
# A cold start fetches the jars (about 10 s) and waits at most 60 s for the broker.
START_TIMEOUT_S = 150
# What "at once" means for a refusal: no waiting for a broker that will never answer.
FAST_S = 10.0


@dataclass(frozen=True)
class Ports:
    client: int
    controller: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.client}"

    @classmethod
    def free(cls) -> Ports:
        """Two distinct ports the kernel reports free now."""
        with socket.socket() as one, socket.socket() as two:
            one.bind(("127.0.0.1", 0))
            two.bind(("127.0.0.1", 0))
            return cls(one.getsockname()[1], two.getsockname()[1])


class Sandbox:
    """A checkout holding only what ``scripts/kafka.sh`` reads, the script itself symlinked."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for name in ("scripts/kafka.sh", "kafka/pom.xml"):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).symlink_to(REPO / name)

    def data_dir(self, ports: Ports) -> Path:
        """The default data dir of the broker on ``ports``."""
        return self.root / ".kafka" / str(ports.client)

    def run(
        self,
        command: str,
        ports: Ports,
        data_dir: Path | None = None,
        timeout: float = START_TIMEOUT_S,
    ) -> subprocess.CompletedProcess[str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("KAFKA_PORT", "SAMZAPY_KAFKA_DIR", "KAFKA_START_TIMEOUT")
        }
        env.update(
            KAFKA_BOOTSTRAP=ports.bootstrap,
            KAFKA_CONTROLLER_PORT=str(ports.controller),
            # Stops a broker started here even if this session is killed before its finally.
            KAFKA_OWNER_PID=str(os.getpid()),
        )
        if data_dir is not None:
            env["SAMZAPY_KAFKA_DIR"] = str(data_dir)
        return subprocess.run(
            [str(self.root / "scripts" / "kafka.sh"), command],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def up(self, ports: Ports) -> int:
        """Starts the broker of ``ports`` in its default data dir; its pid."""
        done = self.run("up", ports)
        assert done.returncode == 0, done.stdout + done.stderr
        return recorded_pid(self.data_dir(ports))

    def stop(self, ports: Ports, pid: int) -> None:
        """``down``; SIGKILL if the broker outlives it, so that a failing test leaks no JVM."""
        done = self.run("down", ports)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
        assert done.returncode == 0, done.stdout + done.stderr


@dataclass(frozen=True)
class Broker:
    ports: Ports
    pid: int
    data_dir: Path


def recorded_pid(data_dir: Path) -> int:
    return int((data_dir / "broker.pid").read_text().split()[0])


def alive(pid: int) -> bool:
    """True while ``pid`` runs; an exited child that init has not reaped yet counts as gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def answers(bootstrap: str) -> bool:
    """True when a Kafka broker on ``bootstrap`` serves aiokafka's metadata requests."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        await admin.start()
        await admin.list_topics()
    except Exception:
        return False
    finally:
        await admin.close()
    return True


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    return Sandbox(tmp_path_factory.mktemp("kafka-script"))


@pytest.fixture(scope="module")
def first(sandbox: Sandbox) -> Iterator[Broker]:
    """The module's broker, started as ``make kafka-up`` does: in ``.kafka/<port>``."""
    ports = Ports.free()
    pid = sandbox.up(ports)
    try:
        yield Broker(ports, pid, sandbox.data_dir(ports))
    finally:
        sandbox.stop(ports, pid)


@contextlib.contextmanager
def silent_listener(port: int) -> Iterator[None]:
    """A plain TCP listener on ``port`` that accepts connections and never answers."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen(8)
        yield


def assert_untouched(broker: Broker) -> None:
    assert alive(broker.pid), f"broker {broker.pid} of {broker.ports.bootstrap} was stopped"
    assert recorded_pid(broker.data_dir) == broker.pid


async def test_up_on_another_port_leaves_the_first_broker_running(
    sandbox: Sandbox, first: Broker
) -> None:
    second = Ports.free()
    pid = sandbox.up(second)
    try:
        assert pid != first.pid
        assert (sandbox.data_dir(second) / "broker.pid").read_text() == f"{pid} {second.client}\n"
        assert await answers(second.bootstrap)
        assert await answers(first.ports.bootstrap)
        assert_untouched(first)
    finally:
        sandbox.stop(second, pid)
    assert not alive(pid)
    assert not port_open(second.client)
    # Stopping the second broker left the first alone too.
    assert_untouched(first)
    assert await answers(first.ports.bootstrap)


@pytest.mark.parametrize("taken", ["client", "controller"])
def test_up_on_a_port_taken_by_another_process_fails_at_once(sandbox: Sandbox, taken: str) -> None:
    ports = Ports.free()
    port = ports.client if taken == "client" else ports.controller
    with silent_listener(port):
        began = time.monotonic()
        done = sandbox.run("up", ports, timeout=60)
        took = time.monotonic() - began
    assert done.returncode == 1, done.stdout + done.stderr
    assert took < FAST_S, f"took {took:.1f} s to refuse"
    assert f"127.0.0.1:{port}" in done.stderr
    assert "is taken by" in done.stderr
    assert "KAFKA_BOOTSTRAP=127.0.0.1:<port>" in done.stderr
    assert "KAFKA_PORT" not in done.stderr
    assert not sandbox.data_dir(ports).exists(), "no broker may be set up on a taken port"


async def test_up_for_another_port_on_a_broker_data_dir_fails_at_once(
    sandbox: Sandbox, first: Broker
) -> None:
    # The reported failure: one data dir for two ports; `up` waited 60 s for the first broker
    # to answer on the second port, then stopped it.
    other = Ports.free()
    began = time.monotonic()
    done = sandbox.run("up", other, data_dir=first.data_dir, timeout=60)
    took = time.monotonic() - began
    assert done.returncode == 1, done.stdout + done.stderr
    assert took < FAST_S, f"took {took:.1f} s to refuse"
    assert f"broker {first.pid} on {first.ports.bootstrap}, which is left running" in done.stderr
    assert not port_open(other.client)
    assert_untouched(first)
    assert await answers(first.ports.bootstrap)


@pytest.mark.parametrize("pid_file", ["{pid} {port}\n", "{pid}\n"], ids=["pid-port", "pid-only"])
async def test_down_and_status_for_another_port_leave_the_broker_running(
    sandbox: Sandbox, first: Broker, pid_file: str
) -> None:
    # "pid-only" is what an older kafka.sh wrote: the port then comes from server.properties.
    recorded = first.data_dir / "broker.pid"
    written = recorded.read_text()
    recorded.write_text(pid_file.format(pid=first.pid, port=first.ports.client))
    other = Ports.free()
    try:
        down = sandbox.run("down", other, data_dir=first.data_dir, timeout=60)
        status = sandbox.run("status", other, data_dir=first.data_dir, timeout=60)
        assert_untouched(first)
    finally:
        recorded.write_text(written)
    assert down.returncode == 0, down.stdout + down.stderr
    assert (
        f"its broker {first.pid} serves {first.ports.bootstrap} and is left running" in down.stdout
    )
    assert status.returncode == 1, status.stdout + status.stderr
    assert f"serves {first.ports.bootstrap}, not {other.client}" in status.stdout
    assert await answers(first.ports.bootstrap)
