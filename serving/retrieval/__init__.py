"""Hybrid retrieval: dense, sparse (and CLIP image) nearest neighbours, fused, reranked, cut.

One Qdrant search returns the nearest points by each vector (``VectorStore.nearest``); they are
fused here rather than inside Qdrant so that every fusion method (RRF, DBSF, min-max sums, with
weights) works the same on both backends, and so that a trace keeps each ranking. The numbers
(candidates per vector, fusion, rerank depth, passages kept, score threshold) are settings.

The parts: the query models (``encoders``), fusion (``fusion``), what moves candidates after
it (``boosts``), and the retriever that runs them in order (``retriever``), returning
``candidates``. The stores searched through the catalog (``CommittedOnly``, ``OnlineOnly``) are
the store's (``rag_pipeline.store``).
"""

from rag_pipeline.store import CommittedOnly, OnlineOnly
from serving.retrieval.boosts import document_date
from serving.retrieval.candidates import Candidate, QueryError, Retrieval, shown_text
from serving.retrieval.encoders import QueryEncoders, query_encoders
from serving.retrieval.fusion import fuse
from serving.retrieval.retriever import Retriever, live_index, search

__all__ = [
    "Candidate",
    "CommittedOnly",
    "OnlineOnly",
    "QueryEncoders",
    "QueryError",
    "Retrieval",
    "Retriever",
    "document_date",
    "fuse",
    "live_index",
    "query_encoders",
    "search",
    "shown_text",
]
