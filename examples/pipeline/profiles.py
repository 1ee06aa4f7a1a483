"""A small local HTTP service of member profiles, and the async client the pipeline uses.

``GET /members/<id>`` answers ``{"memberId", "name", "country"}``, derived from the id (so
results are reproducible), after ``delay_ms`` of simulated latency; anything else is a 404.
The client opens one connection per request (localhost), so concurrent lookups really run
concurrently, up to ``task.max.concurrency`` per task.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

COUNTRIES = ["NL", "US", "IN", "BR", "DE", "JP", "NG", "FR"]


def profile(member_id: str) -> dict[str, str]:
    digest = hashlib.sha256(member_id.encode()).digest()
    return {
        "memberId": member_id,
        "name": f"Member {member_id.rsplit('-', 1)[-1]}",
        "country": COUNTRIES[digest[0] % len(COUNTRIES)],
    }


class ProfileService:
    """The HTTP service, on 127.0.0.1 and a free port unless one is given."""

    def __init__(self, port: int = 0, delay_ms: float = 2.0) -> None:
        self.port = port
        self.delay = delay_ms / 1000
        self.requests = 0
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await reader.readuntil(b"\r\n\r\n")
            method, path, _ = request.split(b"\r\n", 1)[0].decode().split(" ", 2)
            self.requests += 1
            if self.delay:
                await asyncio.sleep(self.delay)
            if method == "GET" and path.startswith("/members/"):
                status, body = "200 OK", json.dumps(profile(path[len("/members/") :]))
            else:
                status, body = "404 Not Found", json.dumps({"error": f"no route {path}"})
            data = body.encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
                + data
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()


async def fetch_profile(base_url: str, member_id: str, timeout: float = 5.0) -> dict[str, Any]:  # noqa: ASYNC109
    """GET ``<base_url>/members/<member_id>``; raises on anything but 200."""
    host_port = base_url.removeprefix("http://").rstrip("/")
    host, _, port = host_port.partition(":")
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(host, int(port or 80))
        try:
            writer.write(
                f"GET /members/{member_id} HTTP/1.1\r\nHost: {host_port}\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            await writer.drain()
            response = await reader.read()
        finally:
            writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].decode()
    if " 200 " not in f"{status} ":
        raise RuntimeError(f"profile lookup of {member_id!r} at {base_url} failed: {status}")
    result: dict[str, Any] = json.loads(body)
    return result


class Countries:
    """Members' countries from the service at ``base_url``, each looked up once: concurrent
    callers asking for one member share its one lookup in flight."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.known: dict[str, str] = {}
        self.lookups: dict[str, asyncio.Future[str]] = {}

    async def of(self, member: str) -> str:
        country = self.known.get(member)
        if country is not None:
            return country
        pending = self.lookups.get(member)
        if pending is None:
            pending = self.lookups[member] = asyncio.ensure_future(self._lookup(member))
        return await pending

    async def _lookup(self, member: str) -> str:
        try:
            country = str((await fetch_profile(self.base_url, member))["country"])
        finally:
            self.lookups.pop(member, None)
        self.known[member] = country
        return country


async def _serve(port: int) -> None:
    service = ProfileService(port)
    await service.start()
    print(f"profiles on {service.url}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    import sys

    asyncio.run(_serve(int(sys.argv[1]) if len(sys.argv) > 1 else 8765))
