"""A job's keys as a TestRunner runs them: on its memory system, in one container.

The runner runs the job as ``samzapy run`` would, but on the in-memory system and with every
task in one container. So:

1. the settings of the application's real systems (their factories, their own keys such as
   a ``kafka`` system's ``connect.timeout.ms``, its ``consumer.*`` and ``producer.*`` client
   options) are checked as ``samzapy run`` checks them, since they are then replaced or
   dropped: a misspelt one fails the test, as it would fail the job (a ``file`` system's
   ``path`` alone is not required: the runner reads no file);
2. every system the application names becomes the runner's memory system, keeping samzapy's
   own settings of it (serdes, offset defaults) and dropping the rest (brokers, security);
3. streams of one name on two systems (a topic mirrored from one Kafka cluster to
   another) would be one stream of the memory namespace: refused, naming both;
4. the job file's placement (``job.container.count``, ``job.container.id``,
   ``job.coordinator.factory``), which only ``samzapy run``'s JobRunner reads, gives way to
   one static container: a job file placing the job in several containers on Kafka is not
   refused for its (memory) intermediate streams living in one process.

A task class's job keeps its config's systems; each memory system of it, its factory given as
``memory`` or as Samza's class name, holds the runner's streams (``memory_namespaces``).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from samzapy.api.errors import ConfigError
from samzapy.config import Config, StreamConfig
from samzapy.config.schema import SAMZA_SYSTEM_FACTORIES
from samzapy.config.validate import check

#: Step 4: one container running every task of the job.
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
    problems = _system_key_problems(config)
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
    keys.update(ONE_CONTAINER)  # 4.
    return keys


def memory_namespaces(config: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """A task job's: the ``namespace`` key of each memory system of ``config`` (the runner's
    own and a task's output's), whatever name its factory is given (``memory``, or Samza's
    class name), so that its streams are the runner's unless the config says otherwise."""
    return {
        key.replace(".samza.factory", ".namespace"): namespace
        for key, value in config.items()
        if key.startswith("systems.") and key.endswith(".samza.factory") and _memory(value)
    }


def _memory(factory: Any) -> bool:
    """Whether ``factory`` (a ``systems.<name>.samza.factory``) names the memory system."""
    name = factory.strip() if isinstance(factory, str) else factory
    return isinstance(name, str) and SAMZA_SYSTEM_FACTORIES.get(name, name) == "memory"


def check_one_namespace(streams: Iterable[StreamConfig]) -> None:
    """Step 3, for the job's ``streams`` (the resolved ``streams.<id>`` entries)."""
    systems: dict[str, dict[str, str]] = {}
    for entry in streams:
        if entry.system is not None:
            systems.setdefault(entry.physical_name, {})[entry.system] = entry.stream_id
    for name, ids in systems.items():
        if len(ids) > 1:
            (one, first), (other, _) = sorted(ids.items())[:2]
            raise ConfigError(
                f"{one}.{name} and {other}.{name} would be one stream of the runner's memory "
                f"system, which holds every system's streams: give one of them another name "
                f"in the test, add_config('streams.{first}.samza.physical.name', ...)",
                key=f"streams.{first}.samza.physical.name",
            )


def _system_key_problems(config: Mapping[str, Any]) -> list[str]:
    """Step 1: what ``samzapy run`` finds wrong with a ``systems.*`` key of ``config``."""
    try:
        check(Config(dict(config)))
    except ConfigError as exc:
        return [p for p in exc.problems if _system_key(p) and not _FILE_PATH.fullmatch(p)]
    return []


def _system_key(problem: str) -> bool:
    """Whether ``problem`` (a validation message, which starts with its key, quoted when it
    is unknown) is about a system's key."""
    return problem.removeprefix("unknown key '").startswith("systems.")


#: The one required key of a system the runner does without.
_FILE_PATH = re.compile(r"systems\.[^ ]+\.path is required for a file system")


__all__ = ["ONE_CONTAINER", "check_one_namespace", "memory_namespaces", "on_memory"]
