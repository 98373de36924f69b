"""Whether the store holds exactly what the catalog says, and what to do when it does not.

The Dagster asset checks run these after every run; every pass (CLI or sensor tick) verifies
the store too, so that points lost after a run (a restored backup, a damaged disk) are found.
What is wrong is flagged in the catalog for the next run to mend: a document missing points is
indexed again, points of versions that are not live are deleted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import Settings
from rag_pipeline.embedding.image import clip_model_id
from rag_pipeline.files import write_atomically
from rag_pipeline.indexing.run import Indexer, Metadata
from rag_pipeline.store import (
    VectorSizes,
    VectorStore,
    embedded_files_state,
    open_vector_store,
    passed_verification_record,
    vector_sizes,
)
from rag_pipeline.store.consistency import take_census


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    passed: bool
    failures: dict[str, str]  # doc id (or "*") → what is wrong
    summary: Metadata


@dataclass(frozen=True, slots=True)
class StoreVerification:
    points: int
    expected: int
    missing: dict[str, str]  # documents short of points (or with too many) → what is wrong
    orphans: dict[str, str]  # documents with points of a version that is not live → which


def verify_store(
    catalog: Catalog, store: VectorStore, collection: str, doc_ids: Iterable[str] = ()
) -> StoreVerification:
    """Compare the store's points with the catalog, and flag what is wrong for repair.

    Equal totals and exact counts for ``doc_ids`` (a run's own documents) are taken as proof:
    only a mismatch is worth reading every point and chunk, which is slow on a large index.
    """
    expected, points = catalog.expected_points(collection), store.count()
    if points == expected:
        live = catalog.live_versions(collection, doc_ids)
        records = catalog.documents(collection, live)
        if all(store.count(doc_id) == records[doc_id].chunks for doc_id in live):
            return StoreVerification(points, expected, {}, {})
    census = take_census(catalog, store, collection)
    missing, orphans = census.missing(), census.orphans()
    if missing:
        catalog.flag_for_reindex(
            collection, {doc_id: f"the store had {problem}" for doc_id, problem in missing.items()}
        )
    if orphans:
        catalog.mark_for_repair(collection, orphans)
    return StoreVerification(points, expected, missing, orphans)


CHECKS = {
    "every_chunk_has_point": "Each indexed document has exactly one point per chunk.",
    "no_orphan_points": "Every point belongs to a document's indexed version.",
    "vector_size_matches_model": "The collection's text and image vectors have the models' sizes.",
    "no_document_silently_empty": "No document indexed without chunks or failed without a reason.",
}


def run_checks(indexer: Indexer, doc_ids: list[str]) -> dict[str, CheckOutcome]:
    """The outcome of each of :data:`CHECKS` after a run over ``doc_ids``."""
    collection = indexer.collection.name
    verification = verify_store(indexer.catalog, indexer.store, collection, doc_ids)
    totals = {"points": verification.points, "expected_points": verification.expected}
    return {
        "every_chunk_has_point": CheckOutcome(
            not verification.missing, verification.missing, totals
        ),
        "no_orphan_points": CheckOutcome(not verification.orphans, verification.orphans, totals),
        "vector_size_matches_model": _check_vector_size(indexer),
        "no_document_silently_empty": _check_no_silent_empty(indexer, doc_ids),
    }


def _check_vector_size(indexer: Indexer) -> CheckOutcome:
    settings = indexer.settings
    sizes = vector_sizes(settings)
    store = indexer.store
    stored = VectorSizes(store.dense_size(), store.image_size(), store.multilingual_size())
    failures: dict[str, str] = {}
    if stored.dense is not None and stored != sizes:
        failures["*"] = f"the store holds {stored}, the models give {sizes}"
    summary: Metadata = {"model": settings.embedding.dense_model, "dim": sizes.dense}
    if sizes.image:
        summary |= {"image_model": clip_model_id(settings.images), "image_dim": sizes.image}
    if sizes.multilingual:
        summary |= {
            "multilingual_model": settings.embedding.multilingual_model,
            "multilingual_dim": sizes.multilingual,
        }
    return CheckOutcome(not failures, failures, summary)


def _check_no_silent_empty(indexer: Indexer, doc_ids: list[str]) -> CheckOutcome:
    known = indexer.catalog.documents(indexer.collection.name, doc_ids)
    failures: dict[str, str] = {}
    for doc_id in doc_ids:
        record = known.get(doc_id)
        if record is None:
            continue
        if record.state == "indexed" and record.chunks == 0:
            failures[doc_id] = "indexed with no chunks"
        elif record.state == "failed" and not record.error:
            failures[doc_id] = "failed without a reason"
    return CheckOutcome(not failures, failures, {})


def verify_collections(settings: Settings, catalog: Catalog) -> None:
    """Verify the live collection and the one being built, if any (see :func:`verify_store`).

    An embedded collection whose files, and the points the catalog expects of it, are as they
    were when it last passed is not opened again: it would pass again, and opening a large one
    is most of what an unchanged pass costs.
    """
    for collection in catalog.collections():
        if collection.state == "retired":
            continue
        passed = passed_verification_record(settings, collection.name)
        seen = _seen(settings, catalog, collection.name)
        if seen is not None and passed.is_file() and passed.read_text() == seen:
            continue
        store = open_vector_store(settings, collection.name)
        try:
            verification = verify_store(catalog, store, collection.name)
        finally:
            store.close()  # before the record: closing may write
        if not verification.missing and not verification.orphans:
            record_verified(settings, catalog, collection.name)


def record_verified(settings: Settings, catalog: Catalog, collection: str) -> None:
    """Remember that the embedded ``collection``, closed, held what the catalog expects of it as
    its files are now (a pass's verification, or a run's checks of its own writes): the next
    pass need not open it to verify it again while both stay so. Call it holding the
    workspace's indexing lock alone, so that nothing writes meanwhile."""
    seen = _seen(settings, catalog, collection)
    if seen is not None:
        path = passed_verification_record(settings, collection)
        write_atomically(path, lambda temporary: Path(temporary).write_text(seen))


def store_verified(outcomes: Mapping[str, CheckOutcome]) -> bool:
    """Whether a run's checks (:func:`run_checks`) found the store holding what the catalog
    expects."""
    return all(
        name in outcomes and outcomes[name].passed
        for name in ("every_chunk_has_point", "no_orphan_points")
    )


def _seen(settings: Settings, catalog: Catalog, collection: str) -> str | None:
    """The points the catalog expects of an embedded collection, and the state of its files."""
    files = embedded_files_state(settings, collection)
    return None if files is None else f"{catalog.expected_points(collection)} {files}"


@dataclass(frozen=True, slots=True)
class Audit:
    problems: list[str]  # sentences, empty when the index keeps its promise
    every_point_read: bool  # else the store was counted (``consistency.take_census``)


def audit(settings: Settings, *, every_point: bool = True) -> Audit:
    """Everything that breaks the index's promise in the live collection: each indexed
    document has exactly its live version's points and catalog chunks, and no point belongs to
    anything else. Reads every chunk's key and, with ``every_point`` or when the store's count
    disagrees with the catalog, every point's id: slow on a large index, exact on any
    (``rag-pipeline check [--full]``, the fault tests, ``bench/soak.py``)."""
    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        if live is None:
            return Audit([], every_point_read=True)
        store = open_vector_store(settings, live.name)
        try:
            census = take_census(catalog, store, live.name, by_count=not every_point)
        finally:
            store.close()
    problems = sorted(
        [f"{doc_id}: {problem}" for doc_id, problem in census.missing().items()]
        + [
            f"{doc_id}: the catalog's chunks are not those of its live version"
            for doc_id in census.stray_chunks
        ]
        + [f"{doc_id}: {problem}" for doc_id, problem in census.orphans().items()]
    )
    return Audit(problems, every_point_read=not census.counted)
