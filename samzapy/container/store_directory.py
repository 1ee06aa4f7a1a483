"""The job's store directory ``<job.logged.store.base.dir>/<job.name>``, claimed before use.

Every local store of the job lives under it: a task's store in ``<store>/<task>``, its
snapshots in ``<store>/<task>.snapshots``, a standby's copy beside it. It is named by
``job.name`` alone, so a job claims it by its owner file (``checkpoint/owner_file.py``)
before its containers or standbys open a store there, and refuses another job's
(``JobCollisionError``). A job whose stores keep nothing on disk (``inmemory``) neither
creates nor claims it.
"""

from __future__ import annotations

from pathlib import Path

from samzapy.checkpoint.owner import JobIdentity
from samzapy.checkpoint.owner_file import STORE_DIRECTORY, claim_directory
from samzapy.config import ResolvedConfig
from samzapy.storage.registry import store_factory_for


def job_store_directory(config: ResolvedConfig) -> Path:
    """``<job.logged.store.base.dir>/<job.name>``: where the job's stores live."""
    return Path(config.job.logged_store_base_dir) / config.job.name


def claim_store_directory(config: ResolvedConfig) -> None:
    """Claim the job's store directory when a store of the job keeps its entries on disk
    (created if missing); JobCollisionError when it is another job's."""
    stores = config.stores.values()
    if any(store_factory_for(store.name, store.factory).persistent for store in stores):
        job = JobIdentity(config.job.name, config.job.id)
        claim_directory(job_store_directory(config), job, STORE_DIRECTORY)


__all__ = ["claim_store_directory", "job_store_directory"]
