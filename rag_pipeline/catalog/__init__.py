"""The catalog: collections, documents and chunks in one transactional database."""

from rag_pipeline.catalog.catalog import Catalog
from rag_pipeline.catalog.records import (
    CHUNK_SCHEMA,
    CollectionRecord,
    DocumentRecord,
    DocumentState,
)

__all__ = ["CHUNK_SCHEMA", "Catalog", "CollectionRecord", "DocumentRecord", "DocumentState"]
