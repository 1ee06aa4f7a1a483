"""Checkpointed input offsets that no longer apply at start-up, and what is done about them.

The checkpoints read at start-up (``checkpoints.py``) go through these checks, in this order,
before the plan decides where each partition resumes (``checked``):

1. their partition counts must equal the inputs' (``check_partition_counts``: else the job
   stops);
2. an input whose topic ID differs from the one the checkpoint recorded was deleted and
   created again since (``forget_recreated_inputs``): its checkpointed offsets belong to the
   old topic, whatever the new one holds, and are forgotten (``input_topic_recreated``);
3. a partition whose checkpointed offset is past its end went back (a stream made again on a
   system without IDs, a memory stream, a topic recreated before a checkpoint recorded its
   ID): its offset is forgotten too (``forget_streams_gone_back``, ``stream_went_back``).

A forgotten partition is read from its offset default, as one never read, and its control
bookkeeping is rewound (``control/rewind.py``): its end-of-stream and watermark reports are
forgotten (an intermediate stream that had ended would never be read again) and its writer
epoch goes up, so that the records the task sends for the new messages are above every old
position and the readers downstream take them as new; the origins applied from it are kept
(its writers' positions did not go back). The inputs' current topic IDs, looked up in step 2
(one request per system), are recorded by every checkpoint the container writes.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping

import structlog

from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.codec import check_partition_counts, recreated
from samzapy.checkpoint.ports import Checkpoint
from samzapy.control.rewind import rewind_control
from samzapy.system.ports import SystemAdmin

log = structlog.get_logger("samzapy.container")


async def checked(
    checkpoints: Mapping[TaskName, Checkpoint],
    counts: Mapping[SystemStream, int],
    admins: Mapping[str, SystemAdmin],
    *,
    stateless: bool = False,
) -> tuple[dict[TaskName, Checkpoint], dict[SystemStream, str]]:
    """The checkpoints read at start-up through steps 1 to 3 (``counts``: the inputs'
    partition counts; ``stateless``: the job has no stores, ``check_partition_counts``), and
    the inputs' current topic IDs."""
    check_partition_counts(checkpoints, counts, stateless=stateless)
    topic_ids = await input_topic_ids(admins, counts)
    fresh = forget_recreated_inputs(checkpoints, topic_ids)
    return await forget_streams_gone_back(fresh, counts, admins), topic_ids


async def input_topic_ids(
    admins: Mapping[str, SystemAdmin], inputs: Iterable[SystemStream]
) -> dict[SystemStream, str]:
    """The topic ID of each of ``inputs`` whose system gives IDs, one request per system."""
    by_system: dict[str, list[str]] = defaultdict(list)
    for ss in inputs:
        by_system[ss.system].append(ss.stream)
    out: dict[SystemStream, str] = {}
    for system, streams in sorted(by_system.items()):
        found = await admins[system].topic_ids(streams)
        out.update((SystemStream(system, s), i) for s, i in (found or {}).items())
    return out


def forget_recreated_inputs(
    checkpoints: Mapping[TaskName, Checkpoint], topic_ids: Mapping[SystemStream, str]
) -> dict[TaskName, Checkpoint]:
    """Step 2: ``checkpoints`` without the offsets of the inputs made again since they were
    written (``recreated``: their recorded topic ID is not the current one, of
    ``topic_ids``), their control bookkeeping rewound; one ``input_topic_recreated`` warning
    per input names its partitions, the tasks and both IDs."""
    out = dict(checkpoints)
    found: dict[tuple[SystemStream, str, str], list[tuple[TaskName, SystemStreamPartition]]]
    found = defaultdict(list)
    for task, checkpoint in sorted(checkpoints.items()):
        changed = recreated(checkpoint, topic_ids)
        gone = [ssp for ssp in checkpoint.offsets if ssp.system_stream in changed]
        if not gone:
            continue
        rewound, _ = rewind_control(checkpoint.control, gone, forget_applied=False)
        offsets = {ssp: o for ssp, o in checkpoint.offsets.items() if ssp not in gone}
        out[task] = dataclasses.replace(checkpoint, offsets=offsets, control=rewound)
        for ssp in gone:
            found[(ssp.system_stream, *changed[ssp.system_stream])].append((task, ssp))
    for (stream, before, now), where in sorted(found.items(), key=lambda item: str(item[0])):
        log.warning(
            "input_topic_recreated",
            stream=str(stream),
            checkpointed_topic_id=before,
            topic_id=now,
            partitions=sorted(ssp.partition for _, ssp in where),
            tasks=sorted({str(task) for task, _ in where}),
            reason="the topic was deleted and created again since the checkpoints were "
            "written: their offsets belong to the old topic and are not read; each partition "
            "is read from its offset default (samza.offset.default), and its end-of-stream "
            "and watermark reports are forgotten",
            action="with the offset default upcoming, what the new topic held before this "
            "start is not read: to read it, stop the job and move its position on this "
            'input with `samzapy checkpoint set --to oldest` (docs/deploy.md, "Deleting '
            'an input topic")',
        )
    return out


async def forget_streams_gone_back(
    checkpoints: Mapping[TaskName, Checkpoint],
    counts: Mapping[SystemStream, int],
    admins: Mapping[str, SystemAdmin],
) -> dict[TaskName, Checkpoint]:
    """Step 3: ``checkpoints`` without the input partitions (of ``counts``) whose
    checkpointed offset is past their end now, their control bookkeeping rewound."""
    by_system: dict[str, set[SystemStreamPartition]] = defaultdict(set)
    for checkpoint in checkpoints.values():
        for ssp in checkpoint.offsets:
            if ssp.partition < counts.get(ssp.system_stream, 0):
                by_system[ssp.system].add(ssp)
    ends = {}
    for system, read in by_system.items():
        for ssp, bounds in (await admins[system].offset_bounds(read)).items():
            ends[ssp] = bounds.upcoming
    out = dict(checkpoints)
    for task, checkpoint in checkpoints.items():
        gone = [
            ssp
            for ssp, offset in checkpoint.offsets.items()
            if ssp in ends and _past(admins[ssp.system], offset, ends[ssp])
        ]
        if not gone:
            continue
        rewound, _ = rewind_control(checkpoint.control, gone, forget_applied=False)
        offsets = {ssp: o for ssp, o in checkpoint.offsets.items() if ssp not in gone}
        out[task] = dataclasses.replace(checkpoint, offsets=offsets, control=rewound)
        log.info(  # the consumer warns of the offset, on a system where that is news
            "stream_went_back",
            task=task,
            ssps=sorted(str(ssp) for ssp in gone),
            reason="the checkpointed offset is past the partition's end: the stream was made "
            "again; it is read from its offset default, and its end-of-stream and watermark "
            "reports are forgotten",
        )
    return out


def _past(admin: SystemAdmin, offset: str, end: str) -> bool:
    """Whether the message after ``offset`` would be past ``end`` (False for offsets the
    admin cannot compare)."""
    try:
        return admin.compare_offsets(admin.offset_after(offset), end) > 0
    except ValueError:
        return False


__all__ = ["checked", "forget_recreated_inputs", "forget_streams_gone_back", "input_topic_ids"]
