"""Warnings a job logs as it starts, which docs/configuration.md names."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
import structlog
from structlog.testing import capture_logs

from samzapy.cli.main import _loop_factory
from samzapy.config import load_config, resolve
from samzapy.container.plan import intermediate_outputs


def test_an_intermediate_stream_the_job_neither_reads_nor_feeds_is_a_warning() -> None:
    """``streams.<id>.samza.upstream.inputs``: a job whose every input is an intermediate
    stream it reads has no upstream input for another intermediate stream; not reading that
    one either, it would send it no end-of-stream or watermark."""
    config = resolve(
        load_config(
            text=json.dumps(
                {
                    "job.name": "stage-2",
                    "task.class": "samzapy:StreamTask",
                    "task.inputs": ["memory.words"],
                    "systems.memory.samza.factory": "memory",
                    "streams.words.samza.system": "memory",
                    "streams.words.samza.intermediate": True,
                    "streams.counts.samza.system": "memory",
                    "streams.counts.samza.intermediate": True,
                }
            ),
            env={},
        )
    )
    with capture_logs() as logs:
        assert intermediate_outputs(config) == {}
    warned = [e for e in logs if e["event"] == "intermediate_stream_without_upstream"]
    assert [(e["log_level"], e["stream"]) for e in warned] == [("warning", "memory.counts")]
    assert "streams.counts.samza.upstream.inputs" in warned[0]["reason"]


def test_uvloop_missing_is_a_warning_and_the_job_runs_on_asyncio(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``job.loop: uvloop`` (the default) without uvloop installed falls back to asyncio."""
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    with capture_logs() as logs:
        factory, name = _loop_factory("uvloop", structlog.get_logger())
    assert (factory, name) == (asyncio.new_event_loop, "asyncio")
    assert [(e["event"], e["log_level"], e["fallback"]) for e in logs] == [
        ("uvloop_unavailable", "warning", "asyncio")
    ]
