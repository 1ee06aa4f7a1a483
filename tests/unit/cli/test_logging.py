"""The logging set-up: client-library records rate-limited and levelled, secrets scrubbed."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from samzapy.cli import logging as cli_logging
from samzapy.cli.logging import ClientLogLimiter, add_secrets, configure_logging, scrub


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def record(name: str, msg: str, *args: object, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


class TestClientLogLimiter:
    def test_one_line_per_distinct_message_per_interval_then_one_with_the_repeats(self) -> None:
        clock = Clock()
        limiter = ClientLogLimiter(interval_s=60, clock=clock)
        passed = []
        for second in range(150):  # a message every second for 150 s
            clock.now = float(second)
            r = record("aiokafka.consumer.group_coordinator", "Heartbeat failed: %r", "x")
            if limiter.filter(r):
                passed.append((second, getattr(r, "samzapy_repeats", 0)))
        assert passed == [(0, 0), (60, 59), (120, 59)]

    def test_transient_connection_errors_are_warnings_and_one_kind(self) -> None:
        limiter = ClientLogLimiter(interval_s=60, clock=Clock())
        first = record("aiokafka.conn", "Unable connect to node with id %s: %s", 1, "refused")
        assert limiter.filter(first)
        assert (first.levelno, first.levelname) == (logging.WARNING, "WARNING")
        for name, msg in [
            ("aiokafka", "Unable to update metadata from %s"),
            ("aiokafka.consumer.fetcher", "Failed fetch messages from %s: %s"),
            ("aiokafka.consumer.group_coordinator", "Group Coordinator Request failed: %s"),
        ]:
            assert not limiter.filter(record(name, msg, 1, "x"))
        # Another client error is its own kind, at its own level.
        other = record("aiokafka.cluster", "Topic %s not found in cluster metadata", "t")
        assert limiter.filter(other) and other.levelno == logging.ERROR

    def test_samzapy_records_are_never_limited(self) -> None:
        limiter = ClientLogLimiter(interval_s=60, clock=Clock())
        assert all(limiter.filter(record("samzapy.kafka", "same")) for _ in range(5))


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    yield out
    configure_logging("json", "info")
    cli_logging._SECRETS.clear()


def test_a_client_record_is_a_json_line_with_the_job_context_and_its_repeats(
    stream: io.StringIO,
) -> None:
    configure_logging("json", "info", stream=stream)
    log = logging.getLogger("aiokafka.conn")
    with structlog.contextvars.bound_contextvars(job="j", container="0"):
        for _ in range(3):
            log.error("Unable connect to node with id %s: %s", 1, "refused")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines == [
        {
            "timestamp": lines[0]["timestamp"],
            "level": "warning",
            "event": "Unable connect to node with id 1: refused",
            "job": "j",
            "container": "0",
            "logger": "aiokafka.conn",
        }
    ]


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_secrets_are_scrubbed_from_every_line_and_tracebacks_show_no_locals(
    stream: io.StringIO, fmt: str
) -> None:
    configure_logging(fmt, "info", stream=stream)
    secret = 'pa"ss\\word-1'
    add_secrets([secret])
    log = structlog.get_logger("samzapy.test")
    marker = "-".join(["only", "in", "the", "locals"])  # shown only with the frame's locals
    try:
        raise RuntimeError(f"refused {secret}")
    except RuntimeError:
        log.exception("job_failed", detail={"given": secret})
    text = stream.getvalue()
    assert "job_failed" in text and "RuntimeError" in text
    assert "<redacted>" in text
    for form in (secret, json.dumps(secret)[1:-1], repr(secret)[1:-1]):
        assert form not in text
    assert marker not in text


def test_scrub_replaces_longer_secrets_first() -> None:
    add_secrets(["abcd", "abcdefgh"])
    try:
        assert scrub("x abcdefgh y abcd") == "x <redacted> y <redacted>"
    finally:
        cli_logging._SECRETS.clear()
