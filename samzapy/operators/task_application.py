"""A task application (``TaskApplication``) once described: its checks, and the factory that
makes each task's instance.

The job it yields is a ``task.class`` job's: the container runs the instances the task
factory returns exactly as it runs a task class's (one per task); of the operator task, only
the table machinery serves it, for remote and caching tables. Once ``describe`` returned,
it must have called ``with_task_factory``: a task class is checked as ``task.class`` is (a
StreamTask or AsyncStreamTask subclass, not both, created with no arguments), another
callable must take no arguments.

Each instance the factory returns is checked when it is made: not a task, or one it returned
before (two tasks would share it), is a ConfigError naming ``app.class``.

Its tables: a local one (in memory or RocksDB) is a store of every task, which
``context.get_table`` and ``context.get_store`` reach as a task class's stores. With a remote
or caching table among them, each task's tables are built and opened as an application's
operator task does it (``task_tables.py``): the task's class is given an ``init`` that opens
them before its own (which gets a context that has them) and a ``close`` that closes them
after its own (``with_tables``).
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any

from samzapy.api.errors import ConfigError
from samzapy.api.graph import ApplicationGraph
from samzapy.api.tables import LocalTableDescriptor
from samzapy.api.task import ClosableTask, InitableTask
from samzapy.api.task_application import TaskApplicationDescriptor
from samzapy.config.classes import (
    APP_CLASS_KEY,
    TASK_BASE_NAMES,
    TASK_BASES,
    check_task_class,
    describe_cause,
)
from samzapy.operators.task_tables import AppTaskContext, TaskTables

_EXPECTED = (
    f"a task class (a subclass of {TASK_BASE_NAMES}) or a callable with no arguments that "
    "returns a new task instance"
)


def check_task_application(descriptor: TaskApplicationDescriptor, app: str) -> None:
    """The task factory of application ``app`` (its ``module:Class``), checked."""
    factory = descriptor.task_factory
    if factory is None:
        raise ConfigError(
            f"{APP_CLASS_KEY}: {app} is a TaskApplication whose describe() did not call "
            f"app_desc.with_task_factory(...): expected {_EXPECTED}",
            key=APP_CLASS_KEY,
        )
    name = f"{app}'s task factory {_label(factory)}"
    if isinstance(factory, type):
        if not issubclass(factory, TASK_BASES):
            raise ConfigError(
                f"{APP_CLASS_KEY}: {name} is a class that is not a task: expected {_EXPECTED}",
                key=APP_CLASS_KEY,
            )
        check_task_class(factory, key=APP_CLASS_KEY, name=_label(factory))
    else:
        try:
            inspect.signature(factory).bind()
        except TypeError:
            raise ConfigError(
                f"{APP_CLASS_KEY}: {name} cannot be called with no arguments: expected {_EXPECTED}",
                key=APP_CLASS_KEY,
            ) from None
        except ValueError:
            pass  # no signature to read (a builtin): calling it will tell


class TaskFactory:
    """Makes each task's instance with the application's factory, checking what it returns.

    ``probe()`` gives the class of its tasks (``samzapy validate``, ``plan`` and ``run``
    check it before the job starts): a task class is its own, checked as ``task.class`` is
    and created in the job, on its event loop, as a ``task.class`` job's instances are;
    another callable is called ahead, and the instance it made is kept for the first task,
    so that each task's instance still comes from one call."""

    def __init__(
        self, factory: Callable[[], Any], app: str, graph: ApplicationGraph | None = None
    ) -> None:
        """``graph``: the application's, whose tables each task gets (None: none)."""
        self._factory = factory
        self._app = app
        self._ahead: list[Any] = []
        #: Every instance made (those that take a weak reference).
        self._made: weakref.WeakSet[Any] = weakref.WeakSet()
        tables = [] if graph is None else graph.tables.values()
        remote = any(not isinstance(t.descriptor, LocalTableDescriptor) for t in tables)
        #: With a remote or caching table, the graph whose tables each task opens itself.
        self._graph = graph if remote else None

    def probe(self) -> type[Any]:
        """The class of the factory's tasks: a task class itself (none made: its instances
        are made in the job, as ``task.class``'s), else that of one instance made now, kept
        for the first task."""
        if isinstance(self._factory, type):
            return self._factory
        if not self._ahead:
            self._ahead.append(self._make())
        return type(self._ahead[0])

    def __call__(self) -> Any:
        task = self._ahead.pop() if self._ahead else self._make()
        return task if self._graph is None else with_tables(task, self._graph)

    def _make(self) -> Any:
        name = f"{self._app}'s task factory {_label(self._factory)}"
        try:
            task = self._factory()
        except Exception as exc:
            raise ConfigError(
                f"{APP_CLASS_KEY}: {name} failed: {describe_cause(exc)}", key=APP_CLASS_KEY
            ) from exc
        if not isinstance(task, TASK_BASES):
            raise ConfigError(
                f"{APP_CLASS_KEY}: {name} returned {task!r:.80}, which is not a task: expected "
                f"an instance of a subclass of {TASK_BASE_NAMES}",
                key=APP_CLASS_KEY,
            )
        check_task_class(type(task), key=APP_CLASS_KEY, name=_label(type(task)), created=False)
        try:
            if task in self._made:
                raise ConfigError(
                    f"{APP_CLASS_KEY}: {name} returned an instance it returned before "
                    f"({task!r:.80}): each task needs its own, so return a new instance from "
                    "each call",
                    key=APP_CLASS_KEY,
                )
            self._made.add(task)
        except TypeError:
            pass  # no weak reference to it (__slots__ without __weakref__): not checked
        return task

    def __repr__(self) -> str:
        return _label(self._factory)


def with_tables(task: Any, graph: ApplicationGraph) -> Any:
    """``task``, its class replaced by a subclass of it (same name, no new slots) that is
    an InitableTask and a ClosableTask: ``init`` builds and opens the task's own instance of
    every table of ``graph`` (``TaskTables``, as an operator task's), then calls the task's
    ``init``, if it has one, with a context whose ``get_table`` and ``get_store`` reach them;
    ``close`` calls the task's ``close``, if it has one, then closes the tables."""
    cls = type(task)
    tables = TaskTables(graph, {})  # its own memo: each task copies the functions itself
    initable, closable = isinstance(task, InitableTask), isinstance(task, ClosableTask)

    async def init(self: Any, context: Any) -> None:
        await tables.open(context)
        if initable:
            result = cls.init(self, AppTaskContext(context, tables.tables))
            if inspect.isawaitable(result):
                await result

    async def close(self: Any) -> None:
        try:
            if closable:
                result = cls.close(self)
                if inspect.isawaitable(result):
                    await result
        finally:
            await tables.close()

    bases = (cls, *(b for b in (InitableTask, ClosableTask) if not issubclass(cls, b)))
    namespace = {
        "init": init,
        "close": close,
        "__slots__": (),
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
    }
    task.__class__ = type(cls.__name__, bases, namespace)
    return task


def _label(obj: Any) -> str:
    """``module:QualName`` of a class or function (its ``<locals>`` step left out), else its
    repr."""
    qualname = getattr(obj, "__qualname__", None)
    module = getattr(obj, "__module__", None)
    if isinstance(qualname, str) and isinstance(module, str):
        return f"{module}:{qualname.replace('<locals>.', '')}"
    return repr(obj)


__all__ = ["TaskFactory", "check_task_application", "with_tables"]
