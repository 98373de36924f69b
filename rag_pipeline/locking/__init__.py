"""Inter-process locks: released when their holder lets go or dies.

- :class:`FileLock`: an OS file lock, one holder at a time, whoever it is (another process, or
  another object in this process); what the embedded vector store needs, since its engine damages
  a shard that another process opens at the same time (see ``store/edge.py``). Shared holders,
  if asked.
- A workspace's indexing locks live in a :class:`LockPlace`: files in its home
  (:class:`HomeLocks`, the embedded default: the processes of one host, or of hosts sharing a
  file system with working ``flock``) or, with the catalog on PostgreSQL, advisory locks in that
  database (:class:`DatabaseLocks`: held across machines, and let go when the holder's
  connection ends, its process or machine gone). :func:`lock_place` picks it from the settings.
- :func:`index_lock`: the workspace to oneself, for planning (repairs, finding changes) and for
  the CLI's in-process run, whoever starts it (CLI, sensor); re-entrant within a thread, so the
  CLI can hold it across planning and the Dagster run it then executes in-process (in the same
  thread), while two threads (a daemon's sensor and schedule) exclude each other.
- :func:`run_lock`: what a Dagster run holds while it runs: the index lock shared with the other
  runs of a plan (their documents are disjoint: one plan made them), and a lock of its own that
  tells whether its process still lives (:func:`run_lock_state`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rag_pipeline.locking.files import FileLock, HomeLocks
from rag_pipeline.locking.places import INDEX, Lock, LockPlace
from rag_pipeline.locking.postgres import AdvisoryLock, DatabaseLocks
from rag_pipeline.locking.runs import (
    LockTimeout,
    RunLockState,
    forget_run_locks,
    index_lock,
    process_alive,
    run_lock,
    run_lock_state,
)

if TYPE_CHECKING:
    from rag_pipeline.config import Settings

__all__ = [
    "INDEX",
    "AdvisoryLock",
    "DatabaseLocks",
    "FileLock",
    "HomeLocks",
    "Lock",
    "LockPlace",
    "LockTimeout",
    "RunLockState",
    "forget_run_locks",
    "index_lock",
    "lock_place",
    "process_alive",
    "run_lock",
    "run_lock_state",
]


def lock_place(settings: Settings) -> HomeLocks | DatabaseLocks:
    """The workspace's lock place: beside its catalog when that is on PostgreSQL (shared by
    machines), else its home."""
    if settings.catalog.url:
        return DatabaseLocks(settings.catalog.url, settings.collection_prefix)
    return HomeLocks(settings.home)
