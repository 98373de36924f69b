"""Dense text vectors with fastembed, fed in length-sorted batches.

fastembed pads every batch to its longest text, so texts of similar length are batched together:
the model then spends its time on tokens rather than on padding.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rag_pipeline.config import EmbeddingSettings
from rag_pipeline.embedding.models import dense_model_dim, load_dense_model

if TYPE_CHECKING:
    from fastembed import TextEmbedding


class DenseEncoder:
    """Loads its model on first use, so a run whose texts are all cached never loads it."""

    def __init__(self, settings: EmbeddingSettings, home: Path) -> None:
        self.model_id = settings.dense_model
        self.batch_size = settings.batch_size
        self._settings = settings
        self._home = home
        self._model: TextEmbedding | None = None
        self.calls = 0  # model invocations, for the pipeline's metadata and tests

    @property
    def dim(self) -> int:
        return dense_model_dim(self._settings, self._home)

    @property
    def model(self) -> TextEmbedding:
        if self._model is None:
            self._model = load_dense_model(self._settings, self._home)
        return self._model

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """One L2-normalised float32 row per text, in the order given."""
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return vectors
        tokenizer = self.model.model.tokenizer
        lengths = [len(encoding.ids) for encoding in tokenizer.encode_batch(texts)]
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            embedded = self.model.passage_embed([texts[i] for i in batch], batch_size=len(batch))
            vectors[batch] = np.asarray(list(embedded), dtype=np.float32)
            self.calls += 1
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        self.calls += 1
        return np.asarray(next(iter(self.model.query_embed(text))), dtype=np.float32)
