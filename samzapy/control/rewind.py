"""A partition read afresh: what of a task's control bookkeeping goes with it.

A partition is read again from an earlier offset when ``samzapy checkpoint set`` moves it
back, or when the stream itself went back: its checkpointed offset is past its end (a topic
recreated, or a memory stream, which lives as long as its process). Its old control
bookkeeping would then be wrong for what is read (``rewind_control``):

1. its end-of-stream and watermark reports are forgotten (a partition that had ended would
   otherwise never be read again);
2. the origins it applied as a reader of a framed stream are forgotten (they would drop
   every record read again as a duplicate);
3. its writer epoch goes up by one, as ``samza.reset.offset`` does at start-up (which reads
   its partitions afresh the same way, steps 1 and 2 at once): the records
   the task sends again carry positions above every old one, so the readers downstream take
   them as new instead of dropping them as duplicates of what they applied.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from samzapy.api.system import SystemStreamPartition


@dataclass(frozen=True)
class Rewound:
    """What ``rewind_control`` reset for one partition moved back."""

    #: Its end-of-stream and watermark reports were forgotten.
    reports: bool = False
    #: The origins it applied as a reader were forgotten.
    applied: bool = False
    #: Its writer epoch, before and after (None: the task has no epochs).
    epochs: tuple[int, int] | None = None

    def notes(self) -> list[str]:
        """What was reset, in words (``samzapy checkpoint set`` prints them)."""
        notes = []
        if self.reports:
            notes.append("its end-of-stream and watermark reports forgotten")
        if self.applied:
            notes.append("the origins it applied forgotten")
        if self.epochs is not None:
            notes.append(f"writer epoch {self.epochs[0]} -> {self.epochs[1]}")
        return notes


def rewind_control(
    control: Mapping[str, Any] | None,
    back: Iterable[SystemStreamPartition],
    *,
    forget_applied: bool = True,
    epochs: bool = True,
) -> tuple[Mapping[str, Any] | None, dict[SystemStreamPartition, Rewound]]:
    """A task's control bookkeeping (``TaskControl.to_json``) with the partitions in ``back``
    read afresh (the module docstring's steps 1 to 3), and what was reset for each. Not
    ``forget_applied``: step 2 is left out, for a stream made again, whose writers' positions
    did not go back (the records they send again for what was applied are still copies).
    Not ``epochs``: step 3 is left out, for a task starting with ``samza.reset.offset``,
    whose writer origins move the epochs themselves."""
    back = list(back)
    if control is None or not back:
        return control, {}
    out = copy.deepcopy(dict(control))
    partitions = out.get("partitions")
    origins = out.get("origins")
    applied = origins.get("applied") if isinstance(origins, dict) else None
    saved_epochs = origins.get("epochs") if isinstance(origins, dict) else None
    rewound: dict[SystemStreamPartition, Rewound] = {}
    for ssp in back:
        name = str(ssp)
        # 1. End-of-stream and watermark reports.
        reports = isinstance(partitions, dict) and partitions.pop(name, None) is not None
        # 2. Applied origins.
        forgot = (
            forget_applied and isinstance(applied, dict) and applied.pop(name, None) is not None
        )
        # 3. The writer epoch.
        moved: tuple[int, int] | None = None
        if isinstance(saved_epochs, dict) and epochs:
            before = int(saved_epochs.get(name, 0))
            saved_epochs[name] = before + 1
            moved = (before, before + 1)
        if reports or forgot or moved is not None:
            rewound[ssp] = Rewound(reports, forgot, moved)
    return out, rewound


__all__ = ["Rewound", "rewind_control"]
