"""Text → vectors: dense and sparse encoders behind one cache keyed by (model, text hash)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from rag_pipeline.embedding.cache import EmbeddingCache
from rag_pipeline.embedding.dense import DenseEncoder
from rag_pipeline.embedding.sparse import SparseEncoder, SparseVector

__all__ = [
    "DenseEncoder",
    "EmbeddingCache",
    "EmbeddingCounts",
    "SparseEncoder",
    "SparseVector",
    "ensure_dense",
    "ensure_sparse",
]


@dataclass(frozen=True, slots=True)
class EmbeddingCounts:
    embedded: int  # texts the model ran on
    cached: int  # texts whose vector was already in the cache


def _ensure(
    model_id: str,
    texts: Mapping[str, str],
    cache: EmbeddingCache,
    embed: Callable[[list[str]], list[bytes]],
) -> EmbeddingCounts:
    """Put a vector for every ``text_hash → text`` into the cache, computing only the missing."""
    known = cache.get_many(model_id, texts)
    missing = [text_hash for text_hash in texts if text_hash not in known]
    if missing:
        vectors = embed([texts[text_hash] for text_hash in missing])
        cache.put_many(model_id, dict(zip(missing, vectors, strict=True)))
    return EmbeddingCounts(embedded=len(missing), cached=len(texts) - len(missing))


def ensure_dense(
    encoder: DenseEncoder, texts: Mapping[str, str], cache: EmbeddingCache
) -> EmbeddingCounts:
    return _ensure(
        encoder.model_id,
        texts,
        cache,
        lambda batch: [row.tobytes() for row in encoder.embed_documents(batch)],
    )


def ensure_sparse(
    encoder: SparseEncoder, texts: Mapping[str, str], cache: EmbeddingCache
) -> EmbeddingCounts:
    return _ensure(
        encoder.model_id,
        texts,
        cache,
        lambda batch: [vector.to_bytes() for vector in encoder.embed_documents(batch)],
    )


def dense_from_bytes(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.float32)
