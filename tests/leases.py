"""A group lease a test switches by hand (the shape of ``samzapy.system.fencing.WriteLease``,
waiting out a hold as a container's writers do): valid, held (writers wait, tasks take no
message) or broken."""

from __future__ import annotations

import asyncio

from samzapy.system.fencing import ContainerLease


class SwitchedLease:
    def __init__(self) -> None:
        self.state = "valid"
        self._settled: asyncio.Future[None] | None = None

    def valid(self) -> bool:
        return self.state == "valid"

    def held(self) -> asyncio.Future[None] | None:
        if self.state != "held":
            return None
        if self._settled is None:
            self._settled = asyncio.get_running_loop().create_future()
        return self._settled

    async def settle(self) -> bool:
        return await ContainerLease(self, lambda: False).settle()

    def hold(self) -> None:
        self.state = "held"

    def resume(self) -> None:
        self._settle("valid")

    def break_(self) -> None:
        self._settle("broken")

    def _settle(self, state: str) -> None:
        self.state = state
        settled, self._settled = self._settled, None
        if settled is not None and not settled.done():
            settled.set_result(None)
