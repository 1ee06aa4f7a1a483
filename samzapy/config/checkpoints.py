"""What ``task.checkpoint.factory`` asks of ``task.checkpoint.system``.

Only the ``kafka`` and ``stream`` factories keep their checkpoints in a stream, on the system
``task.checkpoint.system`` names (which must keep message keys: the validator checks that).
Under ``file`` or ``memory``, or with checkpoints off, the key would do nothing: it is a
problem rather than ignored, since the factory is then most likely not the one meant (the
checkpoints would not be where the key says). Beside a ``module:Class`` factory (the user's
own) it is not checked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

FACTORY_KEY = "task.checkpoint.factory"
SYSTEM_KEY = "task.checkpoint.system"
#: The factories that keep the checkpoints in a stream on ``task.checkpoint.system``.
STREAM_FACTORIES = ("kafka", "stream")
#: The built-in factories that keep them elsewhere (None: checkpoints off).
STREAMLESS_FACTORIES = (None, "file", "memory")


def checkpoint_system(values: Mapping[str, Any], problem: Callable[[str, str], None]) -> str | None:
    """The system of the checkpoint stream when one is set for a factory that has one, else
    None; a ``task.checkpoint.system`` that a built-in factory would ignore is reported through
    ``problem(key, message)``."""
    system = values.get(SYSTEM_KEY)
    if not isinstance(system, str):
        return None
    factory = values.get(FACTORY_KEY)
    factory = (factory.strip() or None) if isinstance(factory, str) else factory
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
