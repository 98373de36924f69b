"""What every ``rag-pipeline eval`` shares, whatever the dataset's layout.

- a scratch home, ``<home>/eval/<dataset>``, indexed by the same incremental run as any folder
  (:func:`index_in_scratch`);
- one search per query serving every method (:func:`rank_every_method`): the chat page's
  retrieval code (``Retriever.search`` and ``Retriever.rank``) gives each method's chunks, and a
  function given by the dataset's evaluation turns them into the units it scores (BEIR
  documents, PDF pages);
- the query latency of the page's whole retrieval (``Retriever.retrieve``), per query.
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import Settings
from rag_pipeline.orchestration.incremental import index_once
from rag_pipeline.store.schema import Hit, NearestHits
from serving.retrieval import Candidate, Retriever

FUSIONS: tuple[Literal["rrf", "dbsf", "minmax"], ...] = ("rrf", "dbsf", "minmax")

logger = logging.getLogger("rag_pipeline.evaluation")

Unit = TypeVar("Unit")
# A method's chunks, best first, as the units an evaluation scores (each at most once).
UnitsOf = Callable[[list[Hit] | list[Candidate]], list[Unit]]


class DatasetError(ValueError):
    """The folder is not a usable dataset; the message says what is wrong."""


def json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a line that is not a JSON object is a
    :class:`DatasetError` naming ``path:line``."""
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise DatasetError(f"{path}:{number}: not JSON ({error.msg})") from error
            if not isinstance(row, dict):
                raise DatasetError(f"{path}:{number}: not a JSON object")
            yield number, row


@dataclass(frozen=True, slots=True)
class ScratchIndex:
    settings: Settings  # the scratch home's
    seconds: float  # the indexing pass
    documents: int
    chunks: int
    failed: dict[str, str]  # documents that could not be indexed → why


def index_in_scratch(settings: Settings, scratch: Path, sources: list[Path]) -> ScratchIndex:
    """Index ``sources`` (watched in place) into the scratch home ``scratch``, incrementally.

    The scratch home has this home's stored settings, so it chunks and embeds as this home does.
    """
    scratch_settings = settings.in_home(scratch, sources)
    indexed = index_once(scratch_settings, trigger="eval")
    if not indexed.succeeded:
        raise DatasetError("indexing the dataset failed; see the error above")
    for doc_id, reason in indexed.failed.items():
        logger.warning("not indexed, so never found: %s: %s", doc_id, reason)
    with Catalog(scratch_settings) as catalog:
        records = catalog.live_documents()
    return ScratchIndex(
        settings=scratch_settings,
        seconds=indexed.seconds,
        documents=sum(record.state == "indexed" for record in records.values()),
        chunks=sum(record.chunks for record in records.values()),
        failed={
            doc_id: record.error or "unknown reason"
            for doc_id, record in records.items()
            if record.state != "indexed"
        },
    )


def sparse_method(retriever: Retriever) -> str:
    return "splade" if retriever.settings.embedding.splade_model else "bm25"


FRESHNESS_DAYS = 365.0  # the half-life the freshness row uses when none is configured


def configured_method(retriever: Retriever) -> str:
    """The method the chat page uses."""
    config = retriever.settings.retrieval
    if retriever.reranker:
        return f"hybrid {config.fusion} + rerank"
    freshness = " + freshness" if config.freshness_half_life_days is not None else ""
    return f"hybrid {config.fusion}{freshness}"


