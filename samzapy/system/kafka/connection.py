"""Reaching the broker: starting clients and making calls with retries, and noticing outages.

``connect`` starts a fresh aiokafka client per attempt; ``retrying`` makes one admin or
metadata call (describe, create, offsets, partitions). Both retry a broker that cannot be
reached with exponential backoff (0.5 s doubling up to 5 s) until ``connect.timeout.ms`` has
passed since the first failure; then they raise a StreamSystemError naming the servers and
the key. Other Kafka errors (authentication, a bad TLS set-up) fail at once: retrying would
not change them.

``OUTAGES`` logs one ``broker_unreachable`` warning when the brokers of a system stop
answering and one ``broker_reachable`` (with the outage's length and the failed attempts)
when any of its clients is answered again, however many clients and attempts saw it: an
outage is two lines in the log, not one per attempt. A call that gives up (past
``connect.timeout.ms``) leaves the outage open: only a client the brokers answer ends it (a
call answered from what the client already knew is no sign of them). While a call waits for
the broker (start-up, an admin call), ``broker_unreachable`` says when the wait gives up, and
``broker_still_unreachable`` follows every ``REMIND_S`` until it does.

A running client reconnects on its own (aiokafka retries inside), so a broker restart goes
unnoticed. ``ContactWatch`` is how a consumer tells a restart from an outage: it notes each
sign of life (a fetch the broker answered; not records fetched earlier and handed out during
an outage) and, while the consumer sits idle, probes the broker in the background; once the
broker has given no sign of life for longer than ``connect.timeout.ms`` and the last probe
failed, ``check`` raises.

``stop_client`` stops a client within ``STOP_TIMEOUT_S`` however its brokers fare: past it,
the client's connections are closed directly. ``pace_metadata`` makes a client wait its
``retry.backoff.ms`` after a metadata request no broker answered (the system consumer's, after
one whose answer lacks a topic it asked for too): aiokafka's producer and fetcher ask again at
once while a partition has no leader (the last answer of a broker that shut down, or a topic
deleted), which against a broker refusing connections, or for a deleted topic, spun thousands
of requests a second.
"""

from __future__ import annotations

import asyncio
import time
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
#: How often a call that waits for an unreachable broker says it still waits.
REMIND_S = 10.0
#: How long stopping one client may take before its connections are closed directly.
STOP_TIMEOUT_S = 5.0


