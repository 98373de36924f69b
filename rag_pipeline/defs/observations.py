"""Changes made outside runs, shown in Dagster's UI: a document's or chunk's availability
(``availability.py``) as an observation of its ``qdrant_points`` partition."""

from __future__ import annotations

from datetime import UTC, datetime

from rag_pipeline.catalog import AvailabilityRecord
from rag_pipeline.config import Settings
from rag_pipeline.ids import partition_key


def observe_availability(settings: Settings, record: AvailabilityRecord) -> None:
    """The change as an observation (no run) of the document's store partition.

    Only the Dagster instance is opened, never the code location: the page calls this too.
    """
    from dagster import AssetObservation

    from rag_pipeline.defs.assets import QDRANT_POINTS
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
                asset_key=QDRANT_POINTS,
                partition=partition_key(
                    settings.workspace, record.doc_id, settings.dagster.document_buckets
                ),
                metadata=metadata,
            )
        )