def rank_every_method(
    retriever: Retriever,
    queries: Mapping[str, str],
    units_of: UnitsOf[Unit],
    *,
    depth: int,
) -> tuple[dict[str, dict[str, list[Unit]]], list[float]]:
    """(method → query id → ranked units, the page's retrieval latency per query in ms).

    One search of ``depth`` chunks per ranking serves every method: ``dense`` (the dense and
    the multilingual model's rankings, as the hybrid fuses them) and ``bm25`` (or ``splade``)
    alone; ``hybrid <fusion>`` for each fusion, on the first ``retrieval.prefetch``
    of both rankings as the page fuses them, without freshness; ``hybrid <fusion> +
    freshness`` for the configured fusion with freshness as configured (else a half-life of
    ``FRESHNESS_DAYS``); ``hybrid <fusion> - page context`` for the configured fusion without
    ``retrieval.page_weight`` (when it is set); ``hybrid <fusion> - page keywords`` for it
    without ``retrieval.page_keyword_weight`` (when it is set, and the collection has page
    vectors); ``hybrid <fusion> - query length`` for it with
    keywords at full weight whatever the question's length (when ``retrieval.sparse_query_terms``
    is set); ``hybrid <fusion> - named year`` for it without ``retrieval.named_year_weight``
    (when it is set); ``hybrid <fusion> - identifiers`` for it without
    ``retrieval.identifier_documents`` (when it is set); ``hybrid <fusion> - page diversity``
    for it without ``retrieval.page_passages`` (when it is set); ``hybrid <fusion> - named
    parts`` for it without the passages of the pages, figures, tables or sections a question
    names (``serving.retrieval.named_parts``); ``hybrid <fusion> + rerank``
    (freshness as configured) when a reranker is configured. A blank query retrieves nothing
    (it scores zero).
    """
    config = retriever.settings.retrieval
    sparse_name = sparse_method(retriever)
    rankings: dict[str, dict[str, list[Unit]]] = {}
    latencies: list[float] = []

    def record(method: str, query_id: str, ranked: list[Unit]) -> None:
        rankings.setdefault(method, {})[query_id] = ranked

    for query_id, text in queries.items():
        if not text.strip():
            continue
        started = time.perf_counter()
        retriever.retrieve(text)
        latencies.append((time.perf_counter() - started) * 1000)
        nearest = retriever.search(text, limit=max(depth, config.prefetch))
        record("dense", query_id, units_of(retriever.dense_side(text, nearest)))
        record(sparse_name, query_id, units_of(nearest.sparse))
        prefetched = NearestHits(
            nearest.dense[: config.prefetch],
            nearest.sparse[: config.prefetch],
            multilingual=nearest.multilingual[: config.prefetch],
            named=nearest.named,
        )
        prefetched.pages = retriever.page_keywords(text, prefetched)
        for fusion in FUSIONS:
            variant = config.model_copy(update={"fusion": fusion, "freshness_half_life_days": None})
            fused, _ = retriever.rank(
                text, prefetched, keep=config.top_k, fusion=variant, rerank=False
            )
            record(f"hybrid {fusion}", query_id, units_of(fused))
        half_life = config.freshness_half_life_days or FRESHNESS_DAYS
        fresh = config.model_copy(update={"freshness_half_life_days": half_life})
        freshened, _ = retriever.rank(
            text, prefetched, keep=config.top_k, fusion=fresh, rerank=False
        )
        record(f"hybrid {config.fusion} + freshness", query_id, units_of(freshened))
        ablations = {
            "page context": {"page_weight": 0.0} if config.page_weight else None,
            "page keywords": ({"page_keyword_weight": 0.0} if config.page_keyword_weight else None),
            "query length": (
                {"sparse_query_terms": None} if config.sparse_query_terms is not None else None
            ),
            "named year": {"named_year_weight": 0.0} if config.named_year_weight else None,
            "identifiers": ({"identifier_documents": 0} if config.identifier_documents else None),
            "page diversity": (
                {"page_passages": None} if config.page_passages is not None else None
            ),
        }
        for feature, without in ablations.items():
            if without is not None:
                variant = config.model_copy(update={**without, "freshness_half_life_days": None})
                passages, _ = retriever.rank(
                    text, prefetched, keep=config.top_k, fusion=variant, rerank=False
                )
                record(f"hybrid {config.fusion} - {feature}", query_id, units_of(passages))
        plain = config.model_copy(update={"freshness_half_life_days": None})
        unnamed, _ = retriever.rank(
            text, replace(prefetched, named=[]), keep=config.top_k, fusion=plain, rerank=False
        )
        record(f"hybrid {config.fusion} - named parts", query_id, units_of(unnamed))
        if retriever.reranker is not None:
            reranked, _ = retriever.rank(text, prefetched, keep=config.top_k)
            record(f"hybrid {config.fusion} + rerank", query_id, units_of(reranked))
    return rankings, latencies


def latency_summary(latencies: list[float]) -> dict[str, float]:
    """p50 and p95 in ms (nearest rank), empty when no query ran."""
    if not latencies:
        return {}
    ordered = sorted(latencies)
    return {
        "p50": round(statistics.median(ordered), 1),
        "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 1),
    }


def format_latency(latency_ms: Mapping[str, float]) -> str:
    if not latency_ms:
        return "query latency: no query ran"
    return (
        "query latency (the page's retrieval, query embedding included): "
        f"p50 {latency_ms['p50']} ms, p95 {latency_ms['p95']} ms"
    )
