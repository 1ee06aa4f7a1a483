"""`samzapy run` whose link to its group's coordinator the test can cut (SIGUSR1) and heal
(SIGUSR2).

While cut, every request the group member sends its coordinator (heartbeats, joins, syncs)
fails after a short wait, as over a lost connection; the container's own consumers and
producers still reach the broker. That is the partial partition in which a member the group
has evicted could go on processing and writing while another container runs its tasks.

Usage: ``python coordinator_cut.py job.yaml``.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

from aiokafka.consumer.group_coordinator import GroupCoordinator
from aiokafka.errors import KafkaConnectionError

from samzapy.cli.main import main

_cut = False
_send_req = GroupCoordinator._send_req


async def _cut_off_send_req(self: Any, request: Any) -> Any:
    if _cut:
        await asyncio.sleep(0.1)
        raise KafkaConnectionError("cut off from the group coordinator by the test")
    return await _send_req(self, request)


def _set(cut: bool) -> None:
    global _cut
    _cut = cut
    print(f'{{"event": "test_coordinator_{"cut" if cut else "healed"}"}}', flush=True)


if __name__ == "__main__":
    GroupCoordinator._send_req = _cut_off_send_req  # type: ignore[method-assign]
    signal.signal(signal.SIGUSR1, lambda *_: _set(True))
    signal.signal(signal.SIGUSR2, lambda *_: _set(False))
    sys.exit(main(["run", sys.argv[1]]))
