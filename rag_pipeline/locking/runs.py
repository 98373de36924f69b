"""Holding a workspace to plan and to run, and whether a run's process still lives."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Hashable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from rag_pipeline.locking.places import _RUN, INDEX, Lock, LockPlace


class LockTimeout(Exception):
    pass


# (place, thread id) → (lock, depth)
_held: dict[tuple[Hashable, int], tuple[Lock, int]] = {}
_guard = threading.Lock()


@contextmanager
def index_lock(place: LockPlace, *, timeout_seconds: float = 3600.0) -> Iterator[None]:
    """Hold the workspace's indexing lock, alone: no run, and no other planner, meanwhile."""
    holder = (place, threading.get_ident())
    with _guard:
        lock, depth = _held.get(holder, (None, 0))
        if lock is not None:
            _held[holder] = (lock, depth + 1)
    if lock is None:
        lock = place.lock(INDEX)
        waiting = f"another indexing run is in progress ({place}); waiting for it"
        if not lock.acquire(timeout_seconds, waiting=waiting):
            raise LockTimeout(
                f"another indexing run holds {place} for more than {timeout_seconds:g} s"
            )
        with _guard:
            _held[holder] = (lock, 1)
    try:
        yield
    finally:
        with _guard:
            lock, depth = _held[holder]
            if depth > 1:
                _held[holder] = (lock, depth - 1)
            else:
                del _held[holder]
                lock.release()


_PROBE_SECONDS = 5.0


@contextmanager
def run_lock(
    place: LockPlace, run_id: str, *, alone: bool = False, timeout_seconds: float = 3600.0
) -> Iterator[None]:
    """Hold what a Dagster run holds while it runs: its own lock (first, so that a run waiting
    for a planner counts as alive), then the workspace's indexing lock, shared with the other
    runs of a plan (their documents are disjoint) or, ``alone``, held alone (a run no plan made,
    say from the Dagster UI, may name any document); unless this process holds that lock already
    (the CLI's in-process run, in the thread that planned it)."""
    own = place.lock(_RUN + run_id)
    if not own.acquire(_PROBE_SECONDS):  # a probe (is_locked) may hold it for an instant
        raise LockTimeout(f"run {run_id} is already running")
    shared = None
    try:
        own.describe_holder(_holder())
        with _guard:
            planning = (place, threading.get_ident()) in _held
        if not planning:
            shared = place.lock(INDEX)
            waiting = f"another plan or run holds {place}; waiting for it"
            if not shared.acquire(timeout_seconds, waiting=waiting, shared=not alone):
                raise LockTimeout(f"{place} was held for more than {timeout_seconds:g} s")
        yield
    finally:
        if shared is not None:
            shared.release()
        # Recorded again as it lets go: the time tells a planner that cannot see this process
        # (another container or machine) since when the run has been finishing. A full disk or
        # a lost connection must not keep the lock held.
        with suppress(Exception):
            own.describe_holder(_holder())
        own.release()


def _holder() -> str:
    """``<pid>@<machine>``: what a run lock records of its holder."""
    return f"{os.getpid()}@{_machine()}"


def _machine() -> str:
    """Where process ids mean the same: the host name and, on Linux, the pid namespace (each
    container has its own)."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return f"{socket.gethostname()}/{namespace}"


@dataclass(frozen=True, slots=True)
class RunLockState:
    holding: bool  # a process holds the run's lock now
    pid: int | None  # the process id the run recorded
    here: bool  # that process id is one of this machine's (same host and pid namespace)
    changed: float  # when the run took or let go of its lock (seconds since the epoch)


def run_lock_state(place: LockPlace, run_id: str) -> RunLockState | None:
    """None when the run never took its lock in ``place``; else what its lock records."""
    recorded = place.holder(_RUN + run_id)
    if recorded is None:
        return None
    holder, changed = recorded
    pid, _, machine = holder.partition("@")
    return RunLockState(
        holding=place.is_locked(_RUN + run_id),
        pid=int(pid) if pid.isdigit() else None,
        here=machine in ("", _machine()),  # none recorded: a lock file of an earlier version
        changed=changed,
    )


def forget_run_locks(place: LockPlace, keep: set[str]) -> None:
    """Forget the run locks of the runs not in ``keep`` that no process holds (and that are not
    being taken: those recorded in the last minute stay)."""
    recent = time.time() - 60.0
    for name in place.holders(_RUN):
        recorded = place.holder(name)
        if recorded is None:
            continue
        fresh = recorded[1] > recent
        if name.removeprefix(_RUN) not in keep and not fresh and not place.is_locked(name):
            place.forget(name)


def process_alive(pid: int) -> bool:
    """Whether a process of this id runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, another user's
        return True
    return True
