"""Running an application: load it, describe it, plan it, and make its tasks.

The steps, before anything is read or written:

1. import ``app.class`` (a StreamApplication or TaskApplication subclass) and create it, or
   take the instance or class given (``TestRunner.of``);
2. call ``describe`` with a descriptor of its kind over the job file's keys; a failure is a
   ConfigError naming ``app.class`` (a task application's is checked: ``task_application.py``);
3. plan the graph (``plan.py``): the job's streams, operators and the config keys they yield;
4. merge: the job file's keys win over the application's; ``task.inputs`` comes from the
   application only, and so does a stream application's ``task.broadcast.inputs`` (a task
   application has no broadcast stream to give: its job file names them);
5. once the merged config is resolved, ``task_factory`` makes each task's operator task (a
   task application's: its own task instances, from its factory).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog

from samzapy.api.application import StreamApplication, StreamApplicationDescriptor
from samzapy.api.errors import ConfigError
from samzapy.api.system import SystemStream
from samzapy.api.task_application import TaskApplication, TaskApplicationDescriptor
from samzapy.config import Config, ResolvedConfig
from samzapy.config.classes import APP_CLASS_KEY, describe_cause, is_application, load_class
from samzapy.operators.graph_checks import check_graph, check_task_graph
from samzapy.operators.plan import plan_application
from samzapy.operators.plan_document import AppPlan
from samzapy.operators.table_plan import half_watermarked_joins
from samzapy.operators.task import OperatorTaskFactory
from samzapy.operators.task_application import TaskFactory, check_task_application
from samzapy.operators.window_plan import unwatermarked

log = structlog.get_logger("samzapy.operators")


@dataclass(frozen=True)
class Application:
    """A described and planned application, and the job's config merged with its keys."""

    descriptor: StreamApplicationDescriptor | TaskApplicationDescriptor
    plan: AppPlan
    config: Config

    def task_factory(self, resolved: ResolvedConfig) -> OperatorTaskFactory | TaskFactory:
        """Step 5: the factory of operator tasks, over the streams as ``resolved`` places
        them (the job file may rename a stream or move it to another system); a task
        application's own factory, each instance it makes checked."""
        if isinstance(self.descriptor, TaskApplicationDescriptor):
            assert self.descriptor.task_factory is not None  # checked in step 2
            return TaskFactory(self.descriptor.task_factory, self.plan.app, self.descriptor.graph)
        _check_memory_intermediates(self.plan, resolved)
        streams: dict[str, SystemStream] = {}
        for plan in (*self.plan.inputs, *self.plan.outputs, *self.plan.intermediates):
            entry = resolved.streams.get(plan.stream_id)
            system = entry.system if entry is not None and entry.system else plan.system
            physical = entry.physical_name if entry is not None else plan.physical_name
            ss = SystemStream(system, physical)
            if plan.role == "intermediate":
                kind = "broadcast" if plan.broadcast else "partition_by"
                streams[f"{kind}:{plan.op_id}"] = ss
            else:
                streams[plan.stream_id] = ss
        return OperatorTaskFactory(self.descriptor.graph, self.plan, streams)


def _check_memory_intermediates(plan: AppPlan, resolved: ResolvedConfig) -> None:
    """A memory system lives in one process: intermediate streams on it need every task of
    the job in this container (the static coordinator, one container)."""
    on_memory = [
        s.qualified_name
        for s in plan.intermediates
        if (system := resolved.systems.get(s.system)) is not None and system.factory == "memory"
    ]
    if not on_memory:
        return
    coordinator = resolved.job.coordinator_factory
    if coordinator is None:
        factories = {
            resolved.systems[ss.system].factory
            for ss in resolved.task.inputs
            if ss.system in resolved.systems
        }
        coordinator = "kafka-group" if factories == {"kafka"} else "static"
    if coordinator != "static" or resolved.job.container_count != 1:
        raise ConfigError(
            f"job.default.system: the intermediate streams {', '.join(on_memory)} are on a "
            "memory system, which lives in one process, so the job must run in one container "
            "(job.coordinator.factory: static, job.container.count: 1); put them on a kafka "
            "system to share the job among containers",
            key="job.default.system",
        )


