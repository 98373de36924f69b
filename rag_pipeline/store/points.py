"""Chunks as points: a collection's layout, and a chunk's vectors read from the embedding cache.

The indexing run and the chat page's replica build points the same way, from the catalog's
chunk rows and the cache, so both hold exactly the same points.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rag_pipeline.config import EmbeddingSettings, Settings
from rag_pipeline.embedding import (
    EmbeddingCache,
    SparseVector,
    clip_dim,
    clip_model_id,
    dense_model_dim,
    is_foreign,
    multilingual_model,
)
from rag_pipeline.store.schema import (
    DocumentFacts,
    IndexPoint,
    VectorLayout,
    VectorSizes,
    chunk_point,
    is_picture,
)


@dataclass(frozen=True, slots=True)
class VectorModels:
    """The models whose ids key a point's vectors in the embedding cache."""

    dense: str
    sparse: str
    image: str | None  # no image vectors when None
    multilingual: str | None  # text the dense model does not understand; None: no such vectors
    embedding: EmbeddingSettings  # which text goes to which dense model

    @classmethod
    def of(cls, settings: Settings) -> VectorModels:
        return cls(
            dense=settings.embedding.dense_model,
            sparse=settings.embedding.sparse_model_id,
            image=clip_model_id(settings.images),
            multilingual=multilingual_model(settings.embedding),
            embedding=settings.embedding,
        )

    @property
    def layout(self) -> VectorLayout:
        return VectorLayout(self.dense, self.sparse, self.image, self.multilingual)

    def is_multilingual(self, lang: str) -> bool:
        """Whether a text in ``lang`` has the multilingual model's vector."""
        return is_foreign(self.embedding, lang)

    def dense_for(self, lang: str) -> str:
        """The model whose vector a text in ``lang`` has."""
        return self.multilingual if self.multilingual and self.is_multilingual(lang) else self.dense


def vector_sizes(settings: Settings) -> VectorSizes:
    """The sizes of the configured models' vectors."""
    foreign = multilingual_model(settings.embedding)
    return VectorSizes(
        dense=dense_model_dim(settings.embedding, settings.root),
        image=clip_dim(settings.images),
        multilingual=(
            dense_model_dim(settings.embedding.with_dense_model(foreign), settings.root)
            if foreign
            else None
        ),
    )


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
    by_model: dict[str, list[str]] = {}  # each text's dense vector is its language's model's
    for row in rows:
        if row["text"]:
            by_model.setdefault(models.dense_for(row["lang"]), []).append(row["text_hash"])
    dense: dict[str, bytes] = {}
    for model, wanted in by_model.items():
        dense |= cache.get_many(model, wanted)
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
        if dense_vector is not None and models.is_multilingual(row["lang"]):
            points.append(
                chunk_point(row, facts, None, text_vectors, image, multilingual=dense_vector)
            )
        else:
            points.append(chunk_point(row, facts, dense_vector, text_vectors, image))
    return points
