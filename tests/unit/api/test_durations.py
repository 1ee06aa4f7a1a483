"""A high-level API duration that is not a whole number of milliseconds is refused at the
call, naming the argument (and the operator) and the value, as one of zero is: the API works
in ms and would otherwise round ``timedelta(microseconds=1500)`` down to 1 ms."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from samzapy import (
    ConfigError,
    KafkaSystemDescriptor,
    StreamApplicationDescriptor,
    TableRetryPolicy,
    Triggers,
    Windows,
)

KAFKA = KafkaSystemDescriptor("kafka")
ODD = timedelta(microseconds=1500)
TINY = timedelta(microseconds=1)


class ById:
    def get_first_key(self, message: Any) -> Any:
        return message

    def get_second_key(self, message: Any) -> Any:
        return message

    def apply(self, first: Any, second: Any) -> Any:
        return first


def join_with_ttl(ttl: timedelta) -> Any:
    d = StreamApplicationDescriptor({})
    left = d.get_input_stream(KAFKA.get_input_descriptor("left", "json"))
    right = d.get_input_stream(KAFKA.get_input_descriptor("right", "json"))
    return left.join(right, ById(), "string", "json", "json", ttl, "j")


CALLS: list[tuple[Callable[[timedelta], Any], str]] = [
    (lambda t: Windows.tumbling_window(t), r"tumbling_window's interval"),
    (lambda t: Windows.keyed_tumbling_window(str, t), r"keyed_tumbling_window's interval"),
    (lambda t: Windows.session_window(t), r"session_window's session_gap"),
    (lambda t: Windows.keyed_session_window(str, t), r"keyed_session_window's session_gap"),
    (
        lambda t: Windows.tumbling_window(timedelta(seconds=1)).with_event_time(t),
        r"with_event_time's allowed_lateness",
    ),
    (lambda t: Triggers.time_since_first_message(t), r"time_since_first_message's duration"),
    (lambda t: Triggers.time_since_last_message(t), r"time_since_last_message's duration"),
    (
        lambda t: KAFKA.get_input_descriptor("e").with_watermarks(t),
        r"stream 'e': max_out_of_orderness",
    ),
    (
        lambda t: KAFKA.get_input_descriptor("e").with_watermarks(idle_timeout=t),
        r"stream 'e': idle_timeout",
    ),
    (join_with_ttl, r"the ttl of join 'j'"),
    (lambda t: TableRetryPolicy().with_fixed_backoff(t), r"the fixed back-off"),
    (lambda t: TableRetryPolicy().with_jitter(t), r"the jitter"),
]


@pytest.mark.parametrize(("call", "what"), CALLS)
@pytest.mark.parametrize("value", [ODD, TINY], ids=["1.5ms", "1us"])
def test_a_duration_not_a_whole_number_of_ms_is_refused_naming_it(
    call: Callable[[timedelta], Any], what: str, value: timedelta
) -> None:
    match = what + re.escape(f" must be a whole number of milliseconds, got {value!r}")
    with pytest.raises(ConfigError, match=match):
        call(value)


@pytest.mark.parametrize(("call", "what"), CALLS)
def test_a_whole_number_of_ms_is_taken(call: Callable[[timedelta], Any], what: str) -> None:
    call(timedelta(milliseconds=2))
