"""Locks that are files: ``flock`` on a file of the workspace's home."""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline.locking.places import _RUN, INDEX, _retry


class FileLock:
    """An ``flock`` on ``path``, taken through a descriptor of its own.

    ``flock`` belongs to the open file, so two holders in one process exclude each other like
    two processes do, and the descriptor is not inherited across ``exec``.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._descriptor: int | None = None

    def acquire(
        self, timeout_seconds: float, *, waiting: str | None = None, shared: bool = False
    ) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB

        def attempt() -> bool:
            try:
                fcntl.flock(descriptor, mode)
            except BlockingIOError:
                return False
            return True

        if not _retry(attempt, timeout_seconds, waiting):
            os.close(descriptor)
            return False
        self._descriptor = descriptor
        return True

    def describe_holder(self, text: str) -> None:
        """Write ``text`` into the lock's file (its time says when)."""
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


@dataclass(frozen=True, slots=True)
class HomeLocks:
    """Lock files in the workspace's home: ``index.lock``, ``run-locks/<run id>.lock``."""

    home: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "home", self.home.resolve())

    def path(self, name: str) -> Path:
        if name.startswith(_RUN):
            return self.home / "run-locks" / f"{name.removeprefix(_RUN)}.lock"
        return self.home / f"{name}.lock"

    def lock(self, name: str) -> FileLock:
        return FileLock(self.path(name))

    def is_locked(self, name: str) -> bool:
        path = self.path(name)
        if not path.exists():
            return False
        probe = FileLock(path)
        if probe.acquire(0):
            probe.release()
            return False
        return True

    def holder(self, name: str) -> tuple[str, float] | None:
        path = self.path(name)
        try:
            return path.read_text(), path.stat().st_mtime
        except OSError:
            return None

    def holders(self, prefix: str) -> list[str]:
        folder = self.path(f"{prefix}-").parent
        return [f"{prefix}{path.stem}" for path in folder.glob("*.lock")] if folder.is_dir() else []

    def __str__(self) -> str:
        return str(self.path(INDEX))

    def forget(self, name: str) -> None:
        self.path(name).unlink(missing_ok=True)
