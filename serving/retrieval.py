"""Hybrid retrieval over the collection the pipeline writes: dense + sparse, fused by rank."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rag_pipeline.config import Settings
from rag_pipeline.embedding import DenseEncoder, SparseEncoder
from rag_pipeline.store import open_vector_store
from rag_pipeline.store.schema import QueryFilter

PREFETCH_LIMIT = 60


@dataclass(frozen=True, slots=True)
class SearchHit:
    doc_id: str
    chunk_id: str
    file_path: str
    page: int | None
    bbox: list[float] | None
    section: str
    text: str
    score: float
    modality: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class QueryError(ValueError):
    """A query that cannot be run; the message says why."""


def search(
    settings: Settings,
    query: str,
    *,
    top_k: int = 10,
    query_filter: QueryFilter | None = None,
    wait_seconds: float = 30.0,
) -> list[SearchHit]:
    text = " ".join(query.split())
    if not text:
        raise QueryError("the query is empty")
    if top_k < 1:
        raise QueryError("top-k must be at least 1")
    dense = DenseEncoder(settings.embedding, settings.home).embed_query(text)
    sparse = SparseEncoder(settings.embedding, settings.home).embed_query(text)
    store = open_vector_store(settings, wait_seconds=wait_seconds)
    try:
        hits = store.query(
            dense,
            (sparse.indices, sparse.values),
            limit=top_k,
            prefetch_limit=max(PREFETCH_LIMIT, top_k),
            query_filter=query_filter,
        )
    finally:
        store.close()
    return [
        SearchHit(
            doc_id=hit.payload.get("doc_id", ""),
            chunk_id=hit.payload.get("chunk_id", ""),
            file_path=hit.payload.get("file_path", ""),
            page=hit.payload.get("page"),
            bbox=hit.payload.get("bbox"),
            section=hit.payload.get("section", ""),
            text=hit.payload.get("text", ""),
            score=hit.score,
            modality=hit.payload.get("modality", "text"),
        )
        for hit in hits
    ]
