"""Text → vectors: dense and sparse encoders behind one cache keyed by (model, text hash); and
pictures → vectors: CLIP (``image.py``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rag_pipeline.embedding.cache import (
    EmbeddingCache,
    SqliteEmbeddingCache,
    open_embedding_cache,
)
from rag_pipeline.embedding.dense import DenseEncoder, LanguageDenseEncoders
from rag_pipeline.embedding.image import ClipEncoder, clip_dim, clip_model_id
from rag_pipeline.embedding.models import (
    dense_model_dim,
    dense_model_languages,
    is_foreign,
    models_folder,
    multilingual_model,
)
from rag_pipeline.embedding.sparse import SparseEncoder, SparseVector

__all__ = [
    "ClipEncoder",
    "DenseEncoder",
    "EmbeddingCache",
    "LanguageDenseEncoders",
    "SparseEncoder",
    "SparseVector",
    "SqliteEmbeddingCache",
    "clip_dim",
    "clip_model_id",
    "dense_model_dim",
    "dense_model_languages",
    "ensure_dense",
    "ensure_sparse",
    "is_foreign",
    "models_folder",
    "multilingual_model",
    "open_embedding_cache",
]


# Texts embedded between cache writes: bounds memory, and a killed run keeps its progress.
_SLICE = 1024

Progress = Callable[[int, int], None]  # (texts done, texts to do)


def _ensure(
    model_id: str,
    texts: Mapping[str, str],
    cache: EmbeddingCache,
    embed: Callable[[list[str]], list[bytes]],
    progress: Progress | None,
) -> set[str]:
    """Put a vector for every ``text_hash → text`` into the cache; return the hashes it embedded."""
    known = cache.get_many(model_id, texts)
    missing = [text_hash for text_hash in texts if text_hash not in known]
    for start in range(0, len(missing), _SLICE):
        batch = missing[start : start + _SLICE]
        vectors = embed([texts[text_hash] for text_hash in batch])
        cache.put_many(model_id, dict(zip(batch, vectors, strict=True)))
        if progress:
            progress(start + len(batch), len(missing))
    return set(missing)


def ensure_dense(
    encoder: DenseEncoder,
    texts: Mapping[str, str],
    cache: EmbeddingCache,
    progress: Progress | None = None,
) -> set[str]:
    return _ensure(
        encoder.model_id,
        texts,
        cache,
        lambda batch: [row.tobytes() for row in encoder.embed_documents(batch)],
        progress,
    )


def ensure_sparse(
    encoder: SparseEncoder,
    texts: Mapping[str, str],
    cache: EmbeddingCache,
    progress: Progress | None = None,
) -> set[str]:
    return _ensure(
        encoder.model_id,
        texts,
        cache,
        lambda batch: [vector.to_bytes() for vector in encoder.embed_documents(batch)],
        progress,
    )
