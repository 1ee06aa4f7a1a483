"""A library's log record as one ``library_log`` event: its fields, its level, its rate limit."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

import pytest
from aiokafka.errors import (
    GroupCoordinatorNotAvailableError,
    KafkaConnectionError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

from samzapy.cli.library_logs import (
    LIBRARY_LOG_INTERVAL_S,
    MAX_MESSAGE_CHARS,
    LibraryLogLimiter,
    Suppressed,
    emitted_level,
    is_library,
    library_fields,
    library_key,
    routine,
    short_path,
    suppressed_fields,
)

HEARTBEAT = "Heartbeat failed for group %s because it is rebalancing"


def record(
    name: str,
    msg: str,
    *args: object,
    level: int = logging.ERROR,
    exc_info: logging._SysExcInfoType | None = None,
) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, exc_info)


def raised() -> logging._SysExcInfoType:
    try:
        raise ConnectionError("refused by 127.0.0.1:9")
    except ConnectionError:
        return sys.exc_info()


class TestLibraryFields:
    def test_an_error_is_a_warning_naming_its_logger_and_own_level(self) -> None:
        r = record("aiokafka.consumer.group_coordinator", "Heartbeat failed: %r", "boom")
        assert library_fields(r, failing=False) == {
            "event": "library_log",
            "level": "warning",
            "logger": "aiokafka.consumer.group_coordinator",
            "library_level": "error",
            "message": "Heartbeat failed: 'boom'",
        }

    @pytest.mark.parametrize(
        ("msg", "args"),
        [
            (HEARTBEAT, ("g",)),
            ("Group Coordinator Request failed: %s", (GroupCoordinatorNotAvailableError(),)),
            (
                "OffsetCommit failed for group %s due to group error (%s), will rejoin",
                ("g", RebalanceInProgressError("g")),
            ),
        ],
    )
    def test_the_course_of_a_rebalance_or_a_first_start_is_info_until_the_job_fails(
        self, msg: str, args: tuple[object, ...]
    ) -> None:
        r = record("aiokafka.consumer.group_coordinator", msg, *args, level=logging.WARNING)
        assert routine(r)
        assert library_fields(r, failing=False)["level"] == "info"
        assert library_fields(r, failing=False)["library_level"] == "warning"
        assert library_fields(r, failing=True)["level"] == "warning"
        assert library_key(r) == (r.name, msg)  # not one of the transient errors' template

    @pytest.mark.parametrize(
        ("name", "msg", "args"),
        [
            ("aiokafka.consumer.group_coordinator", "Heartbeat failed: %r", ("x",)),
            # the same message with an error that is no rebalance's
            ("aiokafka", "Group Coordinator Request failed: %s", (KafkaConnectionError(),)),
            (
                "aiokafka.consumer.group_coordinator",
                "OffsetCommit failed for group %s due to group error (%s), will rejoin",
                ("g", UnknownMemberIdError("g")),
            ),
            ("other", HEARTBEAT, ("g",)),  # not aiokafka's
        ],
    )
    def test_other_errors_stay_warnings(
        self, name: str, msg: str, args: tuple[object, ...]
    ) -> None:
        r = record(name, msg, *args)
        assert not routine(r)
        assert library_fields(r, failing=False)["level"] == "warning"

    @pytest.mark.parametrize(
        ("level", "healthy", "failing"),
        [
            (logging.DEBUG, "debug", "debug"),
            (logging.INFO, "info", "info"),
            (logging.WARNING, "warning", "warning"),
            (logging.ERROR, "warning", "error"),
            (logging.CRITICAL, "warning", "critical"),
        ],
    )
    def test_the_level_is_capped_at_warning_until_the_job_fails(
        self, level: int, healthy: str, failing: str
    ) -> None:
        r = record("asyncio", "x", level=level)
        assert library_fields(r, failing=False)["level"] == healthy
        assert library_fields(r, failing=True)["level"] == failing
        assert library_fields(r, failing=False)["library_level"] == failing
        assert emitted_level(level, failing=False) == min(level, logging.WARNING)

    def test_an_exception_is_three_short_fields_without_its_traceback(self) -> None:
        r = record("aiokafka", "Unexpected error in heartbeat routine", exc_info=raised())
        fields = library_fields(r, failing=False, suppressed=4)
        assert fields["suppressed"] == 4
        assert fields["error_type"] == "ConnectionError"
        assert fields["error"] == "refused by 127.0.0.1:9"
        assert re.fullmatch(r".*test_library_logs\.py:\d+ in raised", fields["error_at"])
        assert "exc_info" not in fields
        kept = library_fields(r, failing=False, keep_traceback=True)
        assert kept["exc_info"] is r.exc_info

    def test_a_long_message_is_cut_and_a_bad_one_still_shown(self) -> None:
        fields = library_fields(record("x", "%s", "y" * 5000), failing=False)
        assert fields["message"] == "y" * MAX_MESSAGE_CHARS + "... (3000 more characters)"
        bad = library_fields(record("x", "needs %d", "text"), failing=False)
        assert bad["message"] == "needs %d ('text',)"

    def test_samzapy_loggers_are_not_libraries(self) -> None:
        assert not is_library("samzapy")
        assert not is_library("samzapy.kafka")
        assert is_library("samzapy_extras")
        assert is_library("aiokafka.conn") and is_library("py.warnings") and is_library("root")

    def test_short_path_is_relative_to_the_import_path(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        site = str(Path("/opt/py/site-packages"))
        monkeypatch.setattr(sys, "path", ["/opt", site, ""])
        assert short_path(f"{site}/aiokafka/conn.py") == "aiokafka/conn.py"
        assert short_path("/elsewhere/x.py") == "/elsewhere/x.py"

    def test_short_path_at_interpreter_exit_is_the_whole_path(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # sys.path is None while the interpreter finalizes, when asyncio may still log
        # ("Task exception was never retrieved"): the line keeps its path, not a traceback.
        monkeypatch.setattr(sys, "path", None)
        assert short_path("/opt/py/asyncio/base_events.py") == "/opt/py/asyncio/base_events.py"


class TestLibraryKey:
    def test_the_template_is_the_unformatted_message(self) -> None:
        assert library_key(record("aiokafka.consumer", HEARTBEAT, "g1")) == library_key(
            record("aiokafka.consumer", HEARTBEAT, "g2")
        )
        assert library_key(record("a", "x %s", 1)) != library_key(record("b", "x %s", 1))

    def test_aiokafkas_transient_connection_errors_are_one_template(self) -> None:
        keys = {
            library_key(record(name, msg, 1, "x"))
            for name, msg in [
                ("aiokafka.conn", "Unable connect to node with id %s: %s"),
                ("aiokafka", "Unable to update metadata from %s"),
                ("aiokafka.consumer.fetcher", "Failed fetch messages from %s: %s"),
            ]
        }
        assert keys == {("aiokafka", "transient connection errors")}

    def test_a_bare_placeholder_uses_the_message_and_only_its_first_line(self) -> None:
        warned = record("py.warnings", "%s", "job.py:3: DeprecationWarning: old\n  old()\n")
        assert library_key(warned) == ("py.warnings", "job.py:3: DeprecationWarning: old")
        multi = record("asyncio", "Task exception was never retrieved\nfuture: <Task 0x1>")
        assert library_key(multi) == ("asyncio", "Task exception was never retrieved")


class TestLibraryLogLimiter:
    KEY = ("aiokafka.consumer.group_coordinator", HEARTBEAT)

    def test_one_record_per_template_per_window_the_next_carrying_the_count(self) -> None:
        limiter = LibraryLogLimiter(interval_s=60)
        passed = []
        for second in range(150):  # a record every second for 150 s
            suppressed = limiter.admit(self.KEY, logging.ERROR, float(second))
            if suppressed is not None:
                passed.append((second, suppressed))
        assert passed == [(0, 0), (60, 59), (120, 59)]

    def test_routine_records_left_out_are_reported_at_info(self) -> None:
        limiter = LibraryLogLimiter(interval_s=60)
        for second in range(3):
            limiter.admit(self.KEY, logging.WARNING, float(second), routine=True)
        [left_out] = limiter.due(61.0)
        assert left_out.routine
        fields = suppressed_fields(left_out, failing=False, window_s=60)
        assert (fields["level"], fields["library_level"]) == ("info", "warning")
        limiter.admit(self.KEY, logging.WARNING, 100.0, routine=True)
        limiter.admit(self.KEY, logging.WARNING, 101.0, routine=False)  # not all routine
        [mixed] = limiter.due(161.0)
        assert suppressed_fields(mixed, failing=False, window_s=60)["level"] == "warning"

    def test_templates_are_limited_apart(self) -> None:
        limiter = LibraryLogLimiter(interval_s=60)
        assert limiter.admit(("a", "x"), logging.ERROR, 0.0) == 0
        assert limiter.admit(("a", "y"), logging.ERROR, 1.0) == 0
        assert limiter.admit(("b", "x"), logging.ERROR, 2.0) == 0
        assert limiter.admit(("a", "x"), logging.ERROR, 3.0) is None

    def test_a_closed_window_is_reported_once_when_due(self) -> None:
        limiter = LibraryLogLimiter(interval_s=60)
        limiter.admit(self.KEY, logging.WARNING, 0.0)
        limiter.admit(self.KEY, logging.ERROR, 10.0)
        limiter.admit(self.KEY, logging.WARNING, 20.0)
        assert limiter.due(59.9) == []
        assert limiter.due(60.0) == [Suppressed(*self.KEY, count=2, levelno=logging.ERROR)]
        assert limiter.due(61.0) == []
        # Reported already: the template's next record opens a window without a count.
        assert limiter.admit(self.KEY, logging.ERROR, 70.0) == 0

    def test_a_window_without_records_left_out_is_not_reported(self) -> None:
        limiter = LibraryLogLimiter(interval_s=60)
        limiter.admit(self.KEY, logging.ERROR, 0.0)
        assert limiter.due(1000.0) == []
        assert limiter.drain() == []

    def test_drain_reports_open_windows_too(self) -> None:
        limiter = LibraryLogLimiter(interval_s=60)
        limiter.admit(("a", "x"), logging.ERROR, 0.0)
        limiter.admit(("a", "x"), logging.ERROR, 1.0)
        limiter.admit(("b", "y"), logging.WARNING, 0.0)
        assert limiter.drain() == [Suppressed("a", "x", 1, logging.ERROR)]
        assert limiter.drain() == []
        assert limiter.admit(("a", "x"), logging.ERROR, 2.0) == 0

    def test_the_default_window_is_a_minute(self) -> None:
        assert LibraryLogLimiter().interval_s == LIBRARY_LOG_INTERVAL_S == 60.0


def test_the_report_of_what_was_left_out() -> None:
    left_out = Suppressed("aiokafka", "transient connection errors", 42, logging.ERROR)
    assert suppressed_fields(left_out, failing=False, window_s=60.0) == {
        "event": "library_log_suppressed",
        "level": "warning",
        "logger": "aiokafka",
        "library_level": "error",
        "template": "transient connection errors",
        "suppressed": 42,
        "window_s": 60.0,
    }
    assert suppressed_fields(left_out, failing=True, window_s=60.0)["level"] == "error"
