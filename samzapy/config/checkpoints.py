"""What ``task.checkpoint.factory`` asks of ``task.checkpoint.system`` and
``task.checkpoint.dir``.

Only the ``kafka`` and ``stream`` factories keep their checkpoints in a stream, on the system
``task.checkpoint.system`` names (which must keep message keys: the validator checks that).
Under ``file`` or ``memory``, or with checkpoints off, the key would do nothing: it is a
problem rather than ignored, since the factory is then most likely not the one meant (the
checkpoints would not be where the key says). Likewise ``task.checkpoint.dir`` is only the
``file`` factory's: set with checkpoints off, say, a restart would not resume where the job
file seems to keep its checkpoints. Beside a ``module:Class`` factory (the user's own, which
gets both) neither is checked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

FACTORY_KEY = "task.checkpoint.factory"
SYSTEM_KEY = "task.checkpoint.system"
DIR_KEY = "task.checkpoint.dir"
#: The factories that keep the checkpoints in a stream on ``task.checkpoint.system``.
STREAM_FACTORIES = ("kafka", "stream")
#: The built-in factories that keep them elsewhere (None: checkpoints off).
STREAMLESS_FACTORIES = (None, "file", "memory")


def checkpoint_system(values: Mapping[str, Any], problem: Callable[[str, str], None]) -> str | None:
    """The system of the checkpoint stream when one is set for a factory that has one, else
    None; a ``task.checkpoint.system`` or ``task.checkpoint.dir`` that a built-in factory would
    ignore is reported through ``problem(key, message)``."""
    factory = values.get(FACTORY_KEY)
    factory = (factory.strip() or None) if isinstance(factory, str) else factory
    directory = values.get(DIR_KEY)
    if (  # a blank one (``${CHECKPOINT_DIR:-}``) names no directory, as the file factory says
        isinstance(directory, str)
        and directory.strip()
        and factory in (None, "memory", *STREAM_FACTORIES)
    ):
        what = "unset (checkpoints are off)" if factory is None else repr(factory)
        problem(
            DIR_KEY,
            f"{DIR_KEY} is set ({directory!r}), but {FACTORY_KEY} is {what}, which keeps "
            f"no checkpoint files: {DIR_KEY} is only for {FACTORY_KEY} file; set that, or "
            f"leave {DIR_KEY} out",
        )
    system = values.get(SYSTEM_KEY)
    if not isinstance(system, str):
        return None
    if factory in STREAM_FACTORIES:
        return system
    if factory in STREAMLESS_FACTORIES:
        what = "unset (checkpoints are off)" if factory is None else repr(factory)
        problem(
            SYSTEM_KEY,
            f"{SYSTEM_KEY} is set ({system!r}), but {FACTORY_KEY} is {what}, which keeps no "
            f"checkpoint stream: {SYSTEM_KEY} is only for {FACTORY_KEY} kafka or stream; set "
            f"one of those, or leave {SYSTEM_KEY} out",
        )
    return None


__all__ = ["STREAM_FACTORIES", "checkpoint_system"]
