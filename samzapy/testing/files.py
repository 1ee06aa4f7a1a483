"""Where a TestRunner keeps what its job writes to disk: a directory of its namespace.

Not ``./state``, which every runner (and every run of a test suite) would share: a job that
found another's checkpoints there would resume from them and read nothing. The directory is
under the system's temporary directory, the same for a runner of the same namespace (a
restart), and removed when the process exits. It holds:

1. the persistent stores (``job.logged.store.base.dir``), unless the config says;
2. the ``file`` checkpoints (``task.checkpoint.dir``) of a config that asks for them and
   gives no directory.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any

#: The directories of this process's runners: removed at exit.
_DIRS: set[str] = set()


def runner_dir(namespace: str) -> str:
    """The directory of ``namespace``: step 1's ``job.logged.store.base.dir``."""
    path = os.path.join(tempfile.gettempdir(), "samzapy-testrunner", namespace)
    if not _DIRS:
        atexit.register(_remove_dirs)
    _DIRS.add(path)
    return path


def checkpoint_dir(config: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """Step 2: ``task.checkpoint.dir`` in the directory of ``namespace`` for ``config`` (the
    job's keys) when it has ``file`` checkpoints and no directory; else nothing."""
    if config.get("task.checkpoint.factory") != "file" or config.get("task.checkpoint.dir"):
        return {}
    return {"task.checkpoint.dir": os.path.join(runner_dir(namespace), "checkpoints")}


def _remove_dirs() -> None:
    for path in _DIRS:
        shutil.rmtree(path, ignore_errors=True)


__all__ = ["checkpoint_dir", "runner_dir"]