class Outages:
    """The open outages of the process, one per (system, bootstrap servers), and their log."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, str], tuple[float, int]] = {}
        self._answered: dict[tuple[str, str], float] = {}
        self._reminded: dict[tuple[str, str], float] = {}

    def failed(
        self,
        system: str,
        servers: str,
        client: str,
        error: BaseException,
        attempted_at: float | None = None,
        gives_up_in_s: float | None = None,
    ) -> None:
        """A client of ``system`` could not reach ``servers``: log it if no outage is open
        (with ``gives_up_in_s``, when the caller waits that long at most).

        An attempt made (``attempted_at``, ``time.monotonic()``) before the brokers last
        answered is stale (it began during the outage just closed) and is not a new outage.
        """
        key = (system, servers)
        if attempted_at is not None and attempted_at < self._answered.get(key, -1.0):
            return
        opened = self._open.get(key)
        if opened is not None:
            self._open[key] = (opened[0], opened[1] + 1)
            return
        self._open[key] = (time.monotonic(), 1)
        log.warning(
            "broker_unreachable",
            system=system,
            client=client,
            bootstrap_servers=servers,
            error=describe(error),
            **({} if gives_up_in_s is None else {"gives_up_in_s": round(gives_up_in_s, 1)}),
        )

    def still_failing(self, system: str, servers: str, client: str, gives_up_in_s: float) -> None:
        """A call still waits for ``servers``: say so (``broker_still_unreachable``), once
        per ``REMIND_S`` however many calls wait."""
        key = (system, servers)
        opened = self._open.get(key)
        now = time.monotonic()
        if opened is None or now - self._reminded.get(key, opened[0]) < REMIND_S * 0.9:
            return
        self._reminded[key] = now
        log.warning(
            "broker_still_unreachable",
            system=system,
            client=client,
            bootstrap_servers=servers,
            outage_s=round(now - opened[0], 1),
            failed_attempts=opened[1],
            gives_up_in_s=round(max(gives_up_in_s, 0.0), 1),
        )

    def answered(self, system: str, servers: str) -> None:
        """A client of ``system`` was answered: close the open outage, if any."""
        opened = self._open.pop((system, servers), None)
        if opened is not None:
            self._answered[(system, servers)] = time.monotonic()
            log.info(
                "broker_reachable",
                system=system,
                bootstrap_servers=servers,
                outage_s=round(time.monotonic() - opened[0], 1),
                failed_attempts=opened[1],
            )

    def is_open(self, system: str, servers: str) -> bool:
        return (system, servers) in self._open


#: The process's outages: the clients of one system share them.
OUTAGES = Outages()


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

    def fatal(exc: BaseException) -> StreamSystemError:
        return StreamSystemError(
            f"cannot connect the Kafka {client} of system {system!r} to {servers}: {describe(exc)}"
        )

    return await retrying(
        open_client,
        what="",
        fatal=fatal,
        servers=servers,
        timeout_ms=timeout_ms,
        system=system,
        client=client,
    )


async def retrying(
    call: Callable[[], Awaitable[T]],
    *,
    what: str,
    fatal: Callable[[BaseException], StreamSystemError] | None,
    servers: str,
    timeout_ms: int,
    system: str,
    client: str,
) -> T:
    """``await call()``, retried while the broker is unreachable, for ``timeout_ms`` from
    the first failure. ``what`` says what the call does (``describe Kafka topics ['x']``)
    in the message of the final failure; ``fatal`` makes the error for any other Kafka error
    (None: raise it as it is).
    """
    loop = asyncio.get_running_loop()
    first_failure: float | None = None
    deadline = loop.time() + timeout_ms / 1000
    delay = INITIAL_BACKOFF_S
    attempt = 0
    reminder: asyncio.TimerHandle | None = None

    def remind() -> None:
        nonlocal reminder
        OUTAGES.still_failing(system, servers, client, deadline - loop.time())
        reminder = loop.call_later(REMIND_S, remind)

    try:
        while True:
            attempt += 1
            attempted_at = time.monotonic()
            try:
                async with asyncio.timeout(max(deadline - loop.time(), MIN_ATTEMPT_S)):
                    result = await call()
            except UNREACHABLE as exc:
                last: BaseException = exc
            except KAFKA_ERRORS as exc:
                if fatal is None:
                    raise
                raise fatal(exc) from exc
            else:
                OUTAGES.answered(system, servers)
                return result
            now = loop.time()
            if first_failure is None:  # the clock starts at the first failure
                first_failure, deadline = now, now + timeout_ms / 1000
                reminder = loop.call_later(REMIND_S, remind)
            OUTAGES.failed(system, servers, client, last, attempted_at, deadline - now)
            if now >= deadline:  # the outage stays open: the next call that fails is in it
                doing = f" to {what}" if what else ""
                raise StreamSystemError(
                    f"cannot reach Kafka at {servers}{doing} after {attempt} attempts over "
                    f"{now - first_failure:.1f} s: {describe(last)} (system {system!r}; check "
                    f"systems.{system}.bootstrap.servers, or allow more time with "
                    f"systems.{system}.connect.timeout.ms, now {timeout_ms})"
                ) from last
            await asyncio.sleep(min(delay, deadline - now))
            delay = min(delay * 2, MAX_BACKOFF_S)
    finally:
        if reminder is not None:
            reminder.cancel()


def _network(client: Any) -> Any:
    """The aiokafka network client (``AIOKafkaClient``) under a consumer or admin client
    (``_client``) or a producer (``client``); None if it has none."""
    return getattr(client, "_client", None) or getattr(client, "client", None)


def keep_bootstrap(client: Any) -> None:
    """Let ``client`` (an aiokafka consumer, producer or admin client, before its start) fall
    back on its bootstrap servers whenever it knows no broker.

    aiokafka's network client asks the brokers of the last metadata that named any (it
    ignores a response naming none), and keeps its connection to a bootstrap server only
    until such metadata arrives. A client that bootstraps from a broker that has just
    restarted (in KRaft a broker names no broker, itself included, until the controller
    unfences it) keeps that connection; once it closes the client knows no broker to ask,
    logs "Unable to update metadata from []" at every refresh and never recovers
    (aio-libs/aiokafka#551). Its ClusterMetadata falls back on bootstrap brokers when it
    has them, which aiokafka never gives it; this does."""
    network = _network(client)
    cluster = getattr(network, "cluster", None)
    servers = getattr(network, "_bootstrap_servers", None)
    if cluster is None or not servers or getattr(cluster, "_bootstrap_brokers", None):
        return
    cluster.config["bootstrap_servers"] = servers
    cluster._bootstrap_brokers = cluster._generate_bootstrap_brokers()


def pace_metadata(client: Any, missing: bool = False) -> None:
    """Let ``client`` (an aiokafka client, before its start) wait its retry backoff after a
    metadata request that no broker answered (with ``missing``, also after one whose answer
    lacks a topic it asked for), before its waiters learn the outcome.

    aiokafka's producer (a batch for a partition without a leader) and fetcher (a partition
    without a leader) ask for metadata again as soon as the last request ends; one that no
    broker answered ends at once when the brokers refuse connections, so while the last
    metadata names no leader (a broker that shut down says so first) both spin. So does a
    fetcher whose topic was deleted: the brokers answer at once, without it. ``missing`` is
    for the system consumer's client alone, whose topics all exist until deleted: elsewhere
    a topic is missing from an answer while it is being created (a producer's first send to
    it), where aiokafka waits its backoff already, and a deleted topic one client still
    tracks would hold back every later update of that client's healthy topics."""
    network = _network(client)
    update = getattr(network, "_metadata_update", None)
    backoff = getattr(network, "_retry_backoff", None)
    if update is None or not isinstance(backoff, int | float) or backoff <= 0:
        return

    async def paced(cluster: Any, topics: Any) -> Any:
        # The topics asked for: aiokafka passes its live set, which ``add_topic`` may grow
        # while the request is out (a topic added then is not one the answer lacks).
        asked = list(topics or ())
        updated = await update(cluster, topics)
        if not updated or (missing and any(cluster.partitions_for_topic(t) is None for t in asked)):
            await asyncio.sleep(backoff)
        return updated

    network._metadata_update = paced


