"""Chunks as points: a collection's layout, and a chunk's vectors read from the embedding cache.

The indexing run and the chat page's replica build points the same way, from the catalog's
chunk rows and the cache, so both hold exactly the same points.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rag_pipeline.config import Settings
from rag_pipeline.embedding import (
    EmbeddingCache,
    SparseVector,
    clip_dim,
    clip_model_id,
    dense_model_dim,
)
from rag_pipeline.store.schema import (
    DocumentFacts,
    IndexPoint,
    VectorLayout,
    chunk_point,
    is_picture,
)


@dataclass(frozen=True, slots=True)
class VectorModels:
    """The models whose ids key a point's vectors in the embedding cache."""

    dense: str
    sparse: str
    image: str | None  # no image vectors when None

    @classmethod
    def of(cls, settings: Settings) -> VectorModels:
        return cls(
            dense=settings.embedding.dense_model,
            sparse=settings.embedding.sparse_model_id,
            image=clip_model_id(settings.images),
        )

    @property
    def layout(self) -> VectorLayout:
        return VectorLayout(self.dense, self.sparse, self.image)


def vector_sizes(settings: Settings) -> tuple[int, int | None]:
    """(text vector size, image vector size or None) of the configured models."""
    return dense_model_dim(settings.embedding, settings.root), clip_dim(settings.images)


def points_from_cache(
    rows: list[dict[str, Any]],
    facts: DocumentFacts,
    cache: EmbeddingCache,
    models: VectorModels,
) -> list[IndexPoint]:
    """A document's chunk rows as points, their vectors read from the embedding cache.

    A chunk with text needs both text vectors, a picture its image vector when pictures have
    vectors. Chunks missing one are left out (the caller compares the counts).
    """
    hashes = [row["text_hash"] for row in rows if row["text"]]
    dense = cache.get_many(models.dense, hashes)
    sparse = cache.get_many(models.sparse, hashes)
    pictures = [row["image_sha256"] for row in rows if is_picture(row)]
    images = cache.get_many(models.image, pictures) if models.image and pictures else {}
    points: list[IndexPoint] = []
    for row in rows:
        text_hash = row["text_hash"]
        has_text = bool(row["text"])
        if has_text and not (text_hash in dense and text_hash in sparse):
            continue
        image = None
        if is_picture(row) and models.image:
            if row["image_sha256"] not in images:
                continue
            image = np.frombuffer(images[row["image_sha256"]], dtype=np.float32)
        text_vectors = None
        if has_text:
            vector = SparseVector.from_bytes(sparse[text_hash])
            text_vectors = (vector.indices, vector.values)
        dense_vector = np.frombuffer(dense[text_hash], dtype=np.float32) if has_text else None
        points.append(chunk_point(row, facts, dense_vector, text_vectors, image))
    return points
