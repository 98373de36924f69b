"""Chunks as points: a collection's layout, and a chunk's vectors read from the embedding cache.

The indexing run and the chat page's replica build points the same way, from the catalog's
chunk rows and the cache, so both hold exactly the same points.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rag_pipeline import ids
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
    page_sparse: str | None  # whole pages' keywords (see page_chunks); None: no such vectors
    embedding: EmbeddingSettings  # which text goes to which dense model

    @classmethod
    def of(cls, settings: Settings) -> VectorModels:
        return cls(
            dense=settings.embedding.dense_model,
            sparse=settings.embedding.sparse_model_id,
            image=clip_model_id(settings.images),
            multilingual=multilingual_model(settings.embedding),
            page_sparse=pages.sparse_model_id
            if (pages := settings.embedding.for_pages())
            else None,
            embedding=settings.embedding,
        )

    @property
    def layout(self) -> VectorLayout:
        return VectorLayout(
            self.dense, self.sparse, self.image, self.multilingual, self.page_sparse
        )

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


def page_chunks(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """A document's text chunks by the page they start on, in order: what a page's keyword
    vector is made of (a chunk running on to the next page counts on the one it starts on,
    where it is cited)."""
    pages: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        if row["text"] and row["page_start"] is not None and not is_picture(row):
            pages.setdefault(row["page_start"], []).append(row)
    return pages


# Bump when a page's text is made differently from the same chunks
# (``indexing.run.Indexer._embed_pages``): its vector is cached under its chunks' texts.
PAGE_TEXT_VERSION = "page-text-1"


def page_key(chunks: list[dict[str, Any]]) -> str:
    """What a page's keyword vector is cached under: the hash of its chunks' texts (the
    vector itself is of their text as the document has it; the same chunks always give the
    same text)."""
    return ids.text_hash("\n".join([PAGE_TEXT_VERSION, *(chunk["text"] for chunk in chunks)]))


def points_from_cache(
    rows: list[dict[str, Any]],
    facts: DocumentFacts,
    cache: EmbeddingCache,
    models: VectorModels,
) -> list[IndexPoint]:
    """A document's chunk rows as points, their vectors read from the embedding cache.

    A chunk with text needs both text vectors (and its page's keywords when pages have them),
    a picture its image vector when pictures have vectors. Chunks missing one are left out
    (the caller compares the counts).
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
    page_hashes = (
        {page: page_key(chunks) for page, chunks in page_chunks(rows).items()}
        if models.page_sparse
        else {}
    )
    page_vectors = (
        cache.get_many(models.page_sparse, list(page_hashes.values())) if models.page_sparse else {}
    )
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
        page_vector = None
        if (page_hash := page_hashes.get(row["page_start"])) and not is_picture(row):
            if page_hash not in page_vectors:
                continue
            keywords = SparseVector.from_bytes(page_vectors[page_hash])
            page_vector = (keywords.indices, keywords.values)
        text_vectors = None
        if has_text:
            vector = SparseVector.from_bytes(sparse[text_hash])
            text_vectors = (vector.indices, vector.values)
        dense_vector = np.frombuffer(dense[text_hash], dtype=np.float32) if has_text else None
        multilingual = dense_vector is not None and models.is_multilingual(row["lang"])
        points.append(
            chunk_point(
                row,
                facts,
                None if multilingual else dense_vector,
                text_vectors,
                image,
                multilingual=dense_vector if multilingual else None,
                page_sparse=page_vector,
            )
        )
    return points
