"""What a home's index holds, read the way a user's tools would: the catalog and the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rag_pipeline.catalog import Catalog, DocumentRecord, DocumentState
from rag_pipeline.config import load_settings
from rag_pipeline.indexing.checks import audit
from rag_pipeline.manifest import SourceFile
from rag_pipeline.store import open_vector_store


def record_of(file: SourceFile, state: DocumentState = "indexed") -> DocumentRecord:
    """The catalog's record of ``file`` as if its current version had been indexed."""
    return file.record(state, indexed_version=file.version)


def live_name(home: Path) -> str:
    with Catalog(load_settings(home)) as catalog:
        live = catalog.live_collection()
        assert live is not None, "nothing indexed"
        return live.name


def live_records(home: Path) -> dict[str, DocumentRecord]:
    with Catalog(load_settings(home)) as catalog:
        return catalog.live_documents()


def live_chunks(home: Path, doc_id: str) -> list[dict[str, Any]]:
    with Catalog(load_settings(home)) as catalog:
        live = catalog.live_collection()
        if live is None:
            return []
        return [row for batch in catalog.chunk_batches(live.name, doc_id) for row in batch]


def point_count(home: Path, doc_id: str | None = None) -> int:
    store = open_vector_store(load_settings(home), live_name(home), wait_seconds=60)
    try:
        return store.count(doc_id)
    finally:
        store.close()


def inconsistencies(home: Path, on_disk: dict[str, str] | None = None) -> list[str]:
    """What breaks the index's promise, as sentences (``checks.audit``); with ``on_disk`` (doc
    id → text of the file) also every file not in the catalog, and every deleted one still in
    it."""
    problems = audit(load_settings(home)).problems
    if on_disk is not None:
        records = live_records(home)
        problems += [
            f"{doc_id}: on disk but not in the catalog"
            for doc_id in on_disk
            if doc_id not in records
        ]
        problems += [
            f"{doc_id}: deleted but still in the catalog"
            for doc_id in records
            if doc_id not in on_disk
        ]
    return problems
