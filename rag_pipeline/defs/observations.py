"""What changes outside runs, shown in Dagster's UI as observations of a document's partition."""

from __future__ import annotations

from datetime import UTC, datetime

from rag_pipeline.catalog import AvailabilityRecord
from rag_pipeline.config import Settings
from rag_pipeline.defs.instance import get_instance
from rag_pipeline.ids import partition_key


def observe_availability(settings: Settings, record: AvailabilityRecord) -> None:
    """A document or chunk taken out of search or put back, on its ``qdrant_points``
    partition (an observation, no run)."""
    from dagster import AssetKey, AssetObservation

    metadata = {
        "availability": record.state,
        "changed_by": record.changed_by,
        "changed_at": datetime.fromtimestamp(record.changed_at, UTC).isoformat(),
        "scope": f"chunk {record.text_hash}" if record.text_hash else "document",
    }
    with get_instance(settings) as instance:
        instance.report_runless_asset_event(
            AssetObservation(
                asset_key=AssetKey("qdrant_points"),
                partition=partition_key(settings.workspace, record.doc_id),
                metadata=metadata,
            )
        )
