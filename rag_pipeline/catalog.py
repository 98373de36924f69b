"""The catalog: documents and chunks as Parquet under ``<home>/catalog``, queried with DuckDB.

- ``documents.parquet``: one row per document: where it is, its content hash, the version that
  was processed last, its state (``indexed`` or ``failed`` with a reason) and counts;
- ``chunks/<key>.parquet``: the chunks of each document's indexed version, with everything a
  citation needs (text, pages, boxes, section).

Files are replaced atomically, so readers in other processes never see half a write and never
wait for a lock. The catalog is written only when a document's points are in the vector store,
which keeps the two consistent after every run.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from rag_pipeline import ids

if TYPE_CHECKING:
    import duckdb

DocumentState = Literal["indexed", "failed"]


@dataclass(slots=True)
class DocumentRecord:
    doc_id: str
    source: str  # the watched folder
    relative_path: str
    file_type: str
    size: int
    mtime_ns: int
    sha256: str
    version: str  # the version processed last (indexed or failed)
    state: DocumentState
    indexed_version: str | None = None  # the version whose points are searchable
    error: str | None = None
    title: str | None = None
    pages: int | None = None
    chunks: int = 0
    tokens: int = 0
    updated_at: float = 0.0

    @property
    def file_path(self) -> Path:
        return Path(self.source) / self.relative_path


_DOCUMENT_SCHEMA = pa.schema(
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
        ("updated_at", pa.float64()),
    ]
)
_BBOX = pa.struct(
    [
        ("page", pa.int64()),
        ("x0", pa.float64()),
        ("y0", pa.float64()),
        ("x1", pa.float64()),
        ("y1", pa.float64()),
    ]
)
CHUNK_SCHEMA = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("doc_id", pa.string()),
        ("version", pa.string()),
        ("chunk_index", pa.int64()),
        ("text", pa.string()),
        ("text_hash", pa.string()),
        ("page_start", pa.int64()),
        ("page_end", pa.int64()),
        ("bboxes", pa.list_(_BBOX)),
        ("section", pa.list_(pa.string())),
        ("token_count", pa.int64()),
        ("lang", pa.string()),
        ("kinds", pa.list_(pa.string())),
        # "text", or "image" for a picture (its text: the caption, if any)
        ("modality", pa.string()),
        ("image_sha256", pa.string()),  # the picture's content hash: its CLIP vector's key
        ("image_file", pa.string()),  # the picture, relative to the home folder
        ("phash", pa.string()),
    ]
)


def write_atomically(path: Path, write: Callable[[str], None]) -> None:
    """``write(temporary_path)``, then move the result onto ``path`` in one step."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    os.close(descriptor)
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_parquet_atomically(table: pa.Table, path: Path) -> None:
    write_atomically(path, lambda temporary: pq.write_table(table, temporary))


def _read_parquet(path: Path) -> pa.Table:
    # One file: pq.read_table would set up a dataset (and import pyarrow.dataset), which costs
    # 0.3 s, more than an unchanged re-run of a thousand documents takes otherwise.
    return pq.ParquetFile(path).read()


class Catalog:
    def __init__(self, home: Path) -> None:
        self.folder = home / "catalog"
        self.documents_path = self.folder / "documents.parquet"
        self.chunks_folder = self.folder / "chunks"

    def documents(self) -> dict[str, DocumentRecord]:
        if not self.documents_path.exists():
            return {}
        rows = _read_parquet(self.documents_path).to_pylist()
        return {row["doc_id"]: DocumentRecord(**row) for row in rows}

    def write_documents(self, records: Iterable[DocumentRecord]) -> None:
        rows = sorted((asdict(record) for record in records), key=lambda row: row["doc_id"])
        table = pa.Table.from_pylist(rows, schema=_DOCUMENT_SCHEMA)
        write_parquet_atomically(table, self.documents_path)

    def chunks_path(self, doc_id: str) -> Path:
        return self.chunks_folder / f"{ids.storage_key(doc_id)}.parquet"

    def chunks(self, doc_id: str) -> list[dict[str, Any]]:
        path = self.chunks_path(doc_id)
        return _read_parquet(path).to_pylist() if path.exists() else []

    def write_chunks(self, doc_id: str, chunks: list[dict[str, Any]]) -> None:
        write_parquet_atomically(
            pa.Table.from_pylist(chunks, schema=CHUNK_SCHEMA), self.chunks_path(doc_id)
        )

    def remove_chunks(self, doc_id: str) -> None:
        self.chunks_path(doc_id).unlink(missing_ok=True)

    def connect(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB with views ``documents`` and ``chunks`` over the Parquet files."""
        import duckdb

        connection = duckdb.connect()
        documents = (
            f"read_parquet('{_sql_path(self.documents_path)}')"
            if self.documents_path.exists()
            else _empty_select(_DOCUMENT_SCHEMA)
        )
        chunk_files = (
            list(self.chunks_folder.glob("*.parquet")) if self.chunks_folder.exists() else []
        )
        chunks = (
            f"read_parquet('{_sql_path(self.chunks_folder)}/*.parquet', union_by_name=true)"
            if chunk_files
            else _empty_select(CHUNK_SCHEMA)
        )
        connection.execute(f"CREATE VIEW documents AS SELECT * FROM {documents}")
        connection.execute(f"CREATE VIEW chunks AS SELECT * FROM {chunks}")
        return connection


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


def _empty_select(schema: pa.Schema) -> str:
    types = {
        pa.string(): "VARCHAR",
        pa.int64(): "BIGINT",
        pa.float64(): "DOUBLE",
    }
    columns = ", ".join(
        f"CAST(NULL AS {types.get(field.type, 'VARCHAR')}) AS {field.name}" for field in schema
    )
    return f"(SELECT {columns} WHERE false)"


DOCUMENT_FIELDS = tuple(field.name for field in fields(DocumentRecord))
