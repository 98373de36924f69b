"""What the chat page searches while indexing runs write: the index itself, or a replica of it.

A Qdrant server serves any number of readers, so with ``store.url`` the page searches it
directly (through ``CommittedOnly``). The embedded engine admits one process per shard, and an
indexing run holds its shard while it writes. So the page keeps a replica of its own under
``<home>/serving/replica``, which no other process opens, and brings it up to date from what a
run leaves readable while it writes: the catalog (a database read while it is written) and the
embedding cache (SQLite in WAL mode). A document's points are rebuilt exactly as the run built
them (``points_from_cache``) from the version the catalog names live, so the replica holds
committed versions only. A replica that holds less than half of what the index should (a first
start, a large import while the page was down) starts as a copy of the index's files, taken
while no run holds them (else it is written point by point), then mended the same way: a
document whose points there are of several versions is copied again. Queries never wait for a
run, and never see a lock error.

Either way the page answers from the live collection. When a collection built for other models
goes live, the page switches to it (a new replica is built first, while the old one answers).
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from rag_pipeline.catalog import Catalog, CollectionRecord, DocumentRecord
from rag_pipeline.config import Settings
from rag_pipeline.embedding import EmbeddingCache, open_embedding_cache
from rag_pipeline.files import write_atomically
from rag_pipeline.store import (
    SearchableStore,
    VectorStore,
    embedded_path,
    open_vector_store,
    uses_server,
)
from rag_pipeline.store.catalog_views import CommittedOnly
from rag_pipeline.store.edge import EdgeStore
from rag_pipeline.store.points import VectorModels, points_from_cache, vector_sizes
from rag_pipeline.store.schema import DocumentFacts, Hit, NearestHits, QueryFilter

# Named as when this lived in serving/: outside ``rag_pipeline``, whose log the CLI prints at
# INFO, so ``serve`` still prints failed refreshes but not each refresh.
logger = logging.getLogger("serving.replica")


class ServingStore(SearchableStore, Protocol):
    @property
    def collection(self) -> CollectionRecord | None:
        """The collection answering now (None before anything is indexed)."""

    def refresh(self) -> RefreshReport:
        """Take in what indexing runs changed since the last refresh."""

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class RefreshReport:
    copied: int = 0  # documents whose new version was copied in
    removed: int = 0  # documents gone from the index
    waiting: int = 0  # documents a running indexing run is still writing


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
        self._mirror: _Mirror | None = None

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
        mirror = _Mirror(self.settings, live, self.catalog)
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


class _Mirror:
    """The replica of one collection: its points, rebuilt from the catalog and the cache."""

    def __init__(self, settings: Settings, collection: CollectionRecord, catalog: Catalog) -> None:
        self.collection = collection
        self.settings = settings.with_vector_models(collection.models)
        self.path = replica_root(settings) / collection.name
        self.store = EdgeStore(self.path)
        # What a clean close left of what the replica holds; gone once read, so that a page
        # that dies holding it leaves none behind to be trusted.
        held = _read_held(self.path, self.store.count())
        # A replica far behind the index (a first start, a large import while the page was
        # down) becomes a copy of the index's files instead of copying documents one by one.
        # What it holds is then read back from its points: what the copy took that is not
        # committed is mended by the refreshes.
        if self.store.count() * 2 < catalog.expected_points(
            collection.name
        ) and self.store.replace_with_copy_of(embedded_path(settings, collection.name)):
            held = None
        sizes = vector_sizes(self.settings)
        self.store.ensure_collection(sizes.dense, sizes.image, sizes.multilingual)
        self._held = _versions_held(self.store) if held is None else held
        self._seen: tuple[object, ...] | None = None  # the catalog state refreshed from last
        self._waiting = False

    def refresh(self, catalog: Catalog, lock: threading.Lock) -> RefreshReport:
        name = self.collection.name
        stamp = catalog.change_stamp(name)
        if stamp == self._seen and not self._waiting:
            return RefreshReport()
        wanted = catalog.live_versions(name)
        removed = [doc_id for doc_id in self._held if doc_id not in wanted]
        for doc_id in removed:
            with lock:
                self.store.delete_document(doc_id)
            del self._held[doc_id]
        copied = waiting = 0
        stale = [doc_id for doc_id, version in wanted.items() if self._held.get(doc_id) != version]
        if stale:
            records = catalog.documents(name, stale)
            cache = open_embedding_cache(self.settings)
            try:
                for doc_id in stale:
                    record = records.get(doc_id)  # None: deleted since
                    if (
                        record
                        and record.indexed_version
                        and self._copy(catalog, record, cache, lock)
                    ):
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

    def _copy(
        self,
        catalog: Catalog,
        record: DocumentRecord,
        cache: EmbeddingCache,
        lock: threading.Lock,
    ) -> bool:
        """Copy a document's live version in, a batch at a time; False when it changed while
        being read (the part copied is taken out again: the replica never holds two versions
        of a document)."""
        version = record.indexed_version
        assert version is not None
        facts = DocumentFacts(
            doc_id=record.doc_id,
            file_path=str(record.file_path),
            file_type=record.file_type,
            title=record.title or Path(record.relative_path).stem,
            version=version,
            sha256=record.sha256,
            mtime=record.mtime_ns / 1e9,
        )
        models = VectorModels.of(self.settings)
        copied = 0
        for rows in catalog.chunk_batches(self.collection.name, record.doc_id):
            points = points_from_cache(rows, facts, cache, models)
            if any(row["version"] != version for row in rows) or len(points) < len(rows):
                if copied:
                    with lock:
                        self.store.delete_document(
                            record.doc_id, keep_version=self._held.get(record.doc_id)
                        )
                return False  # committed again since the documents were read: next refresh
            with lock:
                self.store.upsert(points)
            copied += len(points)
        if copied != record.chunks:  # committed again meanwhile: two versions held for now
            self._held[record.doc_id] = _MIXED
            return False
        with lock:
            self.store.delete_document(record.doc_id, keep_version=version)
        self._held[record.doc_id] = version
        return True

    def close(self) -> None:
        """Close, leaving what the replica holds for the next start (reading every point's
        payload back took most of a page's start at 100,000 documents)."""
        held = json.dumps({"points": self.store.count(), "held": self._held}).encode()
        write_atomically(
            _held_record(self.path), lambda temporary: Path(temporary).write_bytes(held)
        )
        self.store.close()


def _held_record(replica: Path) -> Path:
    return replica.with_name(f".{replica.name}.held.json")


def _read_held(replica: Path, points: int) -> dict[str, str] | None:
    """What the replica's last clean close said it holds, the record removed; None when there
    is no record, or one that cannot be read or was written of a replica with another number
    of ``points`` than it has now (removed or changed since)."""
    record = _held_record(replica)
    try:
        saved = json.loads(record.read_bytes())
    except (OSError, ValueError):
        saved = None
    record.unlink(missing_ok=True)
    if not isinstance(saved, dict) or saved.get("points") != points:
        return None
    held = saved.get("held")
    return held if isinstance(held, dict) else None


# A document whose points in the replica are of several versions: held at none, so that a
# refresh copies it again (or removes it), keeping only the version the catalog names.
_MIXED = ""


def _versions_held(store: EdgeStore) -> dict[str, str]:
    """The version of each document the replica holds points of (``_MIXED`` for a document
    with points of several: a copy stopped half-way, or an index copied with points a run had
    not committed)."""
    held: dict[str, str] = {}
    for doc_id, version in store.point_owners().values():
        held[doc_id] = version if held.get(doc_id, version) == version else _MIXED
    return held


def replica_root(settings: Settings) -> Path:
    return settings.home / "serving" / "replica"


def _remove_other_replicas(settings: Settings, keep: str) -> None:
    """Replicas of collections that no longer answer (and of the layout before collections)."""
    root = replica_root(settings)
    for path in root.iterdir() if root.is_dir() else ():
        if path.name != keep and not path.name.startswith("."):
            shutil.rmtree(path, ignore_errors=True)
            path.with_name(f".{path.name}.lock").unlink(missing_ok=True)
            _held_record(path).unlink(missing_ok=True)


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
