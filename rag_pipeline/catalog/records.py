"""What the catalog holds: collections, documents and chunks, as Python values.

A chunk row (``CHUNK_SCHEMA``) is the contract between chunking, the stage files, the catalog,
the vector store's payload and the Parquet export.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, NamedTuple

import pyarrow as pa

DocumentState = Literal["indexed", "failed"]
CollectionState = Literal["live", "building", "retired"]
Availability = Literal["active", "archived", "rejected"]


@dataclass(frozen=True, slots=True)
class AvailabilityRecord:
    """Whether operators let a document, or one chunk of it, be found.

    Not tied to a version or a collection: it outlives re-indexing and a change of models. A
    chunk is named by the hash of its text, so a rejected chunk whose text changes is another
    chunk, and comes back.
    """

    doc_id: str
    text_hash: str  # "" for the whole document
    state: Availability
    changed_by: str
    changed_at: float

    @property
    def offline(self) -> bool:
        return self.state != "active"


@dataclass(frozen=True, slots=True)
class CollectionRecord:
    """A vector collection: built for one set of models, answering once it is live.

    A change of model builds another collection beside the live one, which answers until the
    new one holds every document; then the new one goes live and the old one is dropped.
    """

    name: str
    layout: dict[str, Any]  # what identifies its vectors (models)
    models: dict[str, dict[str, Any]]  # the settings that load them (Settings.vector_models)
    state: CollectionState
    created_at: float
    live_at: float | None = None


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
    chunks: int = 0  # of the indexed version
    tokens: int = 0
    attempts: int = 0  # failures in a row of this version
    retry_at: float | None = None  # when a failed document is tried again
    reindex_reason: str | None = None  # set when the next run must index it again regardless
    updated_at: float = 0.0

    @property
    def file_path(self) -> Path:
        return Path(self.source) / self.relative_path


DOCUMENT_FIELDS = tuple(field.name for field in fields(DocumentRecord))


class KnownFile(NamedTuple):
    """A document's row as far as a scan compares it with its file: whether the file changed
    (size, time, hash) and whether its version needs indexing. A narrow read, and a tuple: a
    million of them are read on every pass."""

    source: str
    size: int
    mtime_ns: int
    sha256: str
    version: str
    state: DocumentState
    retry_at: float | None
    reindex_reason: str | None


KNOWN_FILE_FIELDS = KnownFile._fields


class PassState(NamedTuple):
    """What of a collection's documents a pass's finding depends on besides the files: it
    changes whenever a document is committed, failed, deleted or flagged to be indexed again."""

    collection: str
    documents: int
    last_update: float | None
    next_retry_at: float | None  # the earliest retry of a failed document
    flagged: int  # documents flagged to be indexed again


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
        ("image_file", pa.string()),  # the picture, relative to the stage root (the home)
        ("phash", pa.string()),
    ]
)
CHUNK_FIELDS = tuple(CHUNK_SCHEMA.names)
# Stored as JSON text in the database (SQLite has no list type).
_JSON_FIELDS = frozenset({"bboxes", "section", "kinds"})


def chunk_to_sql(row: dict[str, Any]) -> tuple[Any, ...]:
    """A chunk row's values in ``CHUNK_FIELDS`` order, lists as JSON."""
    return tuple(
        json.dumps(row.get(name) or [], ensure_ascii=False)
        if name in _JSON_FIELDS
        else row.get(name)
        for name in CHUNK_FIELDS
    )


def chunk_from_sql(values: tuple[Any, ...]) -> dict[str, Any]:
    return {
        name: json.loads(value) if name in _JSON_FIELDS else value
        for name, value in zip(CHUNK_FIELDS, values, strict=True)
    }


def collection_from_sql(values: tuple[Any, ...]) -> CollectionRecord:
    name, layout, models, state, created_at, live_at = values
    return CollectionRecord(
        name, json.loads(layout), json.loads(models), state, created_at, live_at
    )
