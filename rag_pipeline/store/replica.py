"""What the chat page searches while indexing runs write: the index itself, or a replica of it.

A Qdrant server serves any number of readers, so with ``store.url`` the page searches it
directly (through ``CommittedOnly``). The embedded engine admits one process per shard, and an
indexing run holds its shard while it writes. So the page keeps a replica of its own under
``<home>/serving/replica``, which no other process opens, and brings it up to date from what a
run leaves readable while it writes: the catalog (a database read while it is written) and the
embedding cache (SQLite in WAL mode); how, in ``mirror.py``. It holds committed versions only.
Queries never wait for a run, and never see a lock error.

Either way the page answers from the live collection. When a collection built for other models
goes live, the page switches to it (a new replica is built first, while the old one answers).
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Collection
from typing import Protocol

import numpy as np

from rag_pipeline.catalog import Catalog, CollectionRecord
from rag_pipeline.config import Settings
from rag_pipeline.store import SearchableStore, VectorStore, open_vector_store, uses_server
from rag_pipeline.store.catalog_views import CommittedOnly
from rag_pipeline.store.mirror import (
    CollectionMirror,
    RefreshReport,
    held_record,
    replica_root,
)
from rag_pipeline.store.schema import Hit, NearestHits, QueryFilter

# The same name as the mirror's (see mirror.py).
logger = logging.getLogger("serving.replica")


class ServingStore(SearchableStore, Protocol):
    @property
    def collection(self) -> CollectionRecord | None:
        """The collection answering now (None before anything is indexed)."""

    def refresh(self) -> RefreshReport:
        """Take in what indexing runs changed since the last refresh."""

    def close(self) -> None: ...


def open_serving_store(settings: Settings, catalog: Catalog) -> ServingStore:
    """The Qdrant server itself when one is configured, else a replica of the embedded index."""
    if uses_server(settings):
        return _SharedStore(settings, catalog)
    return EmbeddedReplica(settings, catalog)


class _SharedStore:
    """A Qdrant server: every process reads it directly, so there is nothing to copy."""

    def __init__(self, settings: Settings, catalog: Catalog) -> None:
        self._settings = settings
        self._catalog = catalog
        self._lock = threading.Lock()
        self._live: CollectionRecord | None = None
        self._store: VectorStore | None = None
        self._search: SearchableStore | None = None
        self.refresh()

    @property
    def collection(self) -> CollectionRecord | None:
        return self._live

    def nearest(
        self,
        dense: np.ndarray,
        sparse: tuple[np.ndarray, np.ndarray],
        *,
        limit: int,
        query_filter: QueryFilter | None = None,
        image: np.ndarray | None = None,
        multilingual: np.ndarray | None = None,
    ) -> NearestHits:
        search = self._search
        if search is None:
            return NearestHits([], [])
        return search.nearest(
            dense,
            sparse,
            limit=limit,
            query_filter=query_filter,
            image=image,
            multilingual=multilingual,
        )

    def nearest_pictures(
        self, image: np.ndarray, *, limit: int, query_filter: QueryFilter | None = None
    ) -> list[Hit]:
        search = self._search
        if search is None:
            return []
        return search.nearest_pictures(image, limit=limit, query_filter=query_filter)

    def page_keyword_scores(
        self, sparse: tuple[np.ndarray, np.ndarray], point_ids: Collection[str]
    ) -> list[Hit]:
        search = self._search
        return [] if search is None else search.page_keyword_scores(sparse, point_ids)

    def holds_multilingual(self) -> bool:
        search = self._search
        return search is not None and search.holds_multilingual()

    def refresh(self) -> RefreshReport:
        live = self._catalog.live_collection()
        if live is None or (self._live is not None and live.name == self._live.name):
            return RefreshReport()
        store = open_vector_store(self._settings, live.name)
        with self._lock:
            previous = self._store
            self._live, self._store = live, store
            self._search = CommittedOnly(store, self._catalog, live.name)
        if previous is not None:
            previous.close()
        return RefreshReport()

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()


class EmbeddedReplica:
    def __init__(self, settings: Settings, catalog: Catalog) -> None:
        self.settings = settings
        self.catalog = catalog
        self._lock = threading.Lock()  # one search or one document's update at a time
        self._mirror: CollectionMirror | None = None

    @property
    def collection(self) -> CollectionRecord | None:
        mirror = self._mirror
        return mirror.collection if mirror else None

    def nearest(
        self,
        dense: np.ndarray,
        sparse: tuple[np.ndarray, np.ndarray],
        *,
        limit: int,
        query_filter: QueryFilter | None = None,
        image: np.ndarray | None = None,
        multilingual: np.ndarray | None = None,
    ) -> NearestHits:
        with self._lock:
            if self._mirror is None:
                return NearestHits([], [])
            return self._mirror.store.nearest(
                dense,
                sparse,
                limit=limit,
                query_filter=query_filter,
                image=image,
                multilingual=multilingual,
            )

    def nearest_pictures(
        self, image: np.ndarray, *, limit: int, query_filter: QueryFilter | None = None
    ) -> list[Hit]:
        with self._lock:
            if self._mirror is None:
                return []
            return self._mirror.store.nearest_pictures(
                image, limit=limit, query_filter=query_filter
            )

    def page_keyword_scores(
        self, sparse: tuple[np.ndarray, np.ndarray], point_ids: Collection[str]
    ) -> list[Hit]:
        with self._lock:
            if self._mirror is None:
                return []
            return self._mirror.store.page_keyword_scores(sparse, point_ids)

    def holds_multilingual(self) -> bool:
        with self._lock:
            return self._mirror is not None and self._mirror.store.holds_multilingual()

    def refresh(self) -> RefreshReport:
        live = self.catalog.live_collection()
        if live is None:
            return RefreshReport()
        if self._mirror is not None and self._mirror.collection.name == live.name:
            return self._mirror.refresh(self.catalog, self._lock)
        # Another collection went live: build its replica, then swap; the old one answers
        # meanwhile (its own lock is not shared with queries until the swap).
        mirror = CollectionMirror(self.settings, live, self.catalog)
        report = mirror.refresh(self.catalog, threading.Lock())
        with self._lock:
            previous, self._mirror = self._mirror, mirror
        if previous is not None:
            previous.close()
        _remove_other_replicas(self.settings, keep=live.name)
        return report

    def close(self) -> None:
        with self._lock:
            if self._mirror is not None:
                self._mirror.close()


def _remove_other_replicas(settings: Settings, keep: str) -> None:
    """Replicas of collections that no longer answer (and of the layout before collections)."""
    root = replica_root(settings)
    for path in root.iterdir() if root.is_dir() else ():
        if path.name != keep and not path.name.startswith("."):
            shutil.rmtree(path, ignore_errors=True)
            path.with_name(f".{path.name}.lock").unlink(missing_ok=True)
            held_record(path).unlink(missing_ok=True)


class RefreshLoop:
    """Calls ``refresh`` every few seconds in a background thread."""

    def __init__(self, refresh: Callable[[], object], every_seconds: float) -> None:
        self._refresh = refresh
        self._every = every_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="index-refresh", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self._refresh()
            except Exception:  # a bad moment must not stop the page from refreshing later
                logger.exception("refreshing the search index failed; trying again later")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
