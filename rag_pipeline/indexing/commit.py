"""The last stage: a run's documents written to the vector store and committed to the catalog.

Per document, in this order, so that a crash at any point leaves the index answering from a
whole version of every document (the old one until the commit, the new one after it):

1. the document is marked for repair in the catalog (one transaction for the run's batch);
2. its new version's points are upserted, and the store flushed (a batch of documents at a
   time);
3. one catalog transaction switches it to the new version, with its chunks;
4. the points of its other versions are deleted, and the repair mark cleared.

Retrieval returns only points of the versions the catalog names live, so between 2 and 4 a
query sees the old version, after 3 the new one, never both. A run that dies leaves repair
marks; the next plan (``repair_pending``, while no run writes), or the next run over the same
document, deletes the points of versions that are not live and clears them; a run never touches
another run's documents. Deleted files go the same way: the catalog forgets them first, then
their points go.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline.availability import availability_by_document
from rag_pipeline.catalog import Catalog, DocumentRecord
from rag_pipeline.config import Settings
from rag_pipeline.faults import fault_point
from rag_pipeline.indexing.run import Indexer, Metadata, target_collection
from rag_pipeline.manifest import find_changes
from rag_pipeline.stages import DocumentTask
from rag_pipeline.store import (
    VectorModels,
    VectorStore,
    drop_collection,
    open_vector_store,
    points_from_cache,
    vector_sizes,
)
from rag_pipeline.store.schema import DocumentFacts

logger = logging.getLogger(__name__)

# Points upserted between two flushes of the store (each followed by the catalog commits of the
# documents whose points are all written).
_FLUSH_POINTS = 2048


@dataclass(slots=True)
class _Written:
    """A document whose new points are in the store, waiting for its catalog commit."""

    record: DocumentRecord
    pictures: set[str]  # its picture files, relative to the stage root


def write_points(indexer: Indexer, doc_ids: Iterable[str]) -> dict[str, Metadata]:
    """Write each planned document's new version, delete the deleted ones; then tidy up."""
    settings, catalog, stages = indexer.settings, indexer.catalog, indexer.stages
    collection = indexer.collection.name
    indexer.release_models()
    tasks: dict[str, DocumentTask | None] = {doc_id: stages.read_task(doc_id) for doc_id in doc_ids}
    report: dict[str, Metadata] = {
        doc_id: {"error": "not planned: materialize file_manifest first"}
        for doc_id, task in tasks.items()
        if task is None
    }
    # Only this run's own documents: another run writing at the same time (on a Qdrant server)
    # has marked its documents too, and their new points are not committed yet.
    repair_pending(settings, catalog, opened={collection: indexer.store}, documents=set(tasks))

    deleted = [doc_id for doc_id, task in tasks.items() if task and task.action == "delete"]
    if deleted:
        held = catalog.delete_documents(deleted)
        for doc_id in deleted:
            stages.remove(doc_id)
            report[doc_id] = {"state": "deleted"}
        fault_point("after-catalog-delete")
        for name, documents in held.items():
            _repair(settings, catalog, name, documents, opened={collection: indexer.store})

    to_index = [task for task in tasks.values() if task and task.action == "index"]
    known = catalog.documents(collection, tasks)
    if to_index:
        sizes = vector_sizes(settings)
        indexer.store.ensure_collection(
            sizes.dense,
            sizes.image,
            sizes.multilingual,
            page_keywords=settings.embedding.for_pages() is not None,
        )
        catalog.mark_for_repair(collection, [task.doc_id for task in to_index])
        pending: list[_Written] = []
        pending_points = 0
        for task in to_index:
            written = _write_document(indexer, task, known.get(task.doc_id))
            if isinstance(written, DocumentRecord):  # failed: the old version stays live
                catalog.record_document(collection, written)
                known[task.doc_id] = written
                continue
            pending.append(written)
            pending_points += written.record.chunks
            if pending_points >= _FLUSH_POINTS:
                _commit(indexer, pending, known)
                pending, pending_points = [], 0
        _commit(indexer, pending, known)
        _repair(
            settings,
            catalog,
            collection,
            [task.doc_id for task in to_index],
            opened={collection: indexer.store},
        )

    offline = availability_by_document(catalog)  # what operators took out of search
    for doc_id, task in tasks.items():
        if task is None or task.action == "delete":
            continue
        record = known.get(doc_id)
        entry: Metadata = {"state": record.state if record else "unknown"}
        if task.action == "index" and record:
            entry["points"] = record.chunks if record.state == "indexed" else 0
            if record.error:
                entry["error"] = record.error
        if doc_id in offline:
            entry["availability"] = offline[doc_id]
        report[doc_id] = entry
    finish_collections(settings, catalog)
    return report


