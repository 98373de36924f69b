"""The embedded store kept open between the passes of a long-lived process (the watcher).

Opening a large shard takes seconds (the engine maps each segment and reads its sparse index's
tracker), most of a watcher's pass over one changed file. While :func:`keeping_open` is in
force, a shard this process opens stays open when closed (its writes flushed), and the next
pass finds it open; until another process asks for it. A process that finds a shard taken asks
by holding the shard's ask lock, shared, while it waits for the shard's lock
(``edge.acquire_asking``); the keeper looks for such askers a few times a second and lets go
of a shard nobody in this process is using. A process that dies asking asks no more: the
operating system releases its lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline.store.edge import EdgeStore, asked_for

_ASKED_POLL_SECONDS = 0.2


@dataclass(slots=True)
class _Kept:
    store: EdgeStore
    users: int


class StoreKeeper:
    """The shards this process keeps open, each with how many of its callers hold it now."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._kept: dict[Path, _Kept] = {}
        self._stop = threading.Event()
        self._watching = threading.Thread(
            target=self._let_go_when_asked, name="store-keeper", daemon=True
        )
        self._watching.start()

    def open(self, path: Path, *, wait_seconds: float) -> EdgeStore:
        """The shard at ``path``: the one kept open, else opened now (and kept from then on)."""
        with self._guard:
            kept = self._kept.get(path)
            if kept is not None:
                kept.users += 1
                return kept.store
        store = EdgeStore(path, wait_seconds=wait_seconds, keeper=self)
        with self._guard:
            self._kept[path] = _Kept(store, 1)
        return store

    def give_back(self, store: EdgeStore) -> bool:
        """A caller is done with ``store``: whether it stays open (False: close it now, it was
        dropped or is not one this keeper holds)."""
        with self._guard:
            kept = self._kept.get(store.path)
            if kept is None or kept.store is not store:
                return False
            kept.users -= 1
            if store.is_dropped:
                del self._kept[store.path]
                return False
            return True

    def close(self) -> None:
        """Let go of every shard (callers still holding one close it themselves)."""
        self._stop.set()
        self._watching.join()
        with self._guard:
            idle = [path for path, kept in self._kept.items() if kept.users == 0]
            for path in idle:
                self._let_go(path)
            for kept in self._kept.values():
                kept.store.keeper = None
            self._kept.clear()

    def _let_go_when_asked(self) -> None:
        while not self._stop.wait(_ASKED_POLL_SECONDS):
            with self._guard:
                asked = [
                    path for path, kept in self._kept.items() if kept.users == 0 and asked_for(path)
                ]
                for path in asked:
                    self._let_go(path)

    def _let_go(self, path: Path) -> None:
        store = self._kept.pop(path).store
        store.keeper = None
        store.close()


_active: StoreKeeper | None = None


def active_keeper() -> StoreKeeper | None:
    return _active


@contextmanager
def keeping_open() -> Iterator[StoreKeeper]:
    """Keep the embedded shards this process opens open between uses, until the block ends."""
    global _active
    if _active is not None:  # kept already, by an enclosing block
        yield _active
        return
    _active = keeper = StoreKeeper()
    try:
        yield keeper
    finally:
        _active = None
        keeper.close()
