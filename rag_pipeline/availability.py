"""Taking documents and chunks out of search and putting them back (archive, reject, activate).

The state lives in the catalog (``Catalog.set_availability``), apart from versions and
collections: it holds across re-indexing, and search leaves out what is offline at once
(``serving.retrieval.OnlineOnly``). A chunk is named by its position in the document's live
version here, and kept by the hash of its text. Whoever makes a change (the CLI, the page) also
hands it to an observer, which shows it in Dagster's UI (``defs/observations.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from rag_pipeline.catalog import Availability, AvailabilityRecord, Catalog
from rag_pipeline.config import Settings

# Told of each change after it is made: (the workspace's settings, the change).
AvailabilityObserver = Callable[[Settings, AvailabilityRecord], None]


class AvailabilityError(LookupError):
    """No such document or chunk in the index; the message says which."""


def set_availability(
    settings: Settings,
    doc_id: str,
    state: Availability,
    changed_by: str,
    chunk: int | None = None,
    observe: AvailabilityObserver | None = None,
) -> AvailabilityRecord:
    """Set a document's availability (or one chunk's, by its index in the live version), and
    tell ``observe``."""
    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        if live is None or catalog.document(live.name, doc_id) is None:
            raise AvailabilityError(f"no indexed document {doc_id!r}")
        text_hash = ""
        if chunk is not None:
            rows = [
                row
                for batch in catalog.chunk_batches(live.name, doc_id)
                for row in batch
                if row["chunk_index"] == chunk
            ]
            if not rows:
                raise AvailabilityError(f"{doc_id!r} has no chunk {chunk}")
            text_hash = rows[0]["text_hash"]
        record = catalog.set_availability(doc_id, state, changed_by, text_hash)
    if observe is not None:
        observe(settings, record)
    return record


def availability_by_document(catalog: Catalog) -> dict[str, str]:
    """doc id → what ``status`` says of its availability: the document's state, who set it and
    when, if it is not active, else how many of its chunks are offline, else nothing."""
    described: dict[str, str] = {}
    offline_chunks: dict[str, int] = {}
    for record in catalog.availability():
        if not record.text_hash:
            if record.offline:
                when = datetime.fromtimestamp(record.changed_at, UTC).strftime("%Y-%m-%d %H:%M")
                described[record.doc_id] = f"{record.state} by {record.changed_by} on {when} UTC"
        elif record.offline:
            offline_chunks[record.doc_id] = offline_chunks.get(record.doc_id, 0) + 1
    for doc_id, count in offline_chunks.items():
        described.setdefault(doc_id, f"{count} chunk{'s' * (count > 1)} offline")
    return described
