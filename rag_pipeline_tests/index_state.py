"""What a home's index holds, read the way a user's tools would: the catalog and the store."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from rag_pipeline.catalog import Catalog, DocumentRecord
from rag_pipeline.config import load_settings
from rag_pipeline.store import open_vector_store


def live_name(home: Path) -> str:
    with Catalog(load_settings(home)) as catalog:
        live = catalog.live_collection()
        assert live is not None, "nothing indexed"
        return live.name


def live_records(home: Path) -> dict[str, DocumentRecord]:
    with Catalog(load_settings(home)) as catalog:
        live = catalog.live_collection()
        return catalog.documents(live.name) if live else {}


def live_chunks(home: Path, doc_id: str) -> list[dict[str, Any]]:
    with Catalog(load_settings(home)) as catalog:
        live = catalog.live_collection()
        return catalog.chunks(live.name, doc_id) if live else []


def point_count(home: Path, doc_id: str | None = None) -> int:
    store = open_vector_store(load_settings(home), live_name(home), wait_seconds=60)
    try:
        return store.count(doc_id)
    finally:
        store.close()


def point_owners(home: Path) -> Counter[tuple[str, str]]:
    """(doc id, version) → how many points the live collection holds of it."""
    store = open_vector_store(load_settings(home), live_name(home), wait_seconds=60)
    try:
        return Counter(store.point_owners().values())
    finally:
        store.close()


def inconsistencies(home: Path, on_disk: dict[str, str] | None = None) -> list[str]:
    """What breaks the index's promise, as sentences; empty when it holds.

    Every indexed document has exactly its live version's chunks and points (no orphans, no
    duplicates: point ids are per chunk, so a count per version says it), the catalog's
    chunks are of that version; with ``on_disk`` (doc id → text of the file), every file is
    indexed or failed and every deleted file is gone.
    """
    problems: list[str] = []
    records = live_records(home)
    owners = point_owners(home)
    for doc_id, record in records.items():
        if record.indexed_version is None:
            continue
        points = owners.get((doc_id, record.indexed_version), 0)
        if points != record.chunks:
            problems.append(f"{doc_id}: {record.chunks} chunks but {points} points")
        chunks = live_chunks(home, doc_id)
        if len(chunks) != record.chunks or any(
            row["version"] != record.indexed_version for row in chunks
        ):
            problems.append(f"{doc_id}: the catalog's chunks are not those of its live version")
    for (doc_id, version), count in owners.items():
        record = records.get(doc_id)
        if record is None or record.indexed_version != version:
            problems.append(f"{doc_id}: {count} orphan points of version {version}")
    if on_disk is not None:
        for doc_id in on_disk:
            if doc_id not in records:
                problems.append(f"{doc_id}: on disk but not in the catalog")
        for doc_id in records:
            if doc_id not in on_disk:
                problems.append(f"{doc_id}: deleted but still in the catalog")
    return problems
