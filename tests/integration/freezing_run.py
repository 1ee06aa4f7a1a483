"""`samzapy run` that freezes itself (SIGSTOP) right after it hands a batch of the topic
SAMZAPY_TEST_FREEZE_TOPIC to its Kafka client, once armed (SIGUSR1): the batch is inside the
client, not yet sent, while the process stands still.

Usage: ``python freezing_run.py job.yaml``.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from aiokafka import AIOKafkaProducer

from samzapy.cli.main import main

_armed = False
_send_batch = AIOKafkaProducer.send_batch


async def _freezing_send_batch(self: Any, batch: Any, topic: str, *, partition: int) -> Any:
    global _armed
    delivery = await _send_batch(self, batch, topic, partition=partition)
    if _armed and topic == os.environ["SAMZAPY_TEST_FREEZE_TOPIC"]:
        _armed = False
        print('{"event": "test_frozen"}', flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
    return delivery


def _arm(*_: Any) -> None:
    global _armed
    _armed = True


if __name__ == "__main__":
    AIOKafkaProducer.send_batch = _freezing_send_batch
    signal.signal(signal.SIGUSR1, _arm)
    sys.exit(main(["run", sys.argv[1]]))
