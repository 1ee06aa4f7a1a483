"""An operator function's close() is called only once its init(context) returned: a task whose
start failed (a table's init, or another function's) does not close functions it never
initialised (as Samza closes only the operator graph it built)."""

from __future__ import annotations

from typing import Any

import pytest
from test_apps import run
from test_table_apps import ENRICHED, VIEWS

from samzapy import KV, RemoteTableDescriptor, StreamApplicationDescriptor, TaskError

EVENTS: list[str] = []


class Recorded:
    """A map function that records its life cycle; its close needs what its init made."""

    def __init__(self, name: str, fails: bool = False) -> None:
        self.name, self.fails = name, fails

    def init(self, context: Any) -> None:
        EVENTS.append(f"{self.name}.init")
        if self.fails:
            raise RuntimeError(f"{self.name} cannot start")
        self.client = object()

    def apply(self, kv: KV) -> KV:
        return kv

    def close(self) -> None:
        EVENTS.append(f"{self.name}.close")
        del self.client  # an AttributeError when init never ran


class NoService:
    def init(self, context: Any) -> None:
        raise RuntimeError("no credentials")

    async def get_async(self, key: Any) -> Any:
        return None


def test_functions_after_a_failed_init_are_not_closed() -> None:
    EVENTS.clear()

    def app(d: StreamApplicationDescriptor) -> None:
        out = d.get_output_stream(ENRICHED)
        stream = d.get_input_stream(VIEWS).map(Recorded("first"))
        stream.map(Recorded("second", fails=True)).map(Recorded("third")).send_to(out)

    with pytest.raises(TaskError, match="second cannot start") as caught:
        run(app, [(VIEWS, [KV("ann", "/a")])], {ENRICHED: 1})
    assert EVENTS == ["first.init", "second.init", "first.close"]
    assert "close" not in str(caught.value)


def test_no_function_is_closed_when_a_tables_init_failed() -> None:
    EVENTS.clear()

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_table(RemoteTableDescriptor("service").with_read_function(NoService()))
        d.get_input_stream(VIEWS).map(Recorded("only")).send_to(d.get_output_stream(ENRICHED))

    with pytest.raises(TaskError, match="no credentials"):
        run(app, [(VIEWS, [KV("ann", "/a")])], {ENRICHED: 1})
    assert EVENTS == []
