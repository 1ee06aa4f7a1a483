"""Every configuration problem of a job file: the one checking path of ``validate`` and ``run``.

``samzapy validate`` prints the problems ``check_job`` finds and ``samzapy run`` logs the same
list as one ``config_invalid`` event before it starts anything, so the two commands agree on
any file, whatever combination of mistakes it holds. The check needs no broker and writes
nothing; it imports the classes the job names and builds its factories, as a run does first:

1. read the file, interpolate ``${VAR}`` and apply ``--set`` (a failure here ends the check:
   nothing else can be read); the values of secret keys are scrubbed from here on;
2. an application (``app.class``): import, create, describe and plan it, merging its keys
   (a malformed ``app.class`` is left to step 3, which reports it);
3. resolve the configuration; when the application failed, the file's own keys are checked
   (``task.inputs`` and systems' factories, which the application gives, aside);
4. an application's task factory over the resolved streams (a task application's factory
   that is not a task class makes its first task's instance now, checked, and keeps it for
   that task; a task class is checked as ``task.class`` is); for a task job, import
   the task class (also when other keys are wrong, unless ``task.class`` itself is among them);
5. each system's client options (kafka's ``consumer.*``/``producer.*``), from the file's keys
   as written, so a misspelt one is reported whatever else is wrong and whatever its value;
6. once resolved: build each system's factory (all its keys), each metrics reporter (not
   started), registered serde, store factory (and RocksDB options) and the checkpoint
   manager, and place this container (``job.container.id`` within ``job.container.count``);
7. a job with no problem: warn (``method_never_called``, ``key_without_effect``) of a task
   class's (or a task application's task's) hook that lacks its interface and of keys that
   do nothing beside the others (``config/no_effect.py``), of checkpoints that live in
   this process only (``checkpoints_in_memory``, ``memory_streams.py``), and of a metrics
   or progress interval under a second (``interval_under_a_second``, ``config/intervals.py``).

What needs the outside world stays with the run: the brokers, the topics, the metrics port.
A problem found twice by two steps (a client option by steps 5 and 6) is listed once.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from samzapy.api.errors import ConfigError
from samzapy.cli.logging import add_secrets
from samzapy.cli.memory_streams import memory_checkpoints
from samzapy.config import Config, load_config, resolve
from samzapy.config.classes import (
    APP_CLASS_KEY,
    TASK_CLASS_KEY,
    is_application,
    load_task_class,
    split_class_path,
)
from samzapy.config.intervals import short_intervals
from samzapy.config.no_effect import keys_without_effect, methods_never_called
from samzapy.config.schema import NAMESPACES
from samzapy.config.secrets import secret_values

if TYPE_CHECKING:
    from samzapy.config import ResolvedConfig
    from samzapy.operators.application import Application
    from samzapy.system.ports import SystemFactory

#: Adapters whose client options are checked from the file's keys (step 5): factory short
#: name -> module with ``client_option_problems(system_name, keys)``. Imported by name, as
#: ``system.registry`` imports the kafka system, so that the CLI never imports aiokafka itself.
_CLIENT_OPTIONS = {"kafka": "samzapy.system.kafka.settings"}


@dataclass
class JobCheck:
    """What checking a job file found: the resolved configuration and the application when
    they could be built, the task factory an application gives, and every problem."""

    path: str
    resolved: ResolvedConfig | None = None
    app: Application | None = None
    task_factory: Callable[[], Any] | None = None
    #: A task job's class, once loaded; a task application's, once its factory made one.
    task_class: type | None = None
    errors: list[ConfigError] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        """One line per problem, in the order found, each once."""
        return list(dict.fromkeys(p for error in self.errors for p in error.problems))

    @property
    def causes(self) -> list[BaseException]:
        """What raised behind the problems (a task module that failed to import, say)."""
        return [e.__cause__ for e in self.errors if e.__cause__ is not None]

    def error(self) -> ConfigError:
        """One ConfigError listing every problem (its cause: the first problem's cause)."""
        problems = self.problems
        text = (
            problems[0]
            if len(problems) == 1
            else (
                f"{self.path}: {len(problems)} configuration problems:\n"
                + "\n".join(f"  {p}" for p in problems)
            )
        )
        first_key = next((e.key for e in self.errors if e.key is not None), None)
        error = ConfigError(text, key=first_key, problems=tuple(problems))
        causes = self.causes
        error.__cause__ = causes[0] if causes else None
        return error

    def _add(self, error: ConfigError, *, leave_out: Callable[[str], bool] | None = None) -> None:
        if leave_out is not None:
            kept = tuple(p for p in error.problems if not leave_out(p))
            if not kept:
                return
            if kept != error.problems:
                error = ConfigError(str(error), key=error.key, problems=kept)
        self.errors.append(error)


def load_job(job_yaml: str, overrides: Sequence[str]) -> JobCheck:
    """Steps 1 to 3: the file read, the application described and the configuration resolved
    (what the operator tools, tail and checkpoint, need)."""
    check = JobCheck(job_yaml)
    raw = _read(check, job_yaml, overrides)
    if raw is None:
        return check
    _resolve(check, raw)
    return check


def check_job(job_yaml: str, overrides: Sequence[str]) -> JobCheck:
    """Steps 1 to 6: every configuration problem of the job file (see the module docstring)."""
    check = JobCheck(job_yaml)
    raw = _read(check, job_yaml, overrides)
    if raw is None:
        return check
    config = _resolve(check, raw)
    resolved = check.resolved
    if check.app is not None and resolved is not None:  # 4.
        with _collected(check):
            factory = check.app.task_factory(resolved)
            check.task_factory = factory
            probe = getattr(factory, "probe", None)  # a task application's TaskFactory
            if probe is not None:
                check.task_class = probe()
    elif not is_application(raw):
        _task_class(check, raw)
    for name, factory in _system_factories(config).items():  # 5.
        check.errors.extend(_client_options(name, factory, config))
    if resolved is not None:  # 6.
        _built(check, resolved)
        if not check.errors:
            _without_effect(raw, resolved, check.task_class)
    return check


def _read(check: JobCheck, job_yaml: str, overrides: Sequence[str]) -> Config | None:
    """1."""
    path = Path(job_yaml)
    if not path.is_file():
        check.errors.append(ConfigError(f"job file {job_yaml!r} does not exist or is not a file"))
        return None
    try:
        raw = load_config(path, overrides=overrides)
    except ConfigError as exc:
        check.errors.append(exc)
        return None
    except OSError as exc:
        check.errors.append(ConfigError(f"job file {job_yaml!r} cannot be read: {exc}"))
        return None
    # Before anything can log the config's values: from here on they are scrubbed.
    add_secrets(secret_values(raw))
    _near_namespaces(raw)
    return raw


def _near_namespaces(raw: Config) -> None:
    """Warn of keys that look like samzapy's but are outside its namespaces (``metric.``,
    ``Task.``): they are the job's own, which samzapy never reads, so a typo there would
    otherwise pass in silence. One warning per misspelt namespace."""
    warned: set[str] = set()
    for key in raw:
        head, _, rest = key.partition(".")
        if head in NAMESPACES or head == "app" or head in warned:
            continue
        close = difflib.get_close_matches(head.lower(), sorted(NAMESPACES), n=1, cutoff=0.75)
        if close:
            warned.add(head)
            structlog.get_logger("samzapy.cli").warning(
                "key_outside_namespaces",
                key=key,
                did_you_mean=f"{close[0]}.{rest}",
                reason=f"samzapy reads only {', '.join(sorted(NAMESPACES))} keys (and app.class): "
                "the others are the job's own",
            )


def _resolve(check: JobCheck, raw: Config) -> Config:
    """2. and 3.; the configuration the later steps read (the application's merged in)."""
    config, described = raw, not is_application(raw)
    if is_application(raw) and _class_path(raw.get(APP_CLASS_KEY), APP_CLASS_KEY):
        # Imported here: a task-class job's start-up does without the operators and tables.
        from samzapy.operators.application import load_application

        try:
            check.app = load_application(raw)
            config, described = check.app.config, True
        except ConfigError as exc:
            check.errors.append(exc)
    try:
        check.resolved = resolve(config)
    except ConfigError as exc:
        check._add(exc, leave_out=None if described else _given_by_an_application)
    return config


def _given_by_an_application(problem: str) -> bool:
    """A problem of the job file's own keys that the application, had it been described,
    may have settled: task.inputs, which it gives, and a system's factory, which its system
    descriptors give (the file may set only the broker). Reported, if still there, once the
    application's own problem is fixed."""
    return (
        problem.startswith("task.inputs ")
        or problem.endswith("has no factory")
        or "', which is not defined (set systems." in problem
    )


def _task_class(check: JobCheck, raw: Config) -> None:
    """4. for a task job: loaded unless ``task.class`` is missing or malformed, which
    resolving has reported."""
    if any(p.startswith(TASK_CLASS_KEY) for p in check.problems):
        return
    path: Any = check.resolved.task.task_class if check.resolved else raw.get(TASK_CLASS_KEY)
    if not _class_path(path, TASK_CLASS_KEY):
        return
    with _collected(check):
        check.task_class = load_task_class(path)


def _class_path(path: Any, key: str) -> bool:
    """Whether ``path`` can be imported at all: a malformed one is left to resolving, which
    reports it (once: loading would report it again, in other words)."""
    try:
        split_class_path(path, key=key)
    except ConfigError:
        return False
    return True


def _system_factories(config: Config) -> dict[str, Any]:
    """Each system named in ``config`` and its ``samza.factory`` as written."""
    found: dict[str, Any] = {}
    for key, value in config.items():
        parts = key.split(".")
        if len(parts) == 4 and parts[0] == "systems" and parts[2:] == ["samza", "factory"]:
            found[parts[1]] = value
    return found


def _client_options(name: str, factory: Any, config: Config) -> list[ConfigError]:
    """5. for one system."""
    module_name = _CLIENT_OPTIONS.get(factory) if isinstance(factory, str) else None
    if module_name is None:
        return []
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return []  # building the factory in step 6 says what is missing
    problems = module.client_option_problems(name, config.subset(f"systems.{name}"))
    return [ConfigError(p) for p in problems]


def _built(check: JobCheck, resolved: ResolvedConfig) -> None:
    """6."""
    from samzapy.checkpoint.registry import checkpoint_manager
    from samzapy.container.systems import system_factory
    from samzapy.metrics.reporter import reporter_for
    from samzapy.storage.registry import store_factory_for
    from samzapy.system.serde import SerdeRegistry

    factories: dict[str, SystemFactory] = {}
    for name in resolved.systems:
        with _collected(check):
            factories[name] = system_factory(resolved, name)
    metrics = resolved.metrics
    for reporter in metrics.reporters:
        with _collected(check):
            reporter_for(
                reporter,
                interval_ms=metrics.reporter_interval_ms,
                host=metrics.prometheus_host,
                port=metrics.prometheus_port,
            )
    serdes = SerdeRegistry(resolved.serializers)
    for serde in resolved.serializers:
        with _collected(check):
            serdes.get(serde)
    for store in resolved.stores.values():
        with _collected(check):
            store_factory_for(store.name, store.factory)
            if isinstance(store.factory, str) and store.factory.strip() == "rocksdb":
                options = importlib.import_module("samzapy.storage.rocksdb.options")
                options.RocksDBSettings.from_options(store.name, store.options)
    if len(factories) == len(resolved.systems):  # else the checkpoint system may be missing
        with _collected(check):
            checkpoint_manager(resolved, factories, resolved.job.name)
    from samzapy.coordinator.identity import STATIC, container_index, coordinator_of

    if coordinator_of(resolved) == STATIC:
        with _collected(check):
            container_index(resolved)


def _without_effect(raw: Config, resolved: ResolvedConfig, task_class: type | None) -> None:
    """7. (a job with no problem): warn of what the job sets that would never be used, or
    not as meant (checkpoints in memory, an interval under a second)."""
    log = structlog.get_logger("samzapy.cli")
    if task_class is not None:
        for method, why in methods_never_called(task_class):
            log.warning(
                "method_never_called", task_class=task_class.__name__, method=method, reason=why
            )
    for key, why in keys_without_effect(raw, resolved.to_dict(), task_class):
        log.warning("key_without_effect", key=key, reason=why)
    lost = memory_checkpoints(resolved)
    if lost is not None:
        log.warning("checkpoints_in_memory", reason=lost)
    for key, interval_ms, why in short_intervals(resolved):
        log.warning("interval_under_a_second", key=key, interval_ms=interval_ms, reason=why)


@contextmanager
def _collected(check: JobCheck) -> Iterator[None]:
    """A ConfigError raised inside is one more problem of ``check``; the check goes on."""
    try:
        yield
    except ConfigError as exc:
        check.errors.append(exc)


__all__ = ["JobCheck", "check_job", "load_job"]
