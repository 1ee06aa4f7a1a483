"""The lease a container's writes go under: whether it may still write for its tasks.

Under ``kafka-group`` it is the group lease (``coordinator/lease.py``), seen through each
container (``ContainerLease``): a container that gave its tasks up writes nothing more,
whatever the lease does next. Producers hand nothing over and checkpoint writers write
nothing while the lease is held; they wait for it to settle (``settle``) and drop what they
held if it broke. The tasks take no new message while it is held (``held``, as the
producers' backpressure).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol


class GroupLease(Protocol):
    def valid(self) -> bool:
        """Whether writes may go now (it checks itself: a hold may settle here)."""

    def held(self) -> asyncio.Future[None] | None:
        """While the lease is held, a future done once it is settled; None otherwise."""


class WriteLease(GroupLease, Protocol):
    async def settle(self) -> bool:
        """Wait out a hold (and any that follows at once); True: writes may go, False:
        the lease broke."""


class ContainerLease:
    """``lease`` as one container sees it: broken for good once ``given_up()``."""

    __slots__ = ("_given_up", "_lease")

    def __init__(self, lease: GroupLease, given_up: Callable[[], bool]) -> None:
        self._lease = lease
        self._given_up = given_up

    def valid(self) -> bool:
        return not self._given_up() and self._lease.valid()

    def held(self) -> asyncio.Future[None] | None:
        return None if self._given_up() else self._lease.held()

    async def settle(self) -> bool:
        # Checked every 0.1 s: giving the tasks up ends the wait too.
        while not self._given_up() and not self._lease.valid():
            if (held := self._lease.held()) is None:
                break  # broken
            await asyncio.wait([held], timeout=0.1)
        return self.valid()


__all__ = ["ContainerLease", "GroupLease", "WriteLease"]
