"""Reaching the broker: starting a client with retries, and noticing a broker lost for good.

``connect`` starts a fresh aiokafka client per attempt. A broker that cannot be reached is
retried with exponential backoff (0.5 s doubling up to 5 s), each failure logged as a
``broker_unreachable`` event, until ``connect.timeout.ms`` has passed; then it raises a
StreamSystemError naming the servers. Other Kafka errors (authentication, a bad TLS set-up)
fail at once: retrying would not change them.

A running client reconnects on its own (aiokafka retries inside), so a broker restart goes
unnoticed. ``ContactWatch`` is how a consumer tells a restart from an outage: it notes each
sign of life (records received) and, while the consumer sits idle, probes the broker in the
background; once the broker has given no sign of life for longer than ``connect.timeout.ms``
and the last probe failed, ``check`` raises.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog

from samzapy.api.errors import StreamSystemError
from samzapy.system.kafka.errors import KAFKA_ERRORS, UNREACHABLE, describe

log = structlog.get_logger("samzapy.kafka")

T = TypeVar("T")

INITIAL_BACKOFF_S = 0.5
MAX_BACKOFF_S = 5.0
#: The least time one connection attempt is given, even when the deadline is nearer.
MIN_ATTEMPT_S = 1.0
#: How often an idle consumer checks the broker still answers (at most).
PROBE_INTERVAL_S = 5.0


async def connect(
    open_client: Callable[[], Awaitable[T]],
    *,
    servers: str,
    timeout_ms: int,
    system: str,
    client: str,
) -> T:
    """``await open_client()``, retried while the broker is unreachable (see module doc).

    ``open_client`` builds and starts a new client, and closes it again when its start
    fails. ``client`` names the role (``admin``, ``consumer``, ``producer``) in events.
    """
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + timeout_ms / 1000
    delay = INITIAL_BACKOFF_S
    attempt = 0
    while True:
        attempt += 1
        try:
            async with asyncio.timeout(max(deadline - loop.time(), MIN_ATTEMPT_S)):
                return await open_client()
        except UNREACHABLE as exc:
            last: BaseException = exc
        except KAFKA_ERRORS as exc:
            raise StreamSystemError(
                f"cannot connect the Kafka {client} of system {system!r} to {servers}: "
                f"{describe(exc)}"
            ) from exc
        log.warning(
            "broker_unreachable",
            system=system,
            client=client,
            bootstrap_servers=servers,
            attempt=attempt,
            error=describe(last),
        )
        now = loop.time()
        if now >= deadline:
            raise StreamSystemError(
                f"cannot reach Kafka at {servers} after {attempt} attempts over "
                f"{now - started:.1f} s: {describe(last)} (system {system!r}; check "
                f"systems.{system}.bootstrap.servers, or allow more time with "
                f"systems.{system}.connect.timeout.ms, now {timeout_ms})"
            ) from last
        await asyncio.sleep(min(delay, deadline - now))
        delay = min(delay * 2, MAX_BACKOFF_S)


async def started(client: T) -> T:
    """``client`` (an aiokafka consumer or producer) started; when its start fails it is
    stopped again, connections closed, and the error raised."""
    try:
        await client.start()  # type: ignore[attr-defined]
    except BaseException:
        await stop_client(client)
        raise
    return client


async def stop_client(client: Any) -> None:
    """Stop an aiokafka consumer or producer, however its broker fares.

    aiokafka's consumer lets the cancellation of one of its own fetch tasks escape ``stop``
    when that fetch was backing off after a broker error, and then leaves its connections
    open; those are closed here. A cancellation of the caller itself still propagates.
    """
    try:
        await client.stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        network = getattr(client, "_client", None) or getattr(client, "client", None)
        if network is not None:
            await network.close()


class ContactWatch:
    """Tracks the last sign of life of the broker behind one running client."""

    def __init__(
        self,
        probe: Callable[[], Awaitable[object]],
        *,
        servers: str,
        timeout_ms: int,
        system: str,
        client: str,
    ) -> None:
        self._probe = probe
        self._servers = servers
        self._timeout_s = timeout_ms / 1000
        self._interval_s = max(min(PROBE_INTERVAL_S, self._timeout_s / 3), 0.05)
        self._system = system
        self._client = client
        self._loop = asyncio.get_running_loop()
        self._last_contact = self._loop.time()
        self._probing: asyncio.Task[None] | None = None
        self._failures = 0
        self._error: BaseException | None = None
        self._fatal: BaseException | None = None

    def contact(self, now: float) -> None:
        """The broker just answered (records arrived)."""
        self._last_contact = now

    def check(self, now: float) -> None:
        """Called while idle: probe when due; raise once the broker is lost for too long."""
        if self._fatal is not None:
            raise StreamSystemError(
                f"the Kafka {self._client} of system {self._system!r} failed: "
                f"{describe(self._fatal)}"
            ) from self._fatal
        silent = now - self._last_contact
        if self._error is not None and silent > self._timeout_s:
            raise StreamSystemError(
                f"lost Kafka at {self._servers}: no answer for {silent:.1f} s after "
                f"{self._failures} failed checks: {describe(self._error)} (system "
                f"{self._system!r}; systems.{self._system}.connect.timeout.ms is "
                f"{self._timeout_s * 1000:.0f})"
            ) from self._error
        if self._probing is None and silent >= self._interval_s:
            self._probing = self._loop.create_task(self._run_probe())

    async def _run_probe(self) -> None:
        try:
            async with asyncio.timeout(max(self._interval_s, MIN_ATTEMPT_S)):
                await self._probe()
        except UNREACHABLE as exc:
            self._failures += 1
            self._error = exc
            log.warning(
                "broker_unreachable",
                system=self._system,
                client=self._client,
                bootstrap_servers=self._servers,
                attempt=self._failures,
                error=describe(exc),
            )
        except KAFKA_ERRORS as exc:
            self._fatal = exc
        else:
            if self._error is not None:
                log.info(
                    "broker_reachable",
                    system=self._system,
                    client=self._client,
                    bootstrap_servers=self._servers,
                    after_failures=self._failures,
                )
            self._error = None
            self._failures = 0
            self._last_contact = self._loop.time()
        finally:
            self._probing = None

    async def close(self) -> None:
        """Stop a probe in progress."""
        probing, self._probing = self._probing, None
        if probing is not None:
            probing.cancel()
            await asyncio.gather(probing, return_exceptions=True)


__all__ = [
    "started",
    "INITIAL_BACKOFF_S",
    "MAX_BACKOFF_S",
    "PROBE_INTERVAL_S",
    "ContactWatch",
    "connect",
    "stop_client",
]