def _write_document(
    indexer: Indexer, task: DocumentTask, previous: DocumentRecord | None
) -> _Written | DocumentRecord:
    """Upsert the document's new points; or, when it cannot be indexed, its failed record."""
    file = task.file
    assert file is not None
    stage = indexer.stages.chunks_meta(task.doc_id)
    record = file.record(
        "failed",
        indexed_version=previous.indexed_version if previous else None,
        title=previous.title if previous else None,
        pages=previous.pages if previous else None,
        chunks=previous.chunks if previous else 0,
        tokens=previous.tokens if previous else 0,
    )
    if stage is None or stage.version != file.version:
        return _failed(
            indexer.settings,
            record,
            previous,
            "no chunks of this version: materialize the chunks asset first",
        )
    if stage.error:
        return _failed(indexer.settings, record, previous, stage.error)
    title = stage.meta.get("title") or Path(file.relative_path).stem
    facts = DocumentFacts(
        doc_id=task.doc_id,
        file_path=str(file.path),
        file_type=file.file_type,
        title=title,
        version=file.version,
        sha256=file.sha256,
        mtime=file.mtime_ns / 1e9,
    )
    models = VectorModels.of(indexer.settings)
    chunks = tokens = 0
    pictures: set[str] = set()
    for rows in indexer.stages.chunk_batches(task.doc_id):
        points = points_from_cache(rows, facts, indexer.cache, models)
        if len(points) < len(rows):  # what was upserted is repaired away (marked above)
            return _failed(
                indexer.settings,
                record,
                previous,
                f"{len(rows) - len(points)} chunks have no vectors: "
                "materialize the embedding assets first",
            )
        indexer.store.upsert(points)
        chunks += len(rows)
        tokens += sum(row["token_count"] for row in rows)
        pictures.update(row["image_file"] for row in rows if row["image_file"])
    fault_point("after-upsert")
    record.state = "indexed"
    record.indexed_version = file.version
    record.title = title
    record.pages = stage.meta.get("pages")
    record.chunks = chunks
    record.tokens = tokens
    return _Written(record, pictures)


def _failed(
    settings: Settings, record: DocumentRecord, previous: DocumentRecord | None, error: str
) -> DocumentRecord:
    """``record`` failed with ``error``, to be tried again after a backoff that grows with each
    failure of the same version."""
    again = (
        previous is not None and previous.state == "failed" and previous.version == record.version
    )
    record.attempts = previous.attempts + 1 if again and previous else 1
    record.retry_at = time.time() + settings.indexing.retry_delay(record.attempts)
    record.error = error
    return record


def _commit(indexer: Indexer, written: list[_Written], known: dict[str, DocumentRecord]) -> None:
    """Flush the store, then switch each written document to its new version (a transaction
    each)."""
    if not written:
        return
    indexer.store.flush()
    fault_point("before-commit")
    collection = indexer.collection.name
    for document in written:
        doc_id = document.record.doc_id
        rows = (row for batch in indexer.stages.chunk_batches(doc_id) for row in batch)
        indexer.catalog.commit_document(collection, document.record, rows)
        fault_point("after-commit")
        known[doc_id] = document.record
        indexer.stages.keep_pictures(doc_id, document.pictures)


def repair_pending(
    settings: Settings,
    catalog: Catalog,
    *,
    opened: dict[str, VectorStore] | None = None,
    documents: Collection[str] | None = None,
) -> int:
    """Finish what interrupted runs left: in every collection, delete the points of marked
    documents' versions that are not live. Returns how many documents were repaired.

    All marked documents only while no run writes (a planner holding the workspace's indexing lock
    alone); a run repairs its own ``documents``, which no other run handles.
    """
    repaired = 0
    for collection in catalog.collections():
        marked = catalog.repairs(collection.name)
        if documents is not None:
            marked = [doc_id for doc_id in marked if doc_id in documents]
        if marked:
            _repair(settings, catalog, collection.name, marked, opened=opened or {})
            repaired += len(marked)
    return repaired


def _repair(
    settings: Settings,
    catalog: Catalog,
    collection: str,
    doc_ids: list[str],
    *,
    opened: dict[str, VectorStore],
) -> None:
    """Leave only the live version's points of ``doc_ids`` in ``collection``; clear the marks."""
    store = opened.get(collection) or open_vector_store(settings, collection)
    try:
        live = catalog.live_versions(collection, doc_ids)
        for doc_id in doc_ids:
            store.delete_document(doc_id, keep_version=live.get(doc_id))
        fault_point("after-delete")
        catalog.clear_repairs(collection, doc_ids)
    finally:
        if collection not in opened:
            store.close()


def finish_collections(settings: Settings, catalog: Catalog) -> None:
    """Put a collection being built live once it holds every document, and drop retired ones.

    Until then the live collection answers, with the models it was built with.
    """
    target = target_collection(settings, catalog)
    if target.state == "building":
        remaining = find_changes(settings, catalog, target.name).to_process
        if not remaining:
            catalog.promote(target.name)
            logger.info("the collection %s is complete and answers from now on", target.name)
    for collection in catalog.collections():
        if collection.state == "retired":
            drop_collection(settings, collection.name)
            catalog.forget_collection(collection.name)
