"""The whole page evaluation: the dataset indexed, every method and the page baselines ranked
for each question, the pipeline's hits taken as the pages they lie on, and scored."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from evaluation.harness import (
    configured_method,
    index_in_scratch,
    latency_summary,
    rank_every_method,
    sparse_method,
)
from evaluation.metrics import Passage, evaluate_passages
from evaluation.pages.baselines import (
    PageBaseline,
    named,
    page_sparse_encoder,
    rank_baselines,
    read_pages,
)
from evaluation.pages.dataset import PageDataset, load_pages, question_groups
from evaluation.pages.report import PageReport
from rag_pipeline.config import Settings
from rag_pipeline.embedding import open_embedding_cache
from rag_pipeline.manifest import source_labels
from rag_pipeline.store import Hit, payload_pages
from serving.rerank import load_reranker
from serving.retrieval import Candidate, Retriever, live_index

logger = logging.getLogger("rag_pipeline.evaluation")

_DEPTH = 100  # chunks per ranking: far more than the 10 pages scored


# -- the pipeline's hits as pages -------------------------------------------------------------


def passages_of(hits: Iterable[Hit | Candidate], names: Mapping[str, str]) -> list[Passage]:
    """Each hit as the dataset's pages it lies on, in order; ``names``: doc_id → doc_name (a
    passage of another document, or without a page, lies on none of them but still takes its
    place among the first k)."""
    passages: list[Passage] = []
    for hit in hits:
        name = names.get(hit.payload.get("doc_id", ""))
        pages = payload_pages(hit.payload) if name is not None else []
        passages.append(tuple((name, page) for page in pages if name is not None))
    return passages


# -- the whole evaluation ---------------------------------------------------------------------


def run_page_evaluation(settings: Settings, folder: Path) -> PageReport:
    """Index ``folder``'s PDFs into ``<home>/eval/<name>``; score every method and the page
    baselines."""
    dataset = load_pages(folder)
    scratch = settings.home / "eval" / dataset.name
    indexed = index_in_scratch(settings, scratch, [dataset.pdfs])
    names = document_names(indexed.settings, dataset)
    queries = {query_id: question.text for query_id, question in dataset.questions.items()}

    def units_of(hits: list[Hit] | list[Candidate]) -> list[Passage]:
        return passages_of(hits, names)

    with live_index(indexed.settings) as (live_settings, store):
        retriever = Retriever(live_settings, store, load_reranker(live_settings))
        rankings, latencies = rank_every_method(retriever, queries, units_of, depth=_DEPTH)
        started = time.perf_counter()
        logger.info("page baselines: reading the pages of %d PDFs", len(dataset.documents))
        units, texts = read_pages(dataset)
        variants = {"": texts, " + name": named(units, texts)}
        sparse = {
            suffix: page_sparse_encoder(live_settings, pages) for suffix, pages in variants.items()
        }
        cache = open_embedding_cache(live_settings)
        try:
            baselines = {
                suffix: PageBaseline.build((units, pages), retriever.dense, sparse[suffix], cache)
                for suffix, pages in variants.items()
            }
        finally:
            cache.close()
        baseline_seconds = time.perf_counter() - started
        rankings |= rank_baselines(
            baselines, queries, retriever.dense, sparse, live_settings.retrieval
        )
    evidence = {query_id: question.evidence for query_id, question in dataset.questions.items()}
    return PageReport(
        dataset=dataset.name,
        documents=len(dataset.documents),
        pages=len(units),
        chunks=indexed.chunks,
        index_seconds=indexed.seconds,
        baseline_seconds=baseline_seconds,
        methods={
            method: evaluate_passages(ranked, evidence) for method, ranked in rankings.items()
        },
        configured=configured_method(retriever),
        sides=("dense", sparse_method(retriever)),
        groups={
            group: {
                method: evaluate_passages(ranked, members) for method, ranked in rankings.items()
            }
            for group, members in question_groups(dataset).items()
        },
        latency_ms=latency_summary(latencies),
        not_indexed=indexed.failed,
    )


def document_names(settings: Settings, dataset: PageDataset) -> dict[str, str]:
    """doc_id → doc_name, for a dataset indexed in place as the scratch home's only folder."""
    (label,) = source_labels(settings.watched_folders)
    return {f"{label}/{path.name}": name for name, path in dataset.documents.items()}
