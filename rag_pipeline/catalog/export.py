"""The catalog as Parquet files, for DuckDB, pandas or any tool that reads Parquet.

``rag-pipeline export`` writes the live collection's ``documents.parquet`` and
``chunks.parquet`` (chunks with their boxes and sections as nested columns).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rag_pipeline.catalog.catalog import Catalog
from rag_pipeline.catalog.records import CHUNK_SCHEMA
from rag_pipeline.files import write_atomically

DOCUMENT_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("source", pa.string()),
        ("relative_path", pa.string()),
        ("file_type", pa.string()),
        ("size", pa.int64()),
        ("mtime_ns", pa.int64()),
        ("sha256", pa.string()),
        ("version", pa.string()),
        ("state", pa.string()),
        ("indexed_version", pa.string()),
        ("error", pa.string()),
        ("title", pa.string()),
        ("pages", pa.int64()),
        ("chunks", pa.int64()),
        ("tokens", pa.int64()),
        ("attempts", pa.int64()),
        ("retry_at", pa.float64()),
        ("reindex_reason", pa.string()),
        ("updated_at", pa.float64()),
    ]
)
_ROWS_PER_GROUP = 5000


def export_catalog(catalog: Catalog, collection: str, folder: Path) -> list[Path]:
    """Write ``documents.parquet`` and ``chunks.parquet`` of ``collection`` into ``folder``."""
    documents_path = folder / "documents.parquet"

    def write_documents(temporary: str) -> None:
        with pq.ParquetWriter(temporary, DOCUMENT_SCHEMA) as writer:
            for records in catalog.document_batches(collection, _ROWS_PER_GROUP):
                rows = [asdict(record) for record in records]
                writer.write_table(pa.Table.from_pylist(rows, schema=DOCUMENT_SCHEMA))

    write_atomically(documents_path, write_documents)
    chunks_path = folder / "chunks.parquet"

    def write_chunks(temporary: str) -> None:
        with pq.ParquetWriter(temporary, CHUNK_SCHEMA) as writer:
            batch: list[dict] = []
            for row in catalog.chunk_rows(collection, _ROWS_PER_GROUP):
                batch.append(row)
                if len(batch) == _ROWS_PER_GROUP:
                    writer.write_table(pa.Table.from_pylist(batch, schema=CHUNK_SCHEMA))
                    batch = []
            writer.write_table(pa.Table.from_pylist(batch, schema=CHUNK_SCHEMA))

    write_atomically(chunks_path, write_chunks)
    return [documents_path, chunks_path]
