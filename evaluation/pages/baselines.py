"""The naive page baselines: every page of every PDF one unit, ranked by the dense model on its
first tokens (``pages dense``) and fused with BM25 over its text (``pages hybrid``), each also
with the document's name first (``+ name``)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping

import numpy as np

from evaluation.metrics import PageUnit, Passage
from evaluation.pages.dataset import PageDataset
from rag_pipeline import ids
from rag_pipeline.config import RetrievalSettings, Settings
from rag_pipeline.embedding import (
    DenseEncoder,
    EmbeddingCache,
    SparseEncoder,
    SparseVector,
    ensure_dense,
    ensure_sparse,
)
from rag_pipeline.embedding.dense import TokenCounter
from rag_pipeline.embedding.models import ENGLISH_STOPWORDS
from rag_pipeline.store.schema import Hit, NearestHits
from serving.retrieval import fuse

logger = logging.getLogger("rag_pipeline.evaluation")

BASELINE_TOKENS = 256  # what the page baseline's dense model is fed of each page
# The naive page lines; the configured method is compared with the strongest of them on the same
# questions (evaluation.pages.report.strongest_baseline).
BASELINES = ("pages dense + name", "pages hybrid + name", "pages dense", "pages hybrid")


def read_pages(dataset: PageDataset) -> tuple[list[PageUnit], list[str]]:
    """Every page with text, of every PDF: (units, their ``page.get_text()``)."""
    import pymupdf

    units: list[PageUnit] = []
    texts: list[str] = []
    for name, path in dataset.documents.items():
        with pymupdf.open(path) as doc:
            for page in doc:
                text = page.get_text()
                if text.strip():
                    units.append((name, page.number + 1))
                    texts.append(text)
    return units, texts


def named(units: list[PageUnit], texts: list[str]) -> list[str]:
    """Each page's text after its document's name: the file stem, ``_`` as spaces, and a line
    break (what any naive pipeline embeds: the file it read)."""
    return [
        f"{name.replace('_', ' ')}\n{text}" for (name, _), text in zip(units, texts, strict=True)
    ]


def first_tokens(text: str, tokens: TokenCounter, limit: int = BASELINE_TOKENS) -> str:
    """``text`` cut after its first ``limit`` tokens, the model's special tokens included."""
    keep = min(limit, tokens.max_length) - tokens.special_tokens
    offsets = tokens.offsets(text)
    return text if len(offsets) <= keep else text[: offsets[keep - 1][1]]


def bm25_length(text: str) -> int:
    """A page's length as BM25 counts it (words, stop words left out), near enough."""
    return sum(1 for word in re.findall(r"\w+", text.lower()) if word not in ENGLISH_STOPWORDS)


class PageBaseline:
    """Every page one unit: dense vectors of its first tokens, BM25 postings of its text."""

    def __init__(
        self, units: list[PageUnit], dense: np.ndarray, sparse: list[SparseVector]
    ) -> None:
        self.units = units
        self.dense = dense  # one L2-normalised row per unit
        self.postings = _postings(sparse)  # term → (unit rows, weight × IDF)

    @classmethod
    def build(
        cls,
        pages: tuple[list[PageUnit], list[str]],
        dense: DenseEncoder,
        sparse: SparseEncoder,
        cache: EmbeddingCache,
    ) -> PageBaseline:
        """From :func:`read_pages`' units and texts; vectors found in ``cache`` are reused, the
        others embedded and added to it."""
        units, texts = pages
        cut = [first_tokens(text, dense.tokens) for text in texts]
        dense_keys = [ids.text_hash(text) for text in cut]
        sparse_keys = [ids.text_hash(text) for text in texts]

        def progress(done: int, total: int) -> None:
            logger.info("page baseline: %d of %d pages embedded", done, total)

        ensure_dense(dense, dict(zip(dense_keys, cut, strict=True)), cache, progress)
        ensure_sparse(sparse, dict(zip(sparse_keys, texts, strict=True)), cache)
        dense_found = cache.get_many(dense.model_id, dense_keys)
        sparse_found = cache.get_many(sparse.model_id, sparse_keys)
        return cls(
            units,
            np.stack([np.frombuffer(dense_found[key], dtype=np.float32) for key in dense_keys]),
            [SparseVector.from_bytes(sparse_found[key]) for key in sparse_keys],
        )

    def nearest_dense(self, vector: np.ndarray, limit: int) -> list[Hit]:
        scores = self.dense @ vector
        order = np.argsort(-scores, kind="stable")[:limit]
        return [self._hit(int(row), float(scores[row])) for row in order]

    def nearest_sparse(self, vector: SparseVector, limit: int) -> list[Hit]:
        """Pages sharing a term with the query, by BM25 (as Qdrant scores the IDF modifier)."""
        scores = np.zeros(len(self.units), dtype=np.float64)
        for term, weight in zip(vector.indices.tolist(), vector.values.tolist(), strict=True):
            if term in self.postings:
                rows, values = self.postings[term]
                scores[rows] += weight * values
        matched = np.flatnonzero(scores > 0)
        order = matched[np.argsort(-scores[matched], kind="stable")][:limit]
        return [self._hit(int(row), float(scores[row])) for row in order]

    def _hit(self, row: int, score: float) -> Hit:
        return Hit(point_id=str(row), score=score, payload={"unit": self.units[row]})


