"""Directory names a job derives from its keys are checked at load: a job.name or store name
longer than a file system takes is refused naming the key, instead of a start-up failure
whose message says to delete a directory that could never be made."""

from __future__ import annotations

from typing import Any

import pytest

from samzapy.api.errors import ConfigError
from samzapy.config import load_config, resolve

BASE: dict[str, Any] = {
    "job.name": "wc",
    "task.class": "app.tasks:WordCount",
    "task.inputs": ["mem.words"],
    "systems.mem.samza.factory": "memory",
}


def problems(**keys: Any) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as info:
        resolve(load_config(base={**BASE, **keys}))
    return info.value.problems


def test_a_job_name_too_long_for_its_stores_directory_is_refused() -> None:
    found = problems(**{"job.name": "j" * 256, "stores.s.factory": "rocksdb"})
    assert (
        "job.name is 256 bytes long, and it names the directory of the job's stores "
        "(<job.logged.store.base.dir>/<job.name>/<store>/<task>), where a file system takes "
        "at most 255: shorten job.name"
    ) in found


def test_a_store_name_too_long_is_refused_under_its_factory_key() -> None:
    name = "s" * 256
    found = problems(**{f"stores.{name}.factory": "inmemory"})
    assert any(p.startswith(f"store '{'s' * 40}'... has a name of 256 bytes") for p in found)


def test_the_default_file_checkpoint_directory_is_named_after_the_job() -> None:
    found = problems(**{"job.name": "j" * 256, "task.checkpoint.factory": "file"})
    assert any(
        p.startswith("job.name: the file checkpoints' directory './state/")
        and p.endswith("shorten job.name, or set task.checkpoint.dir")
        for p in found
    ), found


def test_a_long_name_that_names_no_directory_passes() -> None:
    resolve(load_config(base={**BASE, "job.name": "j" * 300}))  # no store, no file checkpoints
    resolve(
        load_config(
            base={
                **BASE,
                "task.checkpoint.factory": "file",
                "task.checkpoint.dir": "/tmp/checkpoints",
                "stores.s.factory": "inmemory",
                "job.name": "j" * 255,
            }
        )
    )
