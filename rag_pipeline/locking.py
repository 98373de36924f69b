"""Inter-process locks: OS file locks, released when their holder closes them or dies.

- :class:`FileLock`: one holder at a time, whoever it is (another process, or another object in
  this process); what the embedded vector store needs, since its engine damages a shard that
  another process opens at the same time (see ``store/edge.py``).
- :func:`index_lock`: one indexing run at a time per home folder, whoever starts it (CLI, sensor,
  Dagster UI); re-entrant within a process, so the CLI can hold it across planning and the
  Dagster run it then executes in-process.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
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

    def acquire(self, timeout_seconds: float, *, waiting: str | None = None) -> bool:
        """Take the lock within ``timeout_seconds``; False if another holder kept it.

        ``waiting`` is logged once when the lock is not free at first.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        deadline = time.monotonic() + timeout_seconds
        announced = False
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
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
        """Write who holds the lock into its file (read by :func:`last_holder`)."""
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


_held: dict[Path, tuple[FileLock, int]] = {}  # index lock path → (lock, depth)
_guard = threading.Lock()


def index_lock_path(home: Path) -> Path:
    return (home / "index.lock").resolve()


@contextmanager
def index_lock(home: Path, *, timeout_seconds: float = 3600.0, holder: str = "") -> Iterator[None]:
    """Hold the home's indexing lock; ``holder`` (a Dagster run id) is written into it, with
    this process's id."""
    path = index_lock_path(home)
    with _guard:
        lock, depth = _held.get(path, (None, 0))
        if lock is not None:
            _held[path] = (lock, depth + 1)
    if lock is None:
        lock = FileLock(path)
        waiting = f"another indexing run is in progress ({path}); waiting for it"
        if not lock.acquire(timeout_seconds, waiting=waiting):
            raise LockTimeout(
                f"another indexing run holds {path} for more than {timeout_seconds:g} s"
            )
        with _guard:
            _held[path] = (lock, 1)
    if holder:
        lock.describe_holder(f"{holder} {os.getpid()}")
    try:
        yield
    finally:
        with _guard:
            lock, depth = _held[path]
            if depth > 1:
                _held[path] = (lock, depth - 1)
            else:
                del _held[path]
                lock.release()


def index_is_running(home: Path) -> bool:
    """Whether another process, or another thread here, is indexing this home right now."""
    return is_locked(index_lock_path(home))


def last_holder(home: Path) -> tuple[str, int | None]:
    """(what the current or last holder of the home's indexing lock said it was, its process
    id); ("", None) when none said."""
    try:
        holder, _, pid = index_lock_path(home).read_text().partition(" ")
    except OSError:
        return "", None
    return holder, int(pid) if pid.isdigit() else None


def process_alive(pid: int) -> bool:
    """Whether a process of this id runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, another user's
        return True
    return True
