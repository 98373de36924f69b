"""Inter-process locks: OS file locks, released when their holder closes them or dies.

- :class:`FileLock`: one holder at a time, whoever it is (another process, or another object in
  this process); what the embedded vector store needs, since its engine damages a shard that
  another process opens at the same time (see ``store/edge.py``). Shared holders, if asked.
- :func:`index_lock`: the home folder to oneself, for planning (repairs, finding changes) and
  for the CLI's in-process run, whoever starts it (CLI, sensor); re-entrant within a thread,
  so the CLI can hold it across planning and the Dagster run it then executes in-process (in
  the same thread), while two threads (a daemon's sensor and schedule) exclude each other.
- :func:`run_lock`: what a Dagster run holds while it runs: the home folder shared with the
  other runs (their documents are disjoint: one plan made them), and a lock of its own that
  tells whether its process still lives (:func:`run_lock_state`).
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)


class LockTimeout(Exception):
    pass


class FileLock:
    """An exclusive ``flock`` on ``path``, taken through a descriptor of its own.

    ``flock`` belongs to the open file, so two holders in one process exclude each other like
    two processes do, and the descriptor is not inherited across ``exec``.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._descriptor: int | None = None

    def acquire(
        self, timeout_seconds: float, *, waiting: str | None = None, shared: bool = False
    ) -> bool:
        """Take the lock within ``timeout_seconds``; False if another holder kept it.

        ``waiting`` is logged once when the lock is not free at first. A ``shared`` holder
        admits other shared holders, and excludes exclusive ones.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        deadline = time.monotonic() + timeout_seconds
        announced = False
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        while True:
            try:
                fcntl.flock(descriptor, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(descriptor)
                    return False
                if waiting and not announced:
                    logger.warning(waiting)
                    announced = True
                time.sleep(0.05)
            else:
                self._descriptor = descriptor
                return True

    def describe_holder(self, text: str) -> None:
        """Write who holds the lock into its file (read by :func:`run_lock_state`)."""
        if self._descriptor is None:
            raise RuntimeError("describe_holder() without holding the lock")
        os.ftruncate(self._descriptor, 0)
        os.pwrite(self._descriptor, text.encode(), 0)

    def release(self) -> None:
        if self._descriptor is not None:
            fcntl.flock(self._descriptor, fcntl.LOCK_UN)
            os.close(self._descriptor)
            self._descriptor = None

    @property
    def held(self) -> bool:
        return self._descriptor is not None


def is_locked(path: Path) -> bool:
    """Whether some holder (another process, or another lock object here) holds ``path``."""
    if not path.exists():
        return False
    probe = FileLock(path)
    if probe.acquire(0):
        probe.release()
        return False
    return True


# (index lock path, thread id) → (lock, depth)
_held: dict[tuple[Path, int], tuple[FileLock, int]] = {}
_guard = threading.Lock()


def index_lock_path(home: Path) -> Path:
    return (home / "index.lock").resolve()


@contextmanager
def index_lock(home: Path, *, timeout_seconds: float = 3600.0) -> Iterator[None]:
    """Hold the home's indexing lock, alone: no run, and no other planner, meanwhile."""
    path = index_lock_path(home)
    holder = (path, threading.get_ident())
    with _guard:
        lock, depth = _held.get(holder, (None, 0))
        if lock is not None:
            _held[holder] = (lock, depth + 1)
    if lock is None:
        lock = FileLock(path)
        waiting = f"another indexing run is in progress ({path}); waiting for it"
        if not lock.acquire(timeout_seconds, waiting=waiting):
            raise LockTimeout(
                f"another indexing run holds {path} for more than {timeout_seconds:g} s"
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


def _run_lock_path(home: Path, run_id: str) -> Path:
    return home.resolve() / "run-locks" / f"{run_id}.lock"


@contextmanager
def run_lock(
    home: Path, run_id: str, *, alone: bool = False, timeout_seconds: float = 3600.0
) -> Iterator[None]:
    """Hold what a Dagster run holds while it runs: its own lock (first, so that a run waiting
    for a planner counts as alive), then the home's indexing lock, shared with the other runs
    of a plan (their documents are disjoint) or, ``alone``, held alone (a run no plan made, say
    from the Dagster UI, may name any document); unless this process holds that lock already
    (the CLI's in-process run, in the thread that planned it)."""
    own = FileLock(_run_lock_path(home, run_id))
    if not own.acquire(_PROBE_SECONDS):  # a probe (is_locked) holds it for an instant
        raise LockTimeout(f"run {run_id} is already running")
    own.describe_holder(_holder())
    shared = None
    try:
        with _guard:
            planning = (index_lock_path(home), threading.get_ident()) in _held
        if not planning:
            shared = FileLock(index_lock_path(home))
            waiting = f"another plan or run holds {home}; waiting for it"
            if not shared.acquire(timeout_seconds, waiting=waiting, shared=not alone):
                raise LockTimeout(f"{home} was held for more than {timeout_seconds:g} s")
        yield
    finally:
        if shared is not None:
            shared.release()
        # Written again as it lets go: the file's time tells a planner that cannot see this
        # process (another container or machine) since when the run has been finishing. A full
        # disk must not keep the lock held.
        with suppress(OSError):
            own.describe_holder(_holder())
        own.release()


def _holder() -> str:
    """``<pid>@<machine>``: what a run lock's file records of its holder."""
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


def run_lock_state(home: Path, run_id: str) -> RunLockState | None:
    """None when the run never took its lock in ``home``; else what its lock file says."""
    path = _run_lock_path(home, run_id)
    try:
        holder = path.read_text()
        changed = path.stat().st_mtime
    except OSError:
        return None
    pid, _, machine = holder.partition("@")
    return RunLockState(
        holding=is_locked(path),
        pid=int(pid) if pid.isdigit() else None,
        here=machine in ("", _machine()),  # none recorded: a lock file of an earlier version
        changed=changed,
    )


def forget_run_locks(home: Path, keep: set[str]) -> None:
    """Remove the lock files of the runs not in ``keep`` that no process holds (and that are
    not being taken: those written in the last minute stay)."""
    folder = _run_lock_path(home, "-").parent
    recent = time.time() - 60.0
    for path in folder.glob("*.lock") if folder.exists() else []:
        try:
            fresh = path.stat().st_mtime > recent
        except FileNotFoundError:
            continue
        if path.stem not in keep and not fresh and not is_locked(path):
            path.unlink(missing_ok=True)


def process_alive(pid: int) -> bool:
    """Whether a process of this id runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, another user's
        return True
    return True
