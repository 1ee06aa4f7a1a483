"""Which event loop a job runs on: uvloop when installed, unless ``job.loop: asyncio``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def loop_factory(configured: str) -> tuple[LoopFactory, str]:
    """The factory for ``job.loop`` and the name of the loop it makes ("uvloop" falls back
    to "asyncio" when uvloop is not installed)."""
    if configured != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            factory: LoopFactory = uvloop.new_event_loop
            return factory, "uvloop"
    return asyncio.new_event_loop, "asyncio"


__all__ = ["LoopFactory", "loop_factory"]
