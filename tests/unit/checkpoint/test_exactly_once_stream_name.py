"""The exactly-once checkpoint stream's name fits in Kafka's 249 characters for any job name,
as the at-least-once stream's does: with a long job.name it was that name plus "-txn", 253
characters, and the job failed at start-up with InvalidTopicError."""

from __future__ import annotations

import pytest

from samzapy.checkpoint.stream import MAX_STREAM_NAME_LENGTH, checkpoint_stream_name
from samzapy.checkpoint.transactional import (
    AtLeastOnceCheckpointManager,
    TransactionalCheckpointManager,
    checkpoint_streams,
    exactly_once_stream,
)
from samzapy.system.inmemory.factory import InMemorySystemFactory


def test_a_name_that_fits_is_the_stream_plus_txn() -> None:
    assert exactly_once_stream("__samzapy_checkpoint_job_1") == "__samzapy_checkpoint_job_1-txn"
    stream = "s" * (MAX_STREAM_NAME_LENGTH - 4)
    assert exactly_once_stream(stream) == stream + "-txn"


@pytest.mark.parametrize("length", [226, 230, 249, 300])
def test_the_exactly_once_stream_of_a_long_job_name_fits_and_jobs_stay_apart(length: int) -> None:
    factory = InMemorySystemFactory("cp", {"namespace": "exactly-once-stream-name"})
    names = set()
    for job_id in ("1", "2"):
        stream = checkpoint_stream_name("j" * length, job_id)
        manager = TransactionalCheckpointManager(factory, stream, 4, fallback_stream=stream)
        assert len(manager.stream) <= MAX_STREAM_NAME_LENGTH, manager.stream
        assert manager.stream.endswith("-txn")
        # The at-least-once manager looks for the same stream (a job switched between them).
        assert checkpoint_streams(AtLeastOnceCheckpointManager(factory, stream)) == [
            stream,
            manager.stream,
        ]
        names.add(manager.stream)
    assert len(names) == 2
