"""A document's pictures → its picture chunks, a picture's caption as its text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rag_pipeline import ids
from rag_pipeline.chunking.chunks import Chunk, ChunkBox
from rag_pipeline.language import detect_language

if TYPE_CHECKING:
    from rag_pipeline.embedding.dense import TokenCounter


def picture_chunks(
    pictures: list[dict[str, Any]],
    captions: dict[str, str],
    *,
    doc_id: str,
    version: str,
    first_index: int,
    counter: TokenCounter,
) -> list[Chunk]:
    """One chunk per picture (a parsed-stage picture record), its caption as its text."""
    texts = [captions.get(picture["sha256"], "") for picture in pictures]
    counts = counter.count(texts) if any(texts) else [0] * len(texts)
    chunks = []
    for offset, (picture, text, tokens) in enumerate(zip(pictures, texts, counts, strict=True)):
        page, bbox = picture["page"], picture["bbox"]
        chunks.append(
            Chunk(
                chunk_id=ids.chunk_id(doc_id, version, first_index + offset),
                doc_id=doc_id,
                version=version,
                index=first_index + offset,
                text=text,
                page_start=page,
                page_end=page,
                bboxes=[ChunkBox(page, *bbox)] if page is not None and bbox else [],
                section=(),
                token_count=tokens if text else 0,
                lang=detect_language(text),
                kinds=("image",),
                modality="image",
                image_sha256=picture["sha256"],
                image_file=picture["file"],
                phash=picture["phash"],
            )
        )
    return chunks
