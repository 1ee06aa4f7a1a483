"""Per-task bookkeeping of control messages: pure, synchronous, checkpointed with the offsets.

A task's *carrying* partitions are those that can carry watermarks: the partitions of framed
streams (watermarks sent by upstream tasks) and of plain streams with
``samza.watermark.lateness.ms`` (watermarks derived from message timestamps, delivered as if
sent by one upstream task). Partitions of other plain streams carry none and are left out of
every minimum.

Per framed partition, Samza's reconciliation by upstream task count: the partition ends once
``taskCount`` distinct upstream tasks sent end-of-stream; its watermark is the minimum over
upstream tasks once all ``taskCount`` reported, and only moves forward. Duplicates count once.
An upstream task's end-of-stream counts as its watermark ``END_WATERMARK`` (as in Flink and
Beam: a finished input holds nothing back), so the tasks still writing decide the watermark.
An upstream task that says it is idle (a watermark message with ``idle``, carrying its last
watermark) is left out of the minimum until it sends a watermark that is not idle; a partition
whose upstream tasks are all idle is idle, and left out of the task's minimums in turn (Flink's
idleness). When everything a minimum is over is idle, it is the highest of them instead (as
the windows' own idleness, ``operators/event_time.py``: the last windows close), and none while
none of them has one (an upstream task idle before its first watermark says ``NO_WATERMARK``,
which is no time: a task is not given it). Which
upstream tasks are idle is checkpointed with the rest, as read up to the checkpoint's offsets:
a reader that restarts while its writer stays idle does not wait for it.

Per task: the *input watermark* is the minimum over the carrying partitions that have not
ended (defined once each of them has a watermark); the *output watermark*, sent to the
intermediate streams the job writes, is the same minimum over the partitions of the
upstream inputs. Both only move forward, across restarts too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import chain
from typing import Any

from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.api.task import END_WATERMARK
from samzapy.control.origins import ReaderOrigins, WriterOrigins
from samzapy.control.wire import NO_WATERMARK, ControlMessage, EndOfStreamMessage


class PartitionControl:
    """What the upstream tasks of one partition have reported."""

    __slots__ = (
        "ended",
        "eos_count",
        "eos_tasks",
        "idle_tasks",
        "watermark",
        "wm_count",
        "wm_tasks",
    )

    def __init__(self) -> None:
        self.eos_tasks: set[str] = set()
        self.eos_count = 0
        self.wm_tasks: dict[str, int] = {}
        self.wm_count = 0
        self.idle_tasks: set[str] = set()
        #: The reconciled watermark (None until every upstream task reported one).
        self.watermark: int | None = None
        self.ended = False

    def end_of_stream(self, message: EndOfStreamMessage) -> bool:
        """Record ``message``; True when it completes the partition's end."""
        if self.ended:
            return False
        self.eos_tasks.add(message.task_name)
        self.eos_count = message.task_count
        if len(self.eos_tasks) >= self.eos_count:
            self.ended = True
            return True
        # A task that ended writes nothing more: it no longer holds the watermark back.
        self.watermark_from(message.task_name, message.task_count, END_WATERMARK)
        return False

    @property
    def idle(self) -> bool:
        """Every upstream task reported, and each one that has not ended is idle."""
        if not self.idle_tasks or self.ended or len(self.wm_tasks) < self.wm_count:
            return False
        return all(t in self.idle_tasks or ts == END_WATERMARK for t, ts in self.wm_tasks.items())

    def watermark_from(
        self, task_name: str, task_count: int, timestamp: int, idle: bool = False
    ) -> bool:
        """Record one upstream task's watermark (or that it is idle); True when the
        partition's moved forward."""
        if self.ended:
            return False
        self.wm_count = task_count
        if idle:
            self.idle_tasks.add(task_name)
        else:
            self.idle_tasks.discard(task_name)
        previous = self.wm_tasks.get(task_name)
        if previous is None or timestamp > previous:
            self.wm_tasks[task_name] = timestamp
        if len(self.wm_tasks) < task_count:
            return False
        idle_tasks = self.idle_tasks
        # The tasks still writing and not idle (a task that ended holds nothing back).
        held = [
            ts for t, ts in self.wm_tasks.items() if t not in idle_tasks and ts != END_WATERMARK
        ]
        if not held:  # every task still writing is idle: the highest of them
            # One idle before it had a watermark carries NO_WATERMARK, a placeholder: with
            # only such ones the partition has no watermark yet, not one 292 My back.
            held = [ts for t, ts in self.wm_tasks.items() if t in idle_tasks and ts != NO_WATERMARK]
            if not held:
                return False
            held = [max(held)]
        reconciled = min(held)
        if self.watermark is None or reconciled > self.watermark:
            self.watermark = reconciled
            return True
        return False

    def to_json(self) -> dict[str, Any]:
        return {
            "eos": {"taskCount": self.eos_count, "tasks": sorted(self.eos_tasks)},
            "watermarks": {
                "taskCount": self.wm_count,
                "tasks": dict(sorted(self.wm_tasks.items())),
            },
            "watermark": self.watermark,
            "ended": self.ended,
            **({"idle": sorted(self.idle_tasks)} if self.idle_tasks else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PartitionControl:
        state = cls()
        eos = data.get("eos") or {}
        state.eos_count = int(eos.get("taskCount", 0))
        state.eos_tasks = {str(t) for t in eos.get("tasks", ())}
        wms = data.get("watermarks") or {}
        state.wm_count = int(wms.get("taskCount", 0))
        state.wm_tasks = {str(t): int(ts) for t, ts in (wms.get("tasks") or {}).items()}
        wm = data.get("watermark")
        state.watermark = None if wm is None else int(wm)
        state.ended = bool(data.get("ended", False))
        state.idle_tasks = {str(t) for t in data.get("idle", ())}
        return state


def _by_stream(
    ssps: Iterable[SystemStreamPartition],
) -> dict[SystemStream, frozenset[SystemStreamPartition]]:
    by_stream: dict[SystemStream, set[SystemStreamPartition]] = {}
    for ssp in ssps:
        by_stream.setdefault(ssp.system_stream, set()).add(ssp)
    return {ss: frozenset(group) for ss, group in by_stream.items()}


class TaskControl:
    """The control-message state of one task.

    ``outputs`` maps each intermediate stream the job writes to the task's partitions of
    that stream's upstream inputs (possibly none: the task then ends its writing at once).
    ``writer`` and ``reader``: the task's origins (``origins.py``) as a writer of framed
    streams and as a reader of them, checkpointed here too.
    """

    def __init__(
        self,
        *,
        carrying: Iterable[SystemStreamPartition],
        outputs: Mapping[SystemStream, Iterable[SystemStreamPartition]] | None = None,
    ) -> None:
        self.partitions = {ssp: PartitionControl() for ssp in carrying}
        self.outputs = {ss: frozenset(ssps) for ss, ssps in (outputs or {}).items()}
        #: The carrying partitions by stream, and with them the outputs' upstream ones (both
        #: fixed): the streams ``advance_stream_idleness`` and ``advance_stream_watermarks``
        #: report on.
        self._input_streams = _by_stream(self.partitions)
        self._streams = _by_stream(chain(self.partitions, *self.outputs.values()))
        #: Every input partition known to have ended (framed or not).
        self.ended: set[SystemStreamPartition] = set()
        #: The last watermark given to the task, and the last sent to each output.
        self.input_watermark: int | None = None
        self.output_watermarks: dict[SystemStream, int] = {}
        #: The last watermark given per input stream (``advance_stream_watermarks``); not
        #: checkpointed: a restart gives each stream's again.
        self.stream_watermarks: dict[SystemStream, int] = {}
        #: The input streams given as idle (``advance_stream_idleness``); not checkpointed.
        self.idle_streams: set[SystemStream] = set()
        self._ends_sent: set[SystemStream] = set()
        #: The outputs told that this task is idle (their upstream partitions all are).
        self.idle_outputs: set[SystemStream] = set()
        self.writer: WriterOrigins | None = None
        self.reader: ReaderOrigins | None = None

    @property
    def checkpointed(self) -> bool:
        """Whether a checkpoint records this bookkeeping (there is some)."""
        return bool(self.partitions or self.outputs or self.writer or self.reader)

    # -- receiving ------------------------------------------------------------------------------

    def receive(self, ssp: SystemStreamPartition, message: ControlMessage) -> bool:
        """Record a control message read from ``ssp``; True when it ended the partition."""
        state = self.partitions.get(ssp)
        if state is None:
            return False
        if isinstance(message, EndOfStreamMessage):
            if state.end_of_stream(message):
                self.ended.add(ssp)
                return True
            return False
        state.watermark_from(message.task_name, message.task_count, message.timestamp, message.idle)
        return False

    def partition_ended(self, ssp: SystemStreamPartition) -> None:
        """A partition ended without a control message (a bounded system's end)."""
        self.ended.add(ssp)
        state = self.partitions.get(ssp)
        if state is not None:
            state.ended = True

    def take_ended_outputs(self) -> list[SystemStream]:
        """The outputs whose upstream partitions have all ended and that were not told yet
        (remembered as told)."""
        done = [
            ss
            for ss, upstream in self.outputs.items()
            if ss not in self._ends_sent and upstream <= self.ended
        ]
        self._ends_sent.update(done)
        return done

    # -- watermarks -----------------------------------------------------------------------------

    def _minimum(self, ssps: Iterable[SystemStreamPartition]) -> int | None:
        """The minimum over ``ssps`` that have not ended and are not idle; if all of them
        are idle, the highest of them (None while one has no watermark yet)."""
        low: int | None = None
        held = False
        highest: int | None = None
        for ssp in ssps:
            state = self.partitions.get(ssp)
            if state is None or ssp in self.ended:
                continue
            watermark = state.watermark
            if state.idle:
                if watermark is not None and (highest is None or watermark > highest):
                    highest = watermark
                continue
            if watermark is None:
                return None
            held = True
            if low is None or watermark < low:
                low = watermark
        return low if held else highest

    def advance_input_watermark(self) -> int | None:
        """The task's input watermark if it moved forward (and remember it), else None."""
        low = self._minimum(self.partitions)
        if low is not None and (self.input_watermark is None or low > self.input_watermark):
            self.input_watermark = low
            return low
        return None

    def advance_stream_watermarks(self) -> dict[SystemStream, int]:
        """Each input stream whose watermark moved forward, with it (remembered as given): the
        minimum over the stream's carrying partitions that have not ended, ``END_WATERMARK``
        once all of them ended. A stream upstream of an output that carries none gets
        ``END_WATERMARK`` too once its partitions ended: given at the barrier before the
        output's end-of-stream is sent, so what the task sends then goes before it."""
        moved: dict[SystemStream, int] = {}
        for ss, ssps in self._streams.items():
            if all(ssp in self.ended for ssp in ssps):
                low: int | None = END_WATERMARK
            else:
                low = self._minimum(ssps)
            last = self.stream_watermarks.get(ss)
            if low is not None and (last is None or low > last):
                self.stream_watermarks[ss] = moved[ss] = low
        return moved

    def advance_stream_idleness(self) -> dict[SystemStream, bool]:
        """The input streams that went idle (every carrying partition of theirs in this task
        idle or ended, some idle) or active again since last asked, with whether they are
        idle now (remembered as given). A stream's watermark is then the highest of its idle
        partitions', which must not hold back what reads it beside streams that are not idle
        (Flink's idle status, across streams as across partitions)."""
        changed: dict[SystemStream, bool] = {}
        for ss, ssps in self._input_streams.items():
            idle = self._all_idle(ssps)
            if idle != (ss in self.idle_streams):
                changed[ss] = idle
                (self.idle_streams.add if idle else self.idle_streams.discard)(ss)
        return changed

    def advance_output_watermarks(self) -> dict[SystemStream, int]:
        """The outputs whose watermark moved forward, with it (remembered as sent); an idle
        output whose upstream partitions are not all idle any more is in it too (with its last
        watermark if that did not move): a watermark that is not idle ends the idleness."""
        moved: dict[SystemStream, int] = {}
        for ss, upstream in self.outputs.items():
            if ss in self._ends_sent or self._all_idle(upstream):
                continue  # idle: advance_output_idleness
            low = self._minimum(upstream)
            last = self.output_watermarks.get(ss)
            if ss in self.idle_outputs:  # active again: say so, even if it did not move
                value = low if last is None or (low is not None and low > last) else last
                if value is not None:
                    self.idle_outputs.discard(ss)
                    self.output_watermarks[ss] = moved[ss] = value
            elif low is not None and (last is None or low > last):
                self.output_watermarks[ss] = moved[ss] = low
        return moved

    def advance_output_idleness(self) -> dict[SystemStream, int]:
        """The outputs whose upstream partitions are all idle and that were not told so, or
        whose idle watermark (the highest of those partitions') moved forward; with it,
        ``NO_WATERMARK`` when there is none (remembered as told)."""
        told: dict[SystemStream, int] = {}
        for ss, upstream in self.outputs.items():
            if ss in self._ends_sent or not self._all_idle(upstream):
                continue
            low = self._minimum(upstream)
            last = self.output_watermarks.get(ss)
            moved = low is not None and (last is None or low > last)
            if moved or ss not in self.idle_outputs:
                self.idle_outputs.add(ss)
                if moved:
                    assert low is not None
                    self.output_watermarks[ss] = low
                told[ss] = self.output_watermarks.get(ss, NO_WATERMARK)
        return told

    def _all_idle(self, ssps: Iterable[SystemStreamPartition]) -> bool:
        """Some of ``ssps`` are idle, and the others ended."""
        some = False
        for ssp in ssps:
            if ssp in self.ended:
                continue
            state = self.partitions.get(ssp)
            if state is None or not state.idle:
                return False
            some = True
        return some

    # -- checkpoint -----------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "partitions": {str(ssp): s.to_json() for ssp, s in self.partitions.items()},
            "inputWatermark": self.input_watermark,
            "outputWatermarks": {str(ss): wm for ss, wm in self.output_watermarks.items()},
        }
        origins: dict[str, Any] = {}
        if self.writer is not None:
            origins["epochs"] = self.writer.to_json()
        if self.reader is not None:
            origins["applied"] = self.reader.to_json()
        if origins:
            data["origins"] = origins
        return data

    def restore(self, data: Mapping[str, Any] | None) -> None:
        """Take up the bookkeeping of a checkpoint (written by ``to_json``)."""
        if not data:
            return
        saved = data.get("partitions") or {}
        for ssp in self.partitions:
            entry = saved.get(str(ssp))
            if entry is not None:
                state = PartitionControl.from_json(entry)
                self.partitions[ssp] = state
                if state.ended:
                    self.ended.add(ssp)
        wm = data.get("inputWatermark")
        self.input_watermark = None if wm is None else int(wm)
        outputs = data.get("outputWatermarks") or {}
        for ss in self.outputs:
            if (wm := outputs.get(str(ss))) is not None:
                self.output_watermarks[ss] = int(wm)
        if self.reader is not None:
            self.reader.restore((data.get("origins") or {}).get("applied"))


def saved_epochs(data: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The writer epochs a checkpoint's control bookkeeping recorded (``to_json``)."""
    return ((data or {}).get("origins") or {}).get("epochs")


__all__ = ["PartitionControl", "TaskControl", "saved_epochs"]
