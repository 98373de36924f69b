"""The catalog: collections, documents and chunks in one transactional database."""

from rag_pipeline.catalog.catalog import Catalog
from rag_pipeline.catalog.records import (
    CHUNK_SCHEMA,
    Availability,
    AvailabilityRecord,
    CollectionRecord,
    DocumentRecord,
    DocumentState,
    KnownFile,
    PassState,
)

__all__ = [
    "CHUNK_SCHEMA",
    "Availability",
    "AvailabilityRecord",
    "Catalog",
    "CollectionRecord",
    "DocumentRecord",
    "DocumentState",
    "KnownFile",
    "PassState",
]
