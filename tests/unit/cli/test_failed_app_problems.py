"""An application whose describe() fails is one problem of `samzapy validate`, `plan` and
`run`: the job file's keys are not blamed for what the application would have given."""

from __future__ import annotations

from pathlib import Path

import pytest

from samzapy.cli.problems import check_job

APP = """
from samzapy import KafkaSystemDescriptor, StreamApplication

KAFKA = KafkaSystemDescriptor("kafka")


class Broken(StreamApplication):
    def describe(self, app_desc):
        app_desc.get_input_stream(KAFKA.get_input_descriptor("in", "json")).sink(print)
        raise KeyError("app.threshold")
"""


def test_an_application_that_fails_is_not_blamed_on_the_systems_it_would_have_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The job file gives the broker and a store's changelog on the application's Kafka
    # system: the factory is the descriptor's, so the one problem is describe's.
    (tmp_path / "broken_app.py").write_text(APP)
    monkeypatch.syspath_prepend(str(tmp_path))
    job = tmp_path / "job.yaml"
    job.write_text(
        "job.name: app\napp.class: broken_app:Broken\n"
        "systems.kafka.bootstrap.servers: 127.0.0.1:9092\n"
        "stores.seen.factory: inmemory\nstores.seen.changelog: kafka.seen-changelog\n"
    )
    (problem,) = check_job(str(job), []).problems
    assert problem.startswith("app.class: describe() of broken_app:Broken failed: KeyError")
