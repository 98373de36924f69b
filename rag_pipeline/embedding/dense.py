"""Dense text vectors with fastembed, fed in length-sorted batches to a model copy per core.

fastembed pads every batch to its longest text, so texts of similar length are batched together:
the model then spends its time on tokens rather than on padding. Lengths are counted with the
model's own tokenizer, unpadded (the tokenizer fastembed loads pads to the batch's longest text,
which would make every length equal). Small batches keep few cores busy, so the batches are
shared out among copies of the model, each running on its own core (ONNX Runtime releases the
GIL while it computes).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rag_pipeline.config import EmbeddingSettings
from rag_pipeline.embedding.models import (
    dense_model_dim,
    is_foreign,
    load_dense_model,
    load_dense_tokenizer,
    multilingual_model,
)

if TYPE_CHECKING:
    from fastembed import TextEmbedding
    from tokenizers import Tokenizer


class TokenCounter:
    """Token counts and offsets from a model's tokenizer, without truncation or special tokens."""

    def __init__(self, tokenizer: Tokenizer, max_length: int) -> None:
        from tokenizers import Tokenizer as TokenizerType

        self._tokenizer = TokenizerType.from_str(tokenizer.to_str())
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self.special_tokens = len(self._tokenizer.encode("", add_special_tokens=True).ids)
        self.max_length = max_length  # the model's sequence length, special tokens included

    def count(self, texts: list[str]) -> list[int]:
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        return [len(encoding.ids) for encoding in encodings]

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return self._tokenizer.encode(text, add_special_tokens=False).offsets


class DenseEncoder:
    """Loads its model copies on first use (the indexer loads one while parsers work)."""

    def __init__(self, settings: EmbeddingSettings, home: Path) -> None:
        self.model_id = settings.dense_model
        self.batch_size = settings.batch_size
        self.batch_tokens = settings.batch_tokens
        self.copies, _ = settings.dense_parallelism()
        self._settings = settings
        self._home = home
        self._models: list[TextEmbedding] = []
        self.calls = 0  # model invocations, for the pipeline's metadata and tests

    @property
    def dim(self) -> int:
        return dense_model_dim(self._settings, self._home)

    @property
    def model(self) -> TextEmbedding:
        return self._loaded(1)[0]

    def _loaded(self, count: int) -> list[TextEmbedding]:
        """``count`` copies of the model, loaded on first need."""
        while len(self._models) < count:
            self._models.append(load_dense_model(self._settings, self._home))
        return self._models[:count]

    @cached_property
    def tokens(self) -> TokenCounter:
        """The model's tokenizer as a counter (read from its files; the weights stay unloaded)."""
        return TokenCounter(*load_dense_tokenizer(self._settings, self._home))

    def batches(self, texts: list[str]) -> list[np.ndarray]:
        """Indices of ``texts`` in batches of similar token length, shortest first.

        A batch holds at most ``batch_size`` texts and ``batch_tokens`` tokens, padding
        included: many short texts go together, long ones a few at a time, which keeps the
        model's working memory flat (attention grows with the square of the length) and costs
        no speed once the lengths are sorted.
        """
        lengths = np.asarray(self.tokens.count(texts), dtype=np.int64) + self.tokens.special_tokens
        order = np.argsort(lengths, kind="stable")
        batches: list[np.ndarray] = []
        start = 0
        while start < len(order):
            end = start + 1
            while (
                end < len(order)
                and end - start < self.batch_size
                and (end - start + 1) * lengths[order[end]] <= self.batch_tokens
            ):
                end += 1
            batches.append(order[start:end])
            start = end
        return batches

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """One L2-normalised float32 row per text, in the order given."""
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        batches = self.batches(texts)
        models = self._loaded(max(1, min(self.copies, len(batches))))

        def embed_share(copy: int) -> None:
            # Batches go round-robin: sorted by length, every copy gets a like share of work.
            for batch in batches[copy :: len(models)]:
                embedded = models[copy].passage_embed(
                    [texts[i] for i in batch], batch_size=len(batch)
                )
                vectors[batch] = np.asarray(list(embedded), dtype=np.float32)

        with ThreadPoolExecutor(len(models)) as pool:
            list(pool.map(embed_share, range(len(models))))
        self.calls += len(batches)
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        self.calls += 1
        return np.asarray(next(iter(self.model.query_embed(text))), dtype=np.float32)


class LanguageDenseEncoders:
    """The dense model for each text's language: the configured one for the languages it
    understands, the multilingual one (loaded on first use) for the rest."""

    def __init__(self, settings: EmbeddingSettings, home: Path) -> None:
        self.settings = settings
        self.dense = DenseEncoder(settings, home)
        foreign = multilingual_model(settings)
        self.multilingual = (
            DenseEncoder(settings.with_dense_model(foreign), home) if foreign else None
        )

    def for_language(self, lang: str) -> DenseEncoder:
        if self.multilingual is not None and is_foreign(self.settings, lang):
            return self.multilingual
        return self.dense
