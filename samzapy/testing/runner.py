"""TestRunner: run a task class in-process over bounded in-memory inputs, and read the results.

In the spirit of Samza's TestRunner. Inputs and outputs live on the in-memory system named
``memory``, in a namespace of their own, so runners never see each other's streams. Every
input partition is bounded: it ends with end-of-stream, so the job finishes by itself.
An intermediate stream (``add_intermediate``) is read and written by the job, framed, and
ends through the control messages of its upstream tasks, as on Kafka.

    result = (
        TestRunner(WordCount, {"task.max.concurrency": 4})
        .add_input("words", {0: ["a", "b"], 1: [KV("k", "c")]})
        .add_output("counts")
        .run(timeout=10)
    )
    assert result.outputs("counts") == {0: [...]}

An application (a StreamApplication or a TaskApplication) runs the same way
(``TestRunner.of(app)``), its descriptors' streams on the
memory system whatever system they name, so the application a job file runs on Kafka is
tested as it is:

    result = (
        TestRunner.of(WordCountApp)
        .add_input_stream(lines_descriptor, ["a b", "c"])
        .add_output_stream(counts_descriptor, partitions=2)
        .run(timeout=10)
    )
    assert result.outputs(counts_descriptor) == {0: [...], 1: [...]}
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import yaml

from samzapy.api.descriptors import InputDescriptor, OutputDescriptor, StreamDescriptor
from samzapy.api.envelope import KV
from samzapy.api.errors import TaskError
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.api.task import AsyncStreamTask, StreamTask
from samzapy.config import Config, ResolvedConfig, load_config, resolve
from samzapy.container import Clock, SamzaContainer
from samzapy.container.checkpoints import checkpoint_namespace
from samzapy.container.event_loop import loop_factory
from samzapy.metrics import MetricsRegistry
from samzapy.operators.application import Application, load_application
from samzapy.system.inmemory import InMemoryBroker
from samzapy.testing.checked_serdes import checked_output_serdes
from samzapy.testing.clock import ManualClock
from samzapy.testing.files import checkpoint_dir, runner_dir
from samzapy.testing.given import check_app_inputs, check_task_class, check_task_inputs, timeout_s
from samzapy.testing.on_memory import ONE_CONTAINER, check_one_namespace, memory_namespaces
from samzapy.testing.on_memory import on_memory as on_memory_system
from samzapy.testing.records import SYSTEM, stream_reader
from samzapy.testing.streams import create_outputs, prepare_streams, retold
from samzapy.testing.tracebacks import tracebacks_without_locals
from samzapy.testing.unfinished import describe_unfinished, failure_of


class TestResult:
    """What a finished run left behind: outputs per partition and the last checkpoints."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        broker: InMemoryBroker,
        container: SamzaContainer,
        names: dict[str, str] | None = None,
    ) -> None:
        #: An application's streams by id: the name the job gave each (the config may rename);
        #: None for a task class's run.
        self._names = names
        self._broker = broker
        self.container = container

    def outputs(self, stream: str | StreamDescriptor) -> dict[int, list[Any]]:
        """Messages of an output stream (its name, or an application's output descriptor),
        per partition, in order; of an intermediate stream the job reads back, its messages
        as sent (deserialized, without control messages or a restart's replayed copies)."""
        return {p: [m for _, m in records] for p, records in self._records(stream).items()}

    def keyed_outputs(self, stream: str | StreamDescriptor) -> dict[int, list[KV]]:
        """Like ``outputs``, with each message's key: ``KV(key, message)``."""
        return {p: [KV(k, m) for k, m in records] for p, records in self._records(stream).items()}

    def _records(self, stream: str | StreamDescriptor) -> dict[int, list[tuple[Any, Any]]]:
        if isinstance(stream, StreamDescriptor):
            if self._names is not None and stream.stream_id not in self._names:
                raise KeyError(
                    f"{stream.stream_id!r} was not declared with add_output_stream: declare it "
                    "to read its messages as the application sent them (not serialized)"
                )
            stream = (self._names or {}).get(stream.stream_id, stream.physical_name)
        count = self._broker.partition_count(stream)
        if count is None:
            raise KeyError(f"no stream {stream!r} was written or declared with add_output")
        # Deserialized with the stream's serdes; an intermediate stream's messages, not frames.
        reader = stream_reader(self.container.config, stream)
        return {p: reader.read(self._broker.records(stream, p)) for p in range(count)}

    @property
    def checkpoints(self) -> dict[TaskName, dict[SystemStreamPartition, str]]:
        """The last checkpoint of each task, written by the run or an earlier one of its
        namespace, whatever ``task.checkpoint.factory``: {task name: {partition: offset}}."""
        found = self.container.last_checkpoints
        return {name: dict(cp.offsets) for name, cp in found.items()}

    @property
    def metrics(self) -> MetricsRegistry:
        return self.container.metrics


