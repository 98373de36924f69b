"""One indexing run at a time per home folder, whoever starts it (CLI, sensor, Dagster UI).

An OS file lock, so it is released when its process dies; re-entrant within a process, so the
CLI can hold it across planning and the Dagster run it then executes in-process.
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

_held: dict[Path, tuple[int, int]] = {}  # lock path → (file descriptor, depth)
_guard = threading.Lock()


class IndexLockTimeout(Exception):
    pass


@contextmanager
def index_lock(home: Path, *, timeout_seconds: float = 3600.0) -> Iterator[None]:
    path = (home / "index.lock").resolve()
    with _guard:
        if path in _held:
            descriptor, depth = _held[path]
            _held[path] = (descriptor, depth + 1)
            acquired_here = False
        else:
            acquired_here = True
    if acquired_here:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        _acquire(descriptor, path, timeout_seconds)
        with _guard:
            _held[path] = (descriptor, 1)
    try:
        yield
    finally:
        with _guard:
            descriptor, depth = _held[path]
            if depth > 1:
                _held[path] = (descriptor, depth - 1)
            else:
                del _held[path]
                fcntl.flock(descriptor, fcntl.LOCK_UN)
                os.close(descriptor)


def _acquire(descriptor: int, path: Path, timeout_seconds: float) -> None:
    deadline = time.monotonic() + timeout_seconds
    announced = False
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(descriptor)
                raise IndexLockTimeout(
                    f"another indexing run holds {path} for more than {timeout_seconds:g} s"
                ) from None
            if not announced:
                logger.warning("another indexing run is in progress (%s); waiting for it", path)
                announced = True
            time.sleep(0.5)


def index_is_running(home: Path) -> bool:
    """Whether another process is indexing this home right now."""
    path = (home / "index.lock").resolve()
    if path in _held or not path.exists():
        return False
    descriptor = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return False
    finally:
        os.close(descriptor)
