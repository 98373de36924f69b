"""Sparse keyword vectors: BM25 (Chinese segmented with jieba first) or, by configuration, SPLADE.

fastembed's BM25 splits on whitespace and punctuation, which leaves a run of Chinese characters
as one "word"; jieba cuts it into words (and, in search mode, also the shorter words inside
long ones) so that a query term matches inside a sentence.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rag_pipeline.config import EmbeddingSettings
from rag_pipeline.embedding.models import load_sparse_model
from rag_pipeline.language import has_cjk

if TYPE_CHECKING:
    from fastembed import SparseTextEmbedding


@dataclass(frozen=True, slots=True)
class SparseVector:
    indices: np.ndarray  # int64
    values: np.ndarray  # float32

    def to_bytes(self) -> bytes:
        count = np.array([len(self.indices)], dtype=np.int64)
        return (
            count.tobytes()
            + self.indices.astype(np.int64).tobytes()
            + self.values.astype(np.float32).tobytes()
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> SparseVector:
        count = int(np.frombuffer(data[:8], dtype=np.int64)[0])
        indices = np.frombuffer(data[8 : 8 + 8 * count], dtype=np.int64)
        values = np.frombuffer(data[8 + 8 * count :], dtype=np.float32)
        return cls(indices=indices, values=values)


def segment_cjk(text: str) -> str:
    """Text with its Chinese words separated by spaces (other text unchanged in substance)."""
    if not has_cjk(text):
        return text
    import jieba

    jieba.setLogLevel(60)  # its dictionary-loading chatter goes to stderr otherwise
    return " ".join(token for token in jieba.cut_for_search(text) if token.strip())


class SparseEncoder:
    def __init__(self, settings: EmbeddingSettings, home: Path) -> None:
        self.model_id = settings.sparse_model_id
        self._is_bm25 = settings.splade_model is None
        self._settings = settings
        self._home = home
        self._model: SparseTextEmbedding | None = None

    @property
    def model(self) -> SparseTextEmbedding:
        if self._model is None:
            self._model = load_sparse_model(self._settings, self._home)
        return self._model

    def _prepare(self, text: str) -> str:
        return segment_cjk(text) if self._is_bm25 else text

    def embed_documents(self, texts: list[str]) -> list[SparseVector]:
        prepared = [self._prepare(text) for text in texts]
        return [
            SparseVector(
                np.asarray(e.indices, dtype=np.int64), np.asarray(e.values, dtype=np.float32)
            )
            for e in self.model.passage_embed(prepared, batch_size=256)
        ]

    def embed_query(self, text: str) -> SparseVector:
        embedding = next(iter(self.model.query_embed(self._prepare(text))))
        return SparseVector(
            np.asarray(embedding.indices, dtype=np.int64),
            np.asarray(embedding.values, dtype=np.float32),
        )

    def query_terms(self, text: str) -> int | None:
        """The distinct terms BM25 scores ``text`` by (stop words out, Chinese segmented);
        None for SPLADE, whose query vector holds expansions, not the question's words."""
        return len(self.embed_query(text).indices) if self._is_bm25 else None