class TestRunner:
    """Builds and runs a job of ``task_class`` (or of an application, ``TestRunner.of``) on
    the in-memory system."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        task_class: type[Any] | None,
        config: Mapping[str, Any] | None = None,
        *,
        clock: Clock | None = None,
        namespace: str | None = None,
    ) -> None:
        """``namespace`` shares the in-memory streams and checkpoints of an earlier runner
        with the same namespace: the way to test a restart. Runners of different namespaces
        share nothing, not even the checkpoints of jobs with the same ``job.name`` and
        ``job.id``."""
        if task_class is not None:
            check_task_class(task_class)
        self._task_class = task_class
        self._config = dict(config or {})
        self._clock = clock
        self._inputs: dict[str, dict[int, list[Any]]] = {}
        #: Whether each input ends after the messages given (``add_input``'s ``end``).
        self._ends: dict[str, bool] = {}
        self._outputs: dict[str, int] = {}
        self._intermediate: dict[str, int] = {}
        self.namespace = namespace or f"testrunner-{uuid.uuid4().hex[:12]}"
        #: The running (or last run) container, for white-box tests.
        self.container: SamzaContainer | None = None
        self.broker = InMemoryBroker.for_namespace(self.namespace)
        #: ``TestRunner.of``: the application (an instance or a class).
        self._app: Any = None
        self._app_streams: dict[str, StreamDescriptor] = {}
        self._planned: tuple[ResolvedConfig, Application | None] | None = None

    @classmethod
    def of(
        cls,
        app: Any,
        config: Mapping[str, Any] | None = None,
        *,
        clock: Clock | None = None,
        namespace: str | None = None,
    ) -> TestRunner:
        """A runner of application ``app`` (a StreamApplication or TaskApplication, instance
        or class), or of a task class, as Samza's ``TestRunner.of`` takes either."""
        if isinstance(app, type) and issubclass(app, StreamTask | AsyncStreamTask):
            return cls(app, config, clock=clock, namespace=namespace)
        runner = cls(None, config, clock=clock, namespace=namespace)
        runner._app = app
        return runner

    def add_input_stream(
        self,
        input_descriptor: InputDescriptor,
        messages: Sequence[Any] | Mapping[int, Sequence[Any]],
        *,
        end: bool = True,
    ) -> TestRunner:
        """Messages for an application's input: a list (partition 0) or {partition:
        [messages]}; a ``KV`` item gives the message a key (a keyed stream's messages are
        ``KV``s), a ``Message`` a key and a timestamp. Messages are given as the application
        sees them, not serialized. ``end``: as ``add_input``'s."""
        self._app_stream(input_descriptor, InputDescriptor)
        return self.add_input(input_descriptor.physical_name, messages, end=end)

    def add_output_stream(
        self, output_descriptor: OutputDescriptor, partitions: int = 1
    ) -> TestRunner:
        """Declare an application's output with its partition count (the default is one)."""
        self._app_stream(output_descriptor, OutputDescriptor)
        _partition_count("add_output_stream", output_descriptor.stream_id, partitions)
        return self.add_output(output_descriptor.physical_name, partitions)

    def add_config(self, key: str, value: Any) -> TestRunner:
        """Set one config key, as the job file would."""
        self._config[key] = value
        return self

    def _app_stream(self, descriptor: StreamDescriptor, kind: type[StreamDescriptor]) -> None:
        if not isinstance(descriptor, kind):
            raise TypeError(f"expected an {kind.__name__}, got {descriptor!r}")
        if self._app is None:
            raise TypeError("add_input_stream and add_output_stream are for TestRunner.of(app)")
        self._app_streams[descriptor.stream_id] = descriptor

    def add_input(
        self,
        stream: str,
        messages: Sequence[Any] | Mapping[int, Sequence[Any]],
        *,
        end: bool = True,
    ) -> TestRunner:
        """Messages for ``stream``: a list (partition 0) or {partition: [messages]}; an item
        that is a ``KV`` gives the message a key, a ``Message`` a key and a timestamp.
        Objects, serialized with the stream's serdes in the config (bytes are a record's
        bytes as they are: ``records.py``). A stream the namespace has already (a restart, or
        a run again) is read as it is: ``run`` refuses messages it does not hold. ``end=False``
        leaves the stream open: the job runs until a task's ``coordinator.shutdown`` or
        ``run``'s timeout. Called again for ``stream``, it adds each partition's messages after
        those given before."""
        by_partition = dict(messages) if isinstance(messages, Mapping) else {0: messages}
        if any(not isinstance(p, int) or p < 0 for p in by_partition):
            raise ValueError(f"partitions of input {stream!r} must be integers >= 0")
        for given in by_partition.values():
            if isinstance(given, str | bytes | bytearray) or not isinstance(given, Iterable):
                raise TypeError(
                    f"add_input({stream!r}): give a list of messages (or {{partition: [messages]}}"
                    f"), not {type(given).__name__} {given!r:.40}: one message is [message]"
                )
        if stream in self._ends and self._ends[stream] != bool(end):
            raise ValueError(
                f"add_input({stream!r}): given with end={self._ends[stream]} before, now with "
                f"end={bool(end)}: a stream either ends after its messages or stays open"
            )
        added = self._inputs.setdefault(stream, {})  # a call adds, as Samza's addInputStream
        for p, ms in by_partition.items():
            added.setdefault(p, []).extend(ms)
        self._ends[stream] = bool(end)
        return self

    def add_intermediate(self, stream: str, partitions: int = 1) -> TestRunner:
        """Declare an intermediate stream the job reads (``streams.<stream>.samza.
        intermediate: true``, JSON messages unless the config says otherwise); created with
        ``partitions`` unless the namespace has it already (another job of the test wrote it)."""
        self._intermediate[stream] = _partition_count("add_intermediate", stream, partitions)
        return self

    def add_output(self, stream: str, partitions: int = 1) -> TestRunner:
        """Declare an output stream with its partition count (the default is one)."""
        self._outputs[stream] = _partition_count("add_output", stream, partitions)
        return self

    def run(self, timeout: float | timedelta = 30.0) -> TestResult:
        """Run until the job finishes, on uvloop unless ``job.loop`` is ``asyncio`` or the
        clock is a ``ManualClock`` (which needs asyncio's loop); raise the task's error
        (TaskError, the task's own exception as its cause) or TimeoutError, which names the
        tasks still running, their input partitions not ended and the call each was on.
        ``timeout``: seconds, or a ``timedelta``."""
        timeout_s(timeout)  # before the event loop is made
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                "TestRunner.run() inside a running event loop: use await run_async()"
            )
        configured = self._resolved()[0].job.loop
        # A manual clock tells when every task is blocked from asyncio's own loop.
        factory, _ = loop_factory("asyncio" if isinstance(self._clock, ManualClock) else configured)
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(self.run_async(timeout=timeout))

    async def run_async(self, timeout: float | timedelta = 30.0) -> TestResult:  # noqa: ASYNC109
        """``run`` for code already inside an event loop."""
        with tracebacks_without_locals():  # structlog's defaults would print them
            return await self._run(timeout_s(timeout))

    async def _run(self, timeout: float) -> TestResult:  # noqa: ASYNC109
        resolved, app = self._resolved()
        self._planned = None  # a second run describes the application again
        names = self._place_app_streams(resolved)
        prepare_streams(self.broker, resolved, self._inputs, self._ends)
        create_outputs(self.broker, self._outputs, self._intermediate)
        if app is not None:
            check_app_inputs(resolved, names, self._app_streams, self.broker)
        else:
            given: dict[str, Collection[str]] = {
                "add_input": self._inputs,
                "add_intermediate": self._intermediate,
            }
            check_task_inputs(resolved, SYSTEM, self.namespace, given, self.broker)
        container = SamzaContainer(
            resolved,
            task_factory=self._task_class if app is None else app.task_factory(resolved),
            clock=self._clock,
            # The runner's own: another runner of a job with the same name and id (a config
            # shared by a module's tests) must not resume from this one's checkpoints.
            checkpoint_namespace=f"{self.namespace}/{checkpoint_namespace(resolved)}",
        )
        self.container = container
        running = asyncio.ensure_future(container.run())
        deadline = asyncio.get_running_loop().time() + timeout
        try:
            done, _ = await asyncio.wait({running}, timeout=timeout)
        finally:
            if not running.done():  # timed out (or this run was cancelled)
                late = asyncio.get_running_loop().time() - deadline
                unfinished, failure = describe_unfinished(container, late), failure_of(container)
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running
        if not done:
            if open_inputs := [s for s, end in self._ends.items() if not end]:
                unfinished += f"; given with end=False, {', '.join(open_inputs)} never end"
            error = TimeoutError(f"the job did not finish within {timeout} s: {unfinished}")
            raise error from failure  # the job's own error, when it was stopping after one
        try:
            running.result()  # the job's error
        except TaskError as error:
            if (better := retold(error, resolved, app=app is not None)) is None:
                raise
            raise better from better.__cause__
        declared = names if app is not None else None
        return TestResult(self.broker, container, declared)

    def _place_app_streams(self, resolved: ResolvedConfig) -> dict[str, str]:
        """The name each of an application's streams has in the job (its config may rename
        one): what was added under the descriptor's name moves to it."""
        names: dict[str, str] = {}
        for stream_id, descriptor in self._app_streams.items():
            entry = resolved.streams.get(stream_id)
            name = entry.physical_name if entry is not None else descriptor.physical_name
            names[stream_id] = name
            for table in (self._inputs, self._outputs, self._ends):
                if descriptor.physical_name in table and name != descriptor.physical_name:
                    table[name] = table.pop(descriptor.physical_name)  # type: ignore[assignment]
        return names

    def _resolved(self) -> tuple[ResolvedConfig, Application | None]:
        if self._planned is None:
            self._planned = self._plan()
        return self._planned

    def _plan(self) -> tuple[ResolvedConfig, Application | None]:
        if self._app is None:
            if not self._inputs and not self._intermediate:  # before resolve's own error
                raise ValueError(
                    "TestRunner needs at least one input: call add_input() or add_intermediate()"
                )
            return resolve(Config({**self._resolve_config(), **ONE_CONTAINER})), None
        base: dict[str, Any] = {
            "job.name": "test-job",
            "job.id": self.namespace,
            "task.checkpoint.factory": "memory",
            "job.logged.store.base.dir": self._store_dir(),
        }
        config = load_config(text=yaml.safe_dump(self._config), base=base)
        app = load_application(config, self._app)
        # Every system of the application is the memory system of this runner (the streams
        # given here carry the messages as objects), in one container.
        on_memory = on_memory_system(app.config, self.namespace)
        as_objects: dict[str, Any] = {}
        for stream_id in self._app_streams:
            for which in ("key", "msg"):
                key = f"streams.{stream_id}.samza.{which}.serde"
                if key not in self._config:  # add_config's own setting wins
                    as_objects[key] = "none"
            on_memory[f"streams.{stream_id}.samza.framed"] = False
        # The declared outputs' serdes, as the job has them, check what is sent there.
        checked = checked_output_serdes(resolve(Config(on_memory)), self._app_streams.values())
        checked = {k: v for k, v in checked.items() if k not in self._config}
        files = checkpoint_dir(on_memory, self.namespace)
        resolved = resolve(Config({**on_memory, **as_objects, **checked, **files}))
        check_one_namespace(resolved.streams.values())
        return resolved, app

    def _store_dir(self) -> str:
        """Where the runner's persistent stores live unless its config says (``files.py``)."""
        return runner_dir(self.namespace)

    def _resolve_config(self) -> Any:
        cls = self._task_class
        assert cls is not None
        base: dict[str, Any] = {
            "job.name": "test-job",
            "job.id": self.namespace,
            "task.class": f"{cls.__module__}:{cls.__name__}",
            "task.inputs": [
                f"{SYSTEM}.{stream}" for stream in [*self._inputs, *self._intermediate]
            ],
            f"systems.{SYSTEM}.samza.factory": "memory",
            f"systems.{SYSTEM}.namespace": self.namespace,
            "task.checkpoint.factory": "memory",
            "job.logged.store.base.dir": self._store_dir(),
        }
        for stream in self._intermediate:
            base[f"streams.{stream}.samza.system"] = SYSTEM
            base[f"streams.{stream}.samza.intermediate"] = True
            base[f"streams.{stream}.samza.msg.serde"] = "json"
        config = load_config(text=yaml.safe_dump(self._config), base=base)
        spaces = memory_namespaces(config, self.namespace)
        return {**spaces, **config, **checkpoint_dir(config, self.namespace)}


def _partition_count(call: str, stream: str, partitions: Any) -> int:
    if type(partitions) is not int or partitions < 1:
        raise ValueError(
            f"{call}({stream!r}): partitions must be an integer >= 1, got {partitions!r}"
        )
    return partitions


__all__ = ["TestResult", "TestRunner"]
