"""The job's store directory ``<job.logged.store.base.dir>/<job.name>`` is claimed by its owner
file before any store opens (container/store_directory.py): a job of the same name and
another id, its standbys too, is refused before any task runs."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from samzapy import InitableTask, StreamTask
from samzapy.api.errors import JobCollisionError
from samzapy.config import load_config, resolve
from samzapy.container.store_directory import DIRECTORY_ID_FILE, store_directory_id
from samzapy.coordinator.standby import Standbys
from samzapy.metrics import Health, MetricsRegistry
from samzapy.system.inmemory import InMemoryBroker
from samzapy.testing import TestRunner

OWNER = ".samzapy-owner"


class Count(InitableTask, StreamTask):
    """Counts its messages in its store ``counts``; ``Count.inits`` counts its ``init`` calls."""

    inits = 0

    def init(self, context: Any) -> None:
        Count.inits += 1
        self.store = context.get_store("counts")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self.store.put("messages", (self.store.get("messages") or 0) + 1)


def stores(tmp_path: Path, factory: str, job_id: str) -> dict[str, Any]:
    return {
        "job.name": "twin",
        "job.id": job_id,
        "stores.counts.factory": factory,
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "job.logged.store.base.dir": str(tmp_path / "state"),
    }


def test_a_job_of_another_id_is_refused_the_store_directory_before_any_task_runs(
    tmp_path: Path,
) -> None:
    Count.inits = 0
    TestRunner(Count, stores(tmp_path, "rocksdb", "1")).add_input("in", {0: ["a"]}).run()
    assert Count.inits == 1
    # Another container of the same job (or its restart) shares it.
    TestRunner(Count, stores(tmp_path, "rocksdb", "1")).add_input("in", {0: ["b"]}).run()
    assert Count.inits == 2
    second = TestRunner(Count, stores(tmp_path, "rocksdb", "2")).add_input("in", {0: ["c"]})
    with pytest.raises(JobCollisionError, match=r"job\.logged\.store\.base\.dir: store directory"):
        second.run()
    assert Count.inits == 2
    owner = json.loads((tmp_path / "state" / "twin" / OWNER).read_text())
    assert owner == {"job.id": "1", "job.name": "twin", "version": 1}


def test_a_job_whose_stores_keep_nothing_on_disk_claims_nothing(tmp_path: Path) -> None:
    TestRunner(Count, stores(tmp_path, "inmemory", "1")).add_input("in", {0: ["a"]}).run()
    TestRunner(Count, stores(tmp_path, "inmemory", "2")).add_input("in", {0: ["a"]}).run()
    assert not (tmp_path / "state").exists()


def test_standbys_are_refused_another_job_s_store_directory(tmp_path: Path) -> None:
    """A container's standbys (which start before its tasks) open their copies in the same
    directory: they claim it too."""
    namespace = f"standby-owner-{uuid.uuid4().hex}"

    def standbys(job_id: str) -> Standbys:
        keys = {
            **stores(tmp_path, "rocksdb", job_id),
            "task.class": f"{__name__}:Count",
            "task.inputs": ["mem.in"],
            "task.checkpoint.factory": "memory",
            "stores.counts.changelog": "mem.counts-changelog",
            "systems.mem.samza.factory": "memory",
            "systems.mem.namespace": namespace,
        }
        config = resolve(load_config(base=keys))
        return Standbys(config, metrics=MetricsRegistry(), health=Health())

    async def run() -> None:
        InMemoryBroker.for_namespace(namespace).create_stream("in", 1)
        first = standbys("1")
        await first.start()
        await first.stop()
        # Its metadata names the directory's id: the leader compares (group_members.py).
        assert first.directory_id == store_directory_id(tmp_path / "state" / "twin")
        with pytest.raises(JobCollisionError, match=r"this job \(job.name 'twin' job.id '2'\)"):
            await standbys("2").start()

    try:
        asyncio.run(run())
    finally:
        InMemoryBroker.drop_namespace(namespace)
    assert json.loads((tmp_path / "state" / "twin" / OWNER).read_text())["job.id"] == "1"


def test_containers_sharing_the_store_directory_read_one_id_and_others_another(
    tmp_path: Path,
) -> None:
    shared, own = tmp_path / "shared", tmp_path / "own"
    shared.mkdir()
    own.mkdir()
    first = store_directory_id(shared)
    assert first is not None and store_directory_id(shared) == first  # a second container
    assert store_directory_id(own) not in (None, first)
    assert sorted(p.name for p in shared.iterdir()) == [DIRECTORY_ID_FILE]  # no temporary left
