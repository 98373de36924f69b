"""A document's pictures made chunks in the chunks stage: captioned when a captioner is
configured, and kept only when something can find them."""

from __future__ import annotations

from typing import Any, Protocol

from rag_pipeline.chunking import Chunk, picture_chunks
from rag_pipeline.config import Settings
from rag_pipeline.embedding import DenseEncoder, EmbeddingCache
from rag_pipeline.embedding.image import Captioner, ensure_captions
from rag_pipeline.stages import StageFiles


class PictureChunking(Protocol):
    """What making picture chunks takes of the run's :class:`~rag_pipeline.indexing.run.Indexer`
    (the captioner is loaded only when a picture needs it)."""

    settings: Settings
    stages: StageFiles

    @property
    def captioner(self) -> Captioner: ...
    @property
    def cache(self) -> EmbeddingCache: ...
    @property
    def dense(self) -> DenseEncoder: ...


class CaptionError(Exception):
    """The captioning model failed (it fails the documents with pictures to caption)."""


def captioned_picture_chunks(
    indexer: PictureChunking,
    pictures: list[dict[str, Any]],
    doc_id: str,
    version: str,
    first_index: int,
) -> list[Chunk]:
    """A chunk per picture, captioned when a captioner is configured."""
    images = indexer.settings.images
    if not pictures:
        return []
    captions: dict[str, str] = {}
    if images.caption_model:
        files = {p["sha256"]: indexer.stages.root / p["file"] for p in pictures}
        try:
            captions = ensure_captions(indexer.captioner, files, indexer.cache)
        except Exception as error:
            raise CaptionError(str(error)) from error
    if not images.clip_model:  # without image vectors, only captioned pictures are found
        pictures = [p for p in pictures if captions.get(p["sha256"])]
    return picture_chunks(
        pictures,
        captions,
        doc_id=doc_id,
        version=version,
        first_index=first_index,
        counter=indexer.dense.tokens,
    )
