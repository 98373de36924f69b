"""One collection's replica for the chat page (see ``replica.py`` for why the page keeps one):
its points copied from the embedded index, and the record of what it holds.

A replica holds committed versions only: each document's points are rebuilt as the run built
them (``points_from_cache``) from the version the catalog names live. A replica holding less
than half of what the index should (a first start, a large import while the page was down)
starts as a copy of the index's files, taken while no run holds them (else it is written point
by point), then mended the same way: a document whose points there are of several versions is
copied again. A clean close leaves a record of what it holds, read at the next start instead of
a census of every point against the catalog (``consistency.py``).
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline.catalog import Catalog, CollectionRecord, DocumentRecord
from rag_pipeline.config import Settings
from rag_pipeline.embedding import EmbeddingCache, open_embedding_cache
from rag_pipeline.files import write_atomically
from rag_pipeline.store import embedded_path
from rag_pipeline.store.consistency import take_census
from rag_pipeline.store.edge import EdgeStore
from rag_pipeline.store.points import VectorModels, points_from_cache, vector_sizes
from rag_pipeline.store.schema import DocumentFacts

# Named as when this lived in serving/: outside ``rag_pipeline``, whose log the CLI prints at
# INFO, so ``serve`` still prints failed refreshes but not each refresh.
logger = logging.getLogger("serving.replica")


@dataclass(frozen=True, slots=True)
class RefreshReport:
    copied: int = 0  # documents whose new version was copied in
    removed: int = 0  # documents gone from the index
    waiting: int = 0  # documents a running indexing run is still writing


class CollectionMirror:
    """The replica of one collection: its points, rebuilt from the catalog and the cache."""

    def __init__(self, settings: Settings, collection: CollectionRecord, catalog: Catalog) -> None:
        self.collection = collection
        self.settings = settings.with_vector_models(collection.models)
        self.path = replica_root(settings) / collection.name
        self.store = EdgeStore(self.path)
        # What a clean close left of what the replica holds; gone once read, so that a page
        # that dies holding it leaves none behind to be trusted.
        points = self.store.count()
        held = _read_held(self.path, points)
        # A replica far behind the index (a first start, a large import while the page was
        # down) becomes a copy of the index's files instead of copying documents one by one.
        # What it holds is then read back: by count when the catalog did not change from
        # before the copy to after that read, else from its points; what the copy took that is
        # not committed is mended by the refreshes.
        stamp = catalog.change_stamp(collection.name)
        copied = points * 2 < catalog.expected_points(
            collection.name
        ) and self.store.replace_with_copy_of(embedded_path(settings, collection.name))
        sizes = vector_sizes(self.settings)
        self.store.ensure_collection(
            sizes.dense,
            sizes.image,
            sizes.multilingual,
            page_keywords=self.settings.embedding.for_pages() is not None,
        )
        if copied or held is None:
            held = _versions_held(catalog, self.store, collection.name, stamp if copied else None)
        self._held = held
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
        being read (the part copied is taken out again, or, when its rows were all read but
        their count changed, the document is held at no version until it is copied again)."""
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
        """Close, leaving what the replica holds for the next start (a census of every point
        took most of a page's start at 100,000 documents)."""
        held = json.dumps({"points": self.store.count(), "held": self._held}).encode()
        write_atomically(
            held_record(self.path), lambda temporary: Path(temporary).write_bytes(held)
        )
        self.store.close()


def held_record(replica: Path) -> Path:
    return replica.with_name(f".{replica.name}.held.json")


def _read_held(replica: Path, points: int) -> dict[str, str] | None:
    """What the replica's last clean close said it holds, the record removed; None when there
    is no record, or one that cannot be read or was written of a replica with another number
    of ``points`` than it has now (removed or changed since)."""
    record = held_record(replica)
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


def _versions_held(
    catalog: Catalog, store: EdgeStore, collection: str, copied_at: tuple[object, ...] | None
) -> dict[str, str]:
    """The version of each document the replica holds points of (``_MIXED`` for a document
    with points of several, or only some of its version's: a copy stopped half-way, or an index
    copied with points a run had not committed). ``copied_at``: the catalog's change stamp from
    before the replica was copied from the index, when it was; the census is then taken by
    count if the catalog is still there (the copy and the catalog seen at one moment)."""
    if not store.count():
        return {}
    census = take_census(catalog, store, collection, by_count=copied_at is not None)
    if census.counted and catalog.change_stamp(collection) != copied_at:
        census = take_census(catalog, store, collection)
    held = {
        doc_id: version if points == chunks else _MIXED
        for doc_id, points in census.found.items()
        for version, chunks in [census.indexed[doc_id]]
    }
    for doc_id, version in census.others:
        held[doc_id] = version if doc_id not in held else _MIXED
    return held


def replica_root(settings: Settings) -> Path:
    return settings.home / "serving" / "replica"