def load_application(config: Config, app: Any = None) -> Application:
    """Steps 1 to 4 for ``config`` (the job file's keys); ``app``: an application instance or
    class to use instead of ``app.class``."""
    if config.get("task.class") is not None:
        raise ConfigError(
            "task.class and app.class are both set: a job runs a task class (task.class) or "
            "an application (app.class), not both",
            key=APP_CLASS_KEY,
        )
    if app is None:
        path = str(config.get(APP_CLASS_KEY))
        cls = load_class(path, key=APP_CLASS_KEY, base=_APP_BASES, what=_APP_EXPECTED)
        name = path.strip()
        app = _create(cls, name)
    else:
        cls = app if isinstance(app, type) else type(app)
        # A class defined in a function (a test's) is named without its "<locals>" step.
        name = f"{cls.__module__}:{cls.__qualname__.replace('<locals>.', '')}"
        if not issubclass(cls, _APP_BASES):
            raise ConfigError(
                f"{name} is not an application: it must subclass StreamApplication or "
                "TaskApplication"
            )
        if isinstance(app, type):
            app = _create(app, name)
    if issubclass(cls, StreamApplication) and issubclass(cls, TaskApplication):
        raise ConfigError(
            f"{APP_CLASS_KEY}: {name} subclasses both StreamApplication and TaskApplication: "
            "subclass one",
            key=APP_CLASS_KEY,
        )
    # 2.
    descriptor: StreamApplicationDescriptor | TaskApplicationDescriptor
    if isinstance(app, TaskApplication):
        descriptor = TaskApplicationDescriptor(config)
    else:
        descriptor = StreamApplicationDescriptor(config)
    try:
        app.describe(descriptor)
    except ConfigError as exc:
        raise ConfigError(f"{APP_CLASS_KEY}: {name}: {exc}", key=APP_CLASS_KEY) from exc
    except (Exception, SystemExit) as exc:  # sys.exit in describe: a failure like any
        raise ConfigError(
            f"{APP_CLASS_KEY}: describe() of {name} failed: {describe_cause(exc)}",
            key=APP_CLASS_KEY,
        ) from exc
    task_app = isinstance(descriptor, TaskApplicationDescriptor)
    if isinstance(descriptor, TaskApplicationDescriptor):
        check_task_application(descriptor, name)
    # 3.
    checks = check_task_graph if task_app else check_graph
    try:
        plan = plan_application(descriptor, config, app=name, checks=checks)
    except ConfigError as exc:
        if exc.key is not None and exc.key != APP_CLASS_KEY:
            raise  # a job file key's problem says so itself ("job.name is required")
        raise ConfigError(f"{APP_CLASS_KEY}: {name}: {exc}", key=APP_CLASS_KEY) from exc
    # 4. (a task application gives no broadcast inputs: the job file names them, as a task
    # class's does)
    owned = ("task.inputs",) if task_app else ("task.inputs", "task.broadcast.inputs")
    given = [key for key in owned if config.get(key) is not None]
    if given:  # every one named at once, not one per run of samzapy validate
        named, verb, them = (
            (given[0], "comes", "it") if len(given) == 1 else (" and ".join(given), "come", "them")
        )
        raise ConfigError(
            f"{named} {verb} from the application ({APP_CLASS_KEY}): leave {them} out of the "
            "job file",
            key=given[0],
        )
    for op_id, stream_id in unwatermarked(descriptor.graph, config):
        log.warning(
            "window_without_watermarks",
            operator=op_id,
            stream=stream_id,
            reason="the window runs in event time and this input carries no watermarks, so "
            "its panes fire at end-of-stream only: give the input descriptor "
            "with_watermarks(...), or read a framed stream",
        )
    for op_id, stream_ids in half_watermarked_joins(descriptor.graph, config):
        log.warning(
            "join_in_processing_time",
            operator=op_id,
            streams=stream_ids,
            reason="some inputs of the join carry watermarks and these do not, so it runs in "
            "processing time: give them with_watermarks(...) for an event-time join",
        )
    merged = {**plan.config, **{k: v for k, v in config.items()}}
    merged.setdefault(APP_CLASS_KEY, name)
    return Application(descriptor, plan, Config(merged, source=config.source))


_APP_BASES = (StreamApplication, TaskApplication)
_APP_EXPECTED = (
    "an application: it must subclass samzapy.StreamApplication or samzapy.TaskApplication"
)


def _create(cls: type[Any], name: str) -> Any:
    try:
        return cls()
    except Exception as exc:
        raise ConfigError(
            f"{APP_CLASS_KEY}: creating {name!r} with no arguments failed: {describe_cause(exc)}",
            key=APP_CLASS_KEY,
        ) from exc


__all__ = ["APP_CLASS_KEY", "Application", "is_application", "load_application"]
