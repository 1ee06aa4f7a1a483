"""The thread pool of sync tasks (``job.container.thread.pool.size`` above 1), and the calls a
stop leaves running on it.

A call on the pool cannot be cancelled: one that a stop or a release gives up at
``task.shutdown.ms`` runs on in its thread while its task is closed and committed. What a
pool thread sends through a task's collector is that task's call's (a task makes one call at
a time, and each has its own collector): once the task is closed, the loop drops it
(``task_collector.py``).

The container shuts its pool down without waiting for such calls, but CPython joins every
pool thread when the interpreter exits: ``samzapy run`` would wait for them after its last
line. It asks ``threads_left_running`` and leaves without joining them instead.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time

THREAD_NAME_PREFIX = "samzapy-task"

_marks = threading.local()


def _mark() -> None:
    _marks.task_pool = True


def task_pool(size: int) -> concurrent.futures.ThreadPoolExecutor:
    """A pool of ``size`` threads for the sync tasks' calls, each thread marked as such."""
    return concurrent.futures.ThreadPoolExecutor(
        size, thread_name_prefix=THREAD_NAME_PREFIX, initializer=_mark
    )


def in_task_pool() -> bool:
    """Whether the calling thread is a task pool's."""
    return getattr(_marks, "task_pool", False)


def threads_left_running(grace_s: float = 0.5) -> int:
    """How many task pool threads still run, once each had up to ``grace_s`` (all together)
    to end: an idle thread of a pool shut down ends at once, one whose call was given up
    only when the call returns."""
    deadline = time.monotonic() + grace_s
    left = 0
    for thread in threading.enumerate():
        if thread.name.startswith(THREAD_NAME_PREFIX):
            thread.join(max(0.0, deadline - time.monotonic()))
            left += thread.is_alive()
    return left


__all__ = ["THREAD_NAME_PREFIX", "in_task_pool", "task_pool", "threads_left_running"]
