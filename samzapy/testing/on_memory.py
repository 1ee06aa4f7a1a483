"""A job's keys as a TestRunner runs them: on its memory system, in one container.

The runner runs the job as ``samzapy run`` would, but on the in-memory system and with every
task in one container. So:

1. the settings of the application's real systems (a ``kafka`` system's ``consumer.*`` and
   ``producer.*`` client options) are checked as ``samzapy run`` checks them, since they are
   then dropped: a misspelt one fails the test, as it would fail the job;
2. every system the application names becomes the runner's memory system, keeping samzapy's
   own settings of it (serdes, offset defaults) and dropping the rest (brokers, security);
3. the job file's placement (``job.container.count``, ``job.container.id``,
   ``job.coordinator.factory``), which only ``samzapy run``'s JobRunner reads, gives way to
   one static container: a job file placing the job in several containers on Kafka is not
   refused for its (memory) intermediate streams living in one process.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from samzapy.api.errors import ConfigError
from samzapy.config import Config

#: Step 3: one container running every task of the job.
ONE_CONTAINER: dict[str, Any] = {
    "job.coordinator.factory": "static",
    "job.container.count": 1,
    "job.container.id": "0",
}

#: Adapters whose client options are checked (step 1): factory name -> module with
#: ``client_option_problems(system_name, keys)``, as ``samzapy validate`` checks them.
_CLIENT_OPTIONS = {"kafka": "samzapy.system.kafka.settings"}


def on_memory(config: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """``config`` (an application's job keys) with every system on the memory system of
    ``namespace`` and the job in one container; raise ConfigError for the real systems'
    client options ``samzapy run`` would refuse."""
    systems = {k.split(".")[1] for k in config if k.startswith("systems.")}
    problems: list[str] = []
    for system in sorted(systems):  # 1.
        module = _CLIENT_OPTIONS.get(str(config.get(f"systems.{system}.samza.factory")))
        if module is not None:
            check = importlib.import_module(module).client_option_problems
            problems.extend(check(system, Config(dict(config)).subset(f"systems.{system}")))
    if problems:
        text = problems[0] if len(problems) == 1 else "\n".join(problems)
        raise ConfigError(text, key=text.split(" ", 1)[0], problems=tuple(problems))
    keys: dict[str, Any] = dict(config)
    for system in systems:  # 2.
        keys[f"systems.{system}.samza.factory"] = "memory"
        keys[f"systems.{system}.namespace"] = namespace
    for key in [k for k in keys if k.startswith("systems.")]:
        setting = key.split(".", 2)[2]
        if setting != "namespace" and not setting.startswith(("samza.", "default.stream.")):
            del keys[key]
    keys.update(ONE_CONTAINER)  # 3.
    return keys


__all__ = ["ONE_CONTAINER", "on_memory"]
