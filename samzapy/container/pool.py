"""The thread pool of sync tasks (``job.container.thread.pool.size`` above 1), and the calls a
stop leaves running on it.

A call on the pool cannot be cancelled: one that a stop or a release gives up at
``task.shutdown.ms`` runs on in its thread while its task is closed and committed (after a
failure too, the container waits as long for it before it closes the tasks). What a
pool thread sends through a task's collector is that task's call's (a task makes one call at
a time, and each has its own collector): once the task is closed, the loop drops it
(``task_collector.py``).

The same holds for a blocking call an async task hands to the event loop's default executor
(``run_in_executor(None, ...)``, ``asyncio.to_thread``): a stop cancels the task's wait, not
the call. ``samzapy run`` gives its loop a ``DefaultExecutor`` whose shutdown (when the loop
closes) does not wait for such calls either.

The container shuts its pool down without waiting for such calls, but CPython joins every
pool thread when the interpreter exits: ``samzapy run`` would wait for them after its last
line. It asks ``threads_left_running`` and leaves without joining them instead.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time

THREAD_NAME_PREFIX = "samzapy-task"
#: The names of the threads of ``samzapy run``'s event loop's default executor.
EXECUTOR_NAME_PREFIX = "samzapy-executor"

_marks = threading.local()


def _mark() -> None:
    _marks.task_pool = True


def task_pool(size: int) -> concurrent.futures.ThreadPoolExecutor:
    """A pool of ``size`` threads for the sync tasks' calls, each thread marked as such."""
    return concurrent.futures.ThreadPoolExecutor(
        size, thread_name_prefix=THREAD_NAME_PREFIX, initializer=_mark
    )


class DefaultExecutor(concurrent.futures.ThreadPoolExecutor):
    """An event loop's default executor (asyncio's size) whose shutdown never waits for the
    calls running on it: the loop's close asks it to, after the container has stopped, and
    by then every call the container awaits has returned; what still runs is a call a stop
    gave up on."""

    def __init__(self) -> None:
        super().__init__(thread_name_prefix=EXECUTOR_NAME_PREFIX)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=True)


def in_task_pool() -> bool:
    """Whether the calling thread is a task pool's."""
    return getattr(_marks, "task_pool", False)


def threads_left_running(grace_s: float = 0.5) -> int:
    """How many threads of the task pools and of the default executor still run, once each
    had up to ``grace_s`` (all together) to end: an idle thread of a pool shut down ends at
    once, one whose call was given up only when the call returns."""
    deadline = time.monotonic() + grace_s
    left = 0
    for thread in threading.enumerate():
        if thread.name.startswith((THREAD_NAME_PREFIX, EXECUTOR_NAME_PREFIX)):
            thread.join(max(0.0, deadline - time.monotonic()))
            left += thread.is_alive()
    return left


__all__ = [
    "EXECUTOR_NAME_PREFIX",
    "THREAD_NAME_PREFIX",
    "DefaultExecutor",
    "in_task_pool",
    "task_pool",
    "threads_left_running",
]
