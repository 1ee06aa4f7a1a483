"""The logging set-up: libraries' records as levelled, rate-limited events; secrets scrubbed."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from samzapy.cli import logging as cli_logging
from samzapy.cli.logging import (
    LibraryLogFilter,
    add_secrets,
    configure_logging,
    flush_library_logs,
    scrub,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def record(name: str, msg: str, *args: object, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def task_failed(library: LibraryLogFilter) -> None:
    library.watch(None, "error", {"event": "task_failed", "task": "Partition 0"})


class TestLibraryLogFilter:
    def test_a_library_record_passes_once_per_window_as_its_event(self) -> None:
        clock = Clock()
        library = LibraryLogFilter(interval_s=60, clock=clock)
        passed = []
        for second in range(125):
            clock.now = float(second)
            r = record("aiokafka.consumer.group_coordinator", "Heartbeat failed: %r", "x")
            if library.filter(r):
                passed.append((second, r.samzapy_library))  # type: ignore[attr-defined]
        assert [second for second, _ in passed] == [0, 60, 120]
        assert passed[0][1]["level"] == "warning"
        assert passed[0][1]["library_level"] == "error"
        assert "suppressed" not in passed[0][1]
        assert passed[1][1]["suppressed"] == 59

    def test_samzapy_records_are_neither_mapped_nor_limited(self) -> None:
        library = LibraryLogFilter(interval_s=60, clock=Clock())
        records = [record("samzapy.kafka", "same") for _ in range(5)]
        assert all(library.filter(r) for r in records)
        assert not any(hasattr(r, "samzapy_library") for r in records)

    def test_a_failing_job_lets_library_errors_through_at_their_own_level(self) -> None:
        library = LibraryLogFilter(logging.ERROR, clock=Clock())  # --log-level error
        assert not library.filter(record("aiokafka", "Heartbeat failed: %r", "x"))
        library.watch(None, "error", {"event": "metrics_report_failed"})  # not a failure
        assert not library.filter(record("aiokafka", "Heartbeat failed: %r", "x"))
        task_failed(library)
        r = record("aiokafka", "Heartbeat failed: %r", "x")
        assert library.filter(r)
        assert r.samzapy_library["level"] == "error"  # type: ignore[attr-defined]
        assert not library.filter(record("aiokafka", "a warning", level=logging.WARNING))

    def test_reports_of_closed_windows_once_and_all_at_the_end(self) -> None:
        clock = Clock()
        library = LibraryLogFilter(interval_s=60, clock=clock)
        for second in (0, 1, 2):
            clock.now = float(second)
            library.filter(record("a", "one %s", second))
        for second in (30, 31):
            clock.now = float(second)
            library.filter(record("b", "two %s", second))
        clock.now = 60.0
        (report,) = library.reports()  # a's window has closed, b's has not
        assert (report.name, report.levelno) == ("a", logging.WARNING)
        assert report.samzapy_library == {  # type: ignore[attr-defined]
            "event": "library_log_suppressed",
            "level": "warning",
            "logger": "a",
            "library_level": "error",
            "template": "one %s",
            "suppressed": 2,
            "window_s": 60,
        }
        assert library.reports() == []
        task_failed(library)
        (final,) = library.reports(final=True)
        assert (final.name, final.levelno) == ("b", logging.ERROR)
        assert final.samzapy_library["suppressed"] == 1  # type: ignore[attr-defined]


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    yield out
    configure_logging("json", "info")
    cli_logging._SECRETS.clear()


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_library_record_is_one_json_line_with_the_job_context(stream: io.StringIO) -> None:
    configure_logging("json", "info", stream=stream, clock=Clock())
    log = logging.getLogger("aiokafka.conn")
    with structlog.contextvars.bound_contextvars(job="j", container="0"):
        for _ in range(3):
            log.error("Unable connect to node with id %s: %s", 1, "refused")
    assert lines(stream) == [
        {
            "timestamp": lines(stream)[0]["timestamp"],
            "level": "warning",
            "event": "library_log",
            "logger": "aiokafka.conn",
            "library_level": "error",
            "message": "Unable connect to node with id 1: refused",
            "job": "j",
            "container": "0",
        }
    ]
    assert list(lines(stream)[0])[:3] == ["timestamp", "level", "event"]


def test_a_library_exception_is_compact_unless_debugging(stream: io.StringIO) -> None:
    log = logging.getLogger("asyncio")
    for level in ("info", "debug"):
        configure_logging("json", level, stream=stream, clock=Clock())
        try:
            raise ConnectionResetError("peer reset")
        except ConnectionResetError:
            log.exception("Task exception was never retrieved\nfuture: <Task %s>", level)
    compact, full = lines(stream)
    assert compact["message"] == "Task exception was never retrieved\nfuture: <Task info>"
    assert compact["error_type"] == "ConnectionResetError" and compact["error"] == "peer reset"
    assert compact["error_at"].endswith(" in test_a_library_exception_is_compact_unless_debugging")
    assert "exception" not in compact
    assert full["exception"][0]["exc_type"] == "ConnectionResetError"


def test_a_record_whose_arguments_do_not_fit_is_still_one_line(
    stream: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("json", "info", stream=stream, clock=Clock())
    # Straight to samzapy's handler: pytest's own on the root logger would raise first.
    (handler,) = [
        h for h in logging.getLogger().handlers if isinstance(h, cli_logging._SamzapyHandler)
    ]
    handler.handle(record("lib", "needs %d", "text"))
    (line,) = lines(stream)
    assert (line["event"], line["message"]) == ("library_log", "needs %d ('text',)")
    assert capsys.readouterr().err == ""  # no "--- Logging error ---"


def test_samzapy_events_are_unchanged(stream: io.StringIO) -> None:
    configure_logging("json", "info", stream=stream, clock=Clock())
    structlog.get_logger("samzapy.test").warning("broker_unreachable", error="x")
    logging.getLogger("samzapy.kafka").warning("own %s", "record")
    assert [{k: v for k, v in e.items() if k != "timestamp"} for e in lines(stream)] == [
        {"level": "warning", "event": "broker_unreachable", "error": "x"},
        {"level": "warning", "event": "own record", "logger": "samzapy.kafka"},
    ]


def test_after_a_failure_libraries_log_at_their_level_and_left_out_ones_are_reported(
    stream: io.StringIO,
) -> None:
    clock = Clock()
    configure_logging("json", "info", stream=stream, clock=clock)
    log = logging.getLogger("aiokafka.consumer.group_coordinator")
    for _ in range(4):
        log.error("Heartbeat failed: %s", "x")
    structlog.get_logger("samzapy.test").error("task_failed", task="Partition 0")
    log.error("Heartbeat failed: %s", "x")
    clock.now = 61.0
    log.error("Heartbeat failed: %s", "y")
    log.error("Heartbeat failed: %s", "z")
    flush_library_logs()
    assert [(e["event"], e["level"], e.get("suppressed")) for e in lines(stream)] == [
        ("library_log", "warning", None),
        ("task_failed", "error", None),
        ("library_log_suppressed", "error", 4),  # the window closed: reported before 'y'
        ("library_log", "error", None),
        ("library_log_suppressed", "error", 1),  # 'z', reported at the end
    ]


def test_a_python_warning_is_a_library_log(stream: io.StringIO) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        logging.captureWarnings(False)  # pytest replaced showwarning for this test: capture again
        configure_logging("json", "info", stream=stream, clock=Clock())
        warnings.warn("old call", DeprecationWarning, stacklevel=1)
    (line,) = lines(stream)
    assert (line["event"], line["logger"], line["level"]) == (
        "library_log",
        "py.warnings",
        "warning",
    )
    assert "DeprecationWarning: old call" in line["message"]


def test_console_lines_name_the_event_and_logger(stream: io.StringIO) -> None:
    configure_logging("console", "warning", stream=stream, clock=Clock())
    logging.getLogger("aiokafka.cluster").error("Topic %s not found in cluster metadata", "t")
    (line,) = stream.getvalue().splitlines()
    assert "library_log" in line and "[aiokafka.cluster]" in line
    assert "library_level=error" in line and "warning" in line


def test_exceptions_nobody_can_catch_are_library_logs_not_raw_lines(
    stream: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As in `samzapy run`, not under pytest (whose own hooks configure_logging leaves alone).
    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)
    monkeypatch.setattr(threading, "excepthook", threading.__excepthook__)
    configure_logging("json", "info", stream=stream, clock=Clock())

    class Leaky:
        def __del__(self) -> None:
            raise OSError("socket closed twice")

    Leaky()  # collected at once: its __del__ raises where nobody can catch it
    thread = threading.Thread(target=lambda: 1 / 0, name="worker-1")
    thread.start()
    thread.join()
    unraisable, in_thread = lines(stream)
    assert (unraisable["event"], unraisable["logger"]) == ("library_log", "py.unraisable")
    assert unraisable["message"].startswith("Exception ignored ")
    assert (unraisable["error_type"], unraisable["error"]) == ("OSError", "socket closed twice")
    assert (in_thread["logger"], in_thread["message"]) == (
        "py.threading",
        "Exception in thread worker-1",
    )
    assert (in_thread["level"], in_thread["library_level"]) == ("warning", "error")
    assert in_thread["error_type"] == "ZeroDivisionError"


def test_no_library_logger_bypasses_the_root_handler() -> None:
    """A logger with a handler of its own, or that does not propagate, would print raw lines."""
    import aiokafka  # noqa: F401
    import rocksdict  # noqa: F401

    import samzapy.cli.main
    import samzapy.coordinator.job_runner  # noqa: F401

    pytest.importorskip("py4j.java_gateway")
    bypassing = [
        name
        for name, logger in logging.root.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
        and not name.startswith("samzapy")
        and (
            not logger.propagate or any(type(h).__name__ != "NullHandler" for h in logger.handlers)
        )
    ]
    assert bypassing == []


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
