"""What a job sets that samzapy would never use: hooks without their interface, and keys that
do nothing beside the others (``samzapy.config.no_effect``)."""

from __future__ import annotations

from typing import Any

import pytest

from samzapy import (
    AsyncStreamTask,
    ClosableTask,
    EndOfStreamListenerTask,
    InitableTask,
    StreamTask,
    WindowableTask,
)
from samzapy.config.no_effect import HOOKS, keys_without_effect, methods_never_called


class Complete(StreamTask, InitableTask, WindowableTask, ClosableTask, EndOfStreamListenerTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None: ...
    def init(self, context: Any) -> None: ...
    def window(self, collector: Any, coordinator: Any) -> None: ...
    def close(self) -> None: ...
    def on_end_of_stream(self, collector: Any, coordinator: Any) -> None: ...


class Forgetful(StreamTask):
    """Each hook samzapy calls, without one of the interfaces that has it called."""

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None: ...
    def init(self, context: Any) -> None: ...
    def window(self, collector: Any, coordinator: Any) -> None: ...
    def close(self) -> None: ...
    def on_end_of_stream(self, collector: Any, coordinator: Any) -> None: ...
    def on_watermark(self, watermark: int, collector: Any, coordinator: Any) -> None: ...
    def on_stream_watermark(self, *args: Any) -> None: ...
    async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None: ...


class AsyncWithProcess(AsyncStreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None: ...


def test_a_task_with_every_interface_it_needs_has_nothing_never_called() -> None:
    assert methods_never_called(Complete) == []


def test_each_hook_without_its_interface_is_named_with_the_base_to_add() -> None:
    found = dict(methods_never_called(Forgetful))
    assert sorted(found) == sorted(m for m, _ in HOOKS if m != "process")
    assert "add ClosableTask to its bases" in found["close"]
    assert "add WindowableTask to its bases" in found["window"]
    assert "subclass AsyncStreamTask instead" in found["process_async"]


def test_an_async_task_s_process_is_never_called() -> None:
    ((method, why),) = methods_never_called(AsyncWithProcess)
    assert method == "process"
    assert "rename it process_async" in why


def test_an_attribute_that_is_not_callable_is_no_hook() -> None:
    class WithData(StreamTask):
        close = None
        window = 5

    assert methods_never_called(WithData) == []


DEFAULTS = {
    "task.processing.guarantee": "at-least-once",
    "task.window.ms": -1,
    "task.max.concurrency": 1,
    "job.container.thread.pool.size": 0,
}


def _without_effect(set_keys: dict[str, Any], task_class: type | None) -> list[str]:
    return [k for k, _ in keys_without_effect(set_keys, {**DEFAULTS, **set_keys}, task_class)]


@pytest.mark.parametrize(
    ("keys", "task_class", "expected"),
    [
        ({"task.transaction.timeout.ms": 90000}, None, ["task.transaction.timeout.ms"]),
        (
            {"task.transaction.timeout.ms": 90000, "task.processing.guarantee": "exactly-once"},
            None,
            [],
        ),
        ({"task.window.ms": 1000}, Forgetful, ["task.window.ms"]),
        ({"task.window.ms": 1000}, Complete, []),
        ({"task.window.ms": -1}, Forgetful, []),
        ({"task.max.concurrency": 4}, Complete, ["task.max.concurrency"]),
        ({"task.max.concurrency": 4}, AsyncWithProcess, []),
        ({"task.max.concurrency": 1}, Complete, []),
        (
            {"job.container.thread.pool.size": 4},
            AsyncWithProcess,
            ["job.container.thread.pool.size"],
        ),
        ({"job.container.thread.pool.size": 4}, Complete, []),
        ({"job.container.thread.pool.size": 1}, AsyncWithProcess, []),
        # An application's operator task uses each of these as it needs.
        ({"task.window.ms": 1000, "task.max.concurrency": 4}, None, []),
    ],
)
def test_keys_without_effect(
    keys: dict[str, Any], task_class: type | None, expected: list[str]
) -> None:
    assert _without_effect(keys, task_class) == expected


def test_a_default_value_the_file_does_not_set_is_never_reported() -> None:
    values = {**DEFAULTS, "task.window.ms": 1000, "task.max.concurrency": 4}
    assert keys_without_effect({}, values, Forgetful) == []
