"""A chunk: its text, where it lies in its document (pages, boxes, section), and the row
it is in the catalog's chunk table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rag_pipeline import ids


@dataclass(frozen=True, slots=True)
class ChunkBox:
    page: int
    x0: float
    y0: float
    x1: float
    y1: float


@dataclass(slots=True)
class Chunk:
    chunk_id: str
    doc_id: str
    version: str
    index: int
    text: str
    page_start: int | None
    page_end: int | None
    bboxes: list[ChunkBox]
    section: tuple[str, ...]
    token_count: int
    lang: str
    kinds: tuple[str, ...] = ()
    modality: str = "text"
    image_sha256: str | None = None
    image_file: str | None = None
    phash: str | None = None

    @property
    def text_hash(self) -> str:
        return ids.text_hash(self.text)


def chunk_as_record(chunk: Chunk) -> dict[str, Any]:
    """A chunk as one row of the catalog's chunk table."""
    return {
        "chunk_id": chunk.chunk_id,
        "doc_id": chunk.doc_id,
        "version": chunk.version,
        "chunk_index": chunk.index,
        "text": chunk.text,
        "text_hash": chunk.text_hash,
        "page_start": chunk.page_start,
        "page_end": chunk.page_end,
        "bboxes": [
            {"page": b.page, "x0": b.x0, "y0": b.y0, "x1": b.x1, "y1": b.y1} for b in chunk.bboxes
        ],
        "section": list(chunk.section),
        "token_count": chunk.token_count,
        "lang": chunk.lang,
        "kinds": list(chunk.kinds),
        "modality": chunk.modality,
        "image_sha256": chunk.image_sha256,
        "image_file": chunk.image_file,
        "phash": chunk.phash,
    }
