"""What every lock and every place of a workspace's locks does, and the locks' names."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

logger = logging.getLogger(__name__)

INDEX = "index"
_RUN = "run/"


class Lock(Protocol):
    def acquire(
        self, timeout_seconds: float, *, waiting: str | None = None, shared: bool = False
    ) -> bool:
        """Take the lock within ``timeout_seconds``; False if another holder kept it.

        ``waiting`` is logged once when the lock is not free at first. A ``shared`` holder
        admits other shared holders, and excludes exclusive ones.
        """

    def describe_holder(self, text: str) -> None:
        """Record who holds the lock, and when (read back by :meth:`LockPlace.holder`)."""

    def release(self) -> None: ...


class LockPlace(Protocol):
    """Where a workspace's indexing locks live; hashable, so equal places are one place."""

    def lock(self, name: str) -> Lock: ...

    def is_locked(self, name: str) -> bool:
        """Whether some holder holds the lock ``name`` now."""

    def holder(self, name: str) -> tuple[str, float] | None:
        """What the lock's last holder recorded, and when (seconds since the epoch)."""

    def holders(self, prefix: str) -> list[str]:
        """The names, starting with ``prefix``, of the locks whose holders recorded themselves."""

    def forget(self, name: str) -> None:
        """Drop what the lock's holders recorded."""


def _retry(
    attempt: Callable[[], bool],
    timeout_seconds: float,
    waiting: str | None,
    interval_seconds: float = 0.05,
) -> bool:
    """Call ``attempt`` every ``interval_seconds`` until it succeeds or ``timeout_seconds`` have
    passed."""
    deadline = time.monotonic() + timeout_seconds
    announced = False
    while not attempt():
        if time.monotonic() >= deadline:
            return False
        if waiting and not announced:
            logger.warning(waiting)
            announced = True
        time.sleep(interval_seconds)
    return True
