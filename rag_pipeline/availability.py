"""Taking documents and chunks out of search and putting them back (archive, reject, activate).

The state lives in the catalog (``Catalog.set_availability``), apart from versions and
collections: it holds across re-indexing, and search leaves out what is offline at once
(``serving.retrieval.OnlineOnly``). A chunk is named by its position in the document's live
version here, and kept by the hash of its text. Each change, whoever makes it (the CLI, the
page), is also shown in Dagster's UI as an observation of the document's partition.
"""

from __future__ import annotations

from datetime import UTC, datetime

from rag_pipeline.catalog import Availability, AvailabilityRecord, Catalog
from rag_pipeline.config import Settings
from rag_pipeline.ids import partition_key


class AvailabilityError(LookupError):
    """No such document or chunk in the index; the message says which."""


def set_availability(
    settings: Settings,
    doc_id: str,
    state: Availability,
    changed_by: str,
    chunk: int | None = None,
) -> AvailabilityRecord:
    """Set a document's availability (or one chunk's, by its index in the live version), and
    report the change to Dagster."""
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
    _observe(settings, record)
    return record


def _observe(settings: Settings, record: AvailabilityRecord) -> None:
    """The change as an observation (no run) of the document's ``qdrant_points`` partition.

    Only the Dagster instance is opened, never the code location: the page calls this too.
    """
    from dagster import AssetKey, AssetObservation

    from rag_pipeline.defs.instance import get_instance

    metadata = {
        "document": record.doc_id,  # a bucket's partition holds others too
        "availability": record.state,
        "changed_by": record.changed_by,
        "changed_at": datetime.fromtimestamp(record.changed_at, UTC).isoformat(),
        "scope": f"chunk {record.text_hash}" if record.text_hash else "document",
    }
    with get_instance(settings) as instance:
        instance.report_runless_asset_event(
            AssetObservation(
                asset_key=AssetKey("qdrant_points"),
                partition=partition_key(
                    settings.workspace, record.doc_id, settings.dagster.document_buckets
                ),
                metadata=metadata,
            )
        )


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
