"""The thread pool of sync tasks (``job.container.thread.pool.size`` above 1).

A call on the pool cannot be cancelled: one that a stop or a release gives up at
``task.shutdown.ms`` runs on in its thread while its task is closed and committed. What a
pool thread sends through a task's collector is that task's call's (a task makes one call at
a time, and each has its own collector): once the task is closed, the loop drops it
(``task_collector.py``).
"""

from __future__ import annotations

import concurrent.futures
import threading

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


__all__ = ["THREAD_NAME_PREFIX", "in_task_pool", "task_pool"]