async def started(
    client: T, close: Callable[[], Awaitable[Any]] | None = None, missing: bool = False
) -> T:
    """``client`` (an aiokafka consumer, producer or admin client) started; when its start
    fails it is stopped again (``close``, for a client stopped otherwise: an admin client's
    ``close``), connections closed, and the error raised. It falls back on its bootstrap
    servers when it knows no broker (``keep_bootstrap``) and waits between metadata requests
    no broker answered (``pace_metadata``; with ``missing``, after an answer lacking a topic
    too)."""
    keep_bootstrap(client)
    pace_metadata(client, missing)
    try:
        await client.start()  # type: ignore[attr-defined]
    except BaseException:
        await (stop_client(client) if close is None else close())
        raise
    return client


async def stop_client(client: Any, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop an aiokafka consumer or producer within ``timeout_s``, however its broker fares.

    aiokafka's stop may wait for the brokers without end: a producer's for every batch it
    holds (an idempotent producer never gives one up), a consumer's for a group coordinator
    or a request that gets no answer. Past ``timeout_s`` it is cut short and the client's
    connections are closed directly. aiokafka's consumer also lets the cancellation of one of
    its own fetch tasks escape ``stop`` when that fetch was backing off after a broker error,
    and then leaves its connections open; those are closed too. A cancellation of the caller
    itself still propagates, as does any other error of the stop (the connections closed).
    """
    try:
        async with asyncio.timeout(timeout_s):
            await client.stop()
        return
    except TimeoutError:
        log.info("client_stop_cut_short", client=type(client).__name__, timeout_s=timeout_s)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
    except Exception:
        await _close_network(client)
        raise
    await _close_network(client)


async def _close_network(client: Any) -> None:
    network = _network(client)
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

    @property
    def interval_s(self) -> float:
        """How often, at most, an idle client's broker is probed."""
        return self._interval_s

    def contact(self, now: float) -> None:
        """The broker answered at ``now`` (a fetch that brought records)."""
        self._last_contact = now
        OUTAGES.answered(self._system, self._servers)

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
        attempted_at = time.monotonic()
        try:
            async with asyncio.timeout(max(self._interval_s, MIN_ATTEMPT_S)):
                await self._probe()
        except UNREACHABLE as exc:
            self._failures += 1
            self._error = exc
            OUTAGES.failed(self._system, self._servers, self._client, exc, attempted_at)
        except KAFKA_ERRORS as exc:
            self._fatal = exc
        else:
            OUTAGES.answered(self._system, self._servers)
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
    "OUTAGES",
    "Outages",
    "retrying",
    "started",
    "INITIAL_BACKOFF_S",
    "MAX_BACKOFF_S",
    "PROBE_INTERVAL_S",
    "STOP_TIMEOUT_S",
    "ContactWatch",
    "connect",
    "keep_bootstrap",
    "pace_metadata",
    "stop_client",
]