def _postings(vectors: list[SparseVector]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Inverted lists with Qdrant's IDF folded in: ln(1 + (N − n + 0.5) / (n + 0.5))."""
    if not any(len(vector.indices) for vector in vectors):
        return {}
    terms = np.concatenate([vector.indices for vector in vectors])
    weights = np.concatenate([vector.values for vector in vectors]).astype(np.float64)
    rows = np.concatenate([np.full(len(v.indices), row) for row, v in enumerate(vectors)])
    order = np.argsort(terms, kind="stable")
    terms, weights, rows = terms[order], weights[order], rows[order]
    unique, starts, counts = np.unique(terms, return_index=True, return_counts=True)
    idf = np.log1p((len(vectors) - counts + 0.5) / (counts + 0.5))
    return {
        int(term): (rows[start : start + count], weights[start : start + count] * term_idf)
        for term, start, count, term_idf in zip(unique, starts, counts, idf, strict=True)
    }


def rank_baselines(
    baselines: Mapping[str, PageBaseline],
    queries: Mapping[str, str],
    dense: DenseEncoder,
    sparse: Mapping[str, SparseEncoder],
    config: RetrievalSettings,
) -> dict[str, dict[str, list[Passage]]]:
    """For each baseline ``pages dense<suffix>`` (cosine over every page) and ``pages
    hybrid<suffix>`` (with BM25, by RRF on the first ``retrieval.prefetch`` of each, with the
    configured weights); ``baselines`` and ``sparse`` are keyed by the suffix."""
    rrf = config.model_copy(update={"fusion": "rrf"})
    rankings: dict[str, dict[str, list[Passage]]] = {}
    for query_id, query in queries.items():
        text = " ".join(query.split())
        if not text:
            continue
        vector = dense.embed_query(text)
        for suffix, baseline in baselines.items():
            by_dense = baseline.nearest_dense(vector, config.prefetch)
            by_sparse = baseline.nearest_sparse(sparse[suffix].embed_query(text), config.prefetch)
            fused = fuse(NearestHits(by_dense, by_sparse), rrf)
            for method, hits in (("dense", by_dense), ("hybrid", fused)):
                rankings.setdefault(f"pages {method}{suffix}", {})[query_id] = [
                    (hit.payload["unit"],) for hit in hits
                ]
    return rankings


def page_sparse_encoder(settings: Settings, texts: Iterable[str]) -> SparseEncoder:
    """The pipeline's sparse encoder; BM25's average length set to the pages' own (its
    configured one is that of chunks, a fraction of a page)."""
    embedding = settings.embedding
    if not embedding.splade_model:
        lengths = [bm25_length(text) for text in texts]
        average = max(sum(lengths) / max(len(lengths), 1), 1.0)
        embedding = embedding.model_copy(update={"bm25_avg_len": round(average, 1)})
    return SparseEncoder(embedding, settings.root)
