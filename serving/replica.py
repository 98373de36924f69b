"""What the chat page searches while indexing runs write: the index itself, or a replica of it.

A Qdrant server serves any number of readers, so with ``store.url`` the page searches it
directly. The embedded engine admits one process per shard directory, and an indexing run holds
its shard while it writes. So the page keeps a replica of its own under
``<home>/serving/replica``, which no other process opens, and brings it up to date from what a
run leaves readable while it writes: the catalog (files replaced atomically) and the embedding
cache (SQLite in WAL mode). A document's points are rebuilt exactly as the run built them
(``points_from_cache``), and only once its catalog entry and its catalog chunks agree on the
version, so a run that is half done is never copied half. Queries never wait for a run, and
never see a lock error.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from rag_pipeline.catalog import Catalog, DocumentRecord
from rag_pipeline.config import Settings
from rag_pipeline.embedding import EmbeddingCache
from rag_pipeline.indexing import VectorModels, points_from_cache, vector_sizes
from rag_pipeline.store import SearchableStore, open_vector_store
from rag_pipeline.store.edge import EdgeStore
from rag_pipeline.store.schema import DocumentFacts, Hit, NearestHits, QueryFilter

logger = logging.getLogger(__name__)


class ServingStore(SearchableStore, Protocol):
    def refresh(self) -> RefreshReport:
        """Take in what indexing runs changed since the last refresh."""

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class RefreshReport:
    copied: int = 0  # documents whose new version was copied in
    removed: int = 0  # documents gone from the index
    waiting: int = 0  # documents a running indexing run is still writing


def open_serving_store(settings: Settings) -> ServingStore:
    """The Qdrant server itself when one is configured, else a replica of the embedded index."""
    if settings.store.url or settings.store.client_path:
        return _SharedStore(settings)
    return EmbeddedReplica(settings)


class _SharedStore:
    """A Qdrant server: every process reads it directly, so there is nothing to refresh."""

    def __init__(self, settings: Settings) -> None:
        self._store = open_vector_store(settings)

    def nearest(
        self,
        dense: np.ndarray,
        sparse: tuple[np.ndarray, np.ndarray],
        *,
        limit: int,
        query_filter: QueryFilter | None = None,
        image: np.ndarray | None = None,
    ) -> NearestHits:
        return self._store.nearest(
            dense, sparse, limit=limit, query_filter=query_filter, image=image
        )

    def nearest_pictures(
        self, image: np.ndarray, *, limit: int, query_filter: QueryFilter | None = None
    ) -> list[Hit]:
        return self._store.nearest_pictures(image, limit=limit, query_filter=query_filter)

    def refresh(self) -> RefreshReport:
        return RefreshReport()

    def close(self) -> None:
        self._store.close()


class EmbeddedReplica:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.catalog = Catalog(settings.home)
        self.path = replica_path(settings)
        self._store = EdgeStore(self.path)
        self._store.ensure_collection(*vector_sizes(settings))
        self._lock = threading.Lock()  # one search or one document's update at a time
        self._held = {doc_id: version for doc_id, version in self._store.point_owners().values()}
        self._seen: tuple[int, int] | None = None  # the catalog file refreshed from last
        self._waiting = False

    def nearest(
        self,
        dense: np.ndarray,
        sparse: tuple[np.ndarray, np.ndarray],
        *,
        limit: int,
        query_filter: QueryFilter | None = None,
        image: np.ndarray | None = None,
    ) -> NearestHits:
        with self._lock:
            return self._store.nearest(
                dense, sparse, limit=limit, query_filter=query_filter, image=image
            )

    def nearest_pictures(
        self, image: np.ndarray, *, limit: int, query_filter: QueryFilter | None = None
    ) -> list[Hit]:
        with self._lock:
            return self._store.nearest_pictures(image, limit=limit, query_filter=query_filter)

    def refresh(self) -> RefreshReport:
        stamp = self._catalog_stamp()
        if stamp == self._seen and not self._waiting:
            return RefreshReport()
        records = self.catalog.documents()
        wanted = {
            doc_id: record.indexed_version
            for doc_id, record in records.items()
            if record.indexed_version
        }
        removed = [doc_id for doc_id in self._held if doc_id not in wanted]
        for doc_id in removed:
            with self._lock:
                self._store.delete_document(doc_id)
            del self._held[doc_id]
        copied = waiting = 0
        stale = [doc_id for doc_id, version in wanted.items() if self._held.get(doc_id) != version]
        if stale:
            cache = EmbeddingCache(self.settings.home / "cache" / "embeddings.sqlite")
            try:
                for doc_id in stale:
                    if self._copy(records[doc_id], cache):
                        copied += 1
                    else:
                        waiting += 1
            finally:
                cache.close()
        self._seen, self._waiting = stamp, waiting > 0
        if copied or removed:
            logger.info(
                "search index refreshed: %d documents updated, %d removed", copied, len(removed)
            )
        return RefreshReport(copied=copied, removed=len(removed), waiting=waiting)

    def _copy(self, record: DocumentRecord, cache: EmbeddingCache) -> bool:
        """Copy a document's indexed version in; False when its files are not all there yet."""
        version = record.indexed_version
        assert version is not None
        rows = self.catalog.chunks(record.doc_id)
        if not rows or any(row["version"] != version for row in rows):
            return False
        facts = DocumentFacts(
            doc_id=record.doc_id,
            file_path=str(record.file_path),
            file_type=record.file_type,
            title=record.title or Path(record.relative_path).stem,
            version=version,
            sha256=record.sha256,
            mtime=record.mtime_ns / 1e9,
        )
        points = points_from_cache(rows, facts, cache, VectorModels.of(self.settings))
        if len(points) < len(rows):
            return False
        with self._lock:
            self._store.upsert(points)
            self._store.delete_document(record.doc_id, keep_version=version)
        self._held[record.doc_id] = version
        return True

    def _catalog_stamp(self) -> tuple[int, int] | None:
        try:
            stat = self.catalog.documents_path.stat()
        except FileNotFoundError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def close(self) -> None:
        with self._lock:
            self._store.close()


def replica_path(settings: Settings) -> Path:
    return settings.home / "serving" / "replica" / settings.store.collection


class RefreshLoop:
    """Refreshes a serving store every few seconds in a background thread."""

    def __init__(self, store: ServingStore, every_seconds: float) -> None:
        self._store = store
        self._every = every_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="index-refresh", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self._store.refresh()
            except Exception:  # a bad moment must not stop the page from refreshing later
                logger.exception("refreshing the search index failed; trying again later")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
