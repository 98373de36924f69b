"""``rag-pipeline eval``: retrieval quality on a BEIR-layout dataset, through the real pipeline.

The corpus becomes one Markdown file per entry (``# title`` then the text) in a scratch home,
``<home>/eval/<dataset>``, and is indexed by the same incremental run as any folder (so a second
evaluation re-indexes nothing, and a chunking or model change re-indexes what it affects).
Every query goes through the chat page's retrieval code (``Retriever.search`` and
``Retriever.rank``); one search serves every method (``harness.rank_every_method``, shared
with the page-level evaluation of ``evaluation.pages``):

- ``dense``, ``bm25`` (``splade`` when configured): each ranking alone;
- ``hybrid rrf``, ``hybrid dbsf``, ``hybrid minmax``: the fusions, each on the first
  ``retrieval.prefetch`` of both rankings, as the page fuses them; ``retrieval.fusion`` says
  which one the page uses;
- ``hybrid + rerank``: the configured fusion reranked, when a reranker is configured.

Chunks rank their documents: a document is where its best chunk is. Query latency is that of
the page's whole retrieval (``Retriever.retrieve``), measured per query.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from evaluation.harness import (
    DatasetError,
    configured_method,
    format_latency,
    index_in_scratch,
    json_lines,
    latency_summary,
    rank_every_method,
)
from evaluation.metrics import Qrels, evaluate
from rag_pipeline.config import Settings
from rag_pipeline.store.schema import Hit
from serving.rerank import load_reranker
from serving.retrieval import Candidate, Retriever, live_index

__all__ = ["Dataset", "DatasetError", "Report", "format_report", "load_beir", "run_evaluation"]

_DEPTH = 200  # chunks per ranking: enough to rank 100 documents for Recall@100


@dataclass
class Dataset:
    name: str
    corpus: dict[str, tuple[str, str]]  # id → (title, text)
    queries: dict[str, str]  # id → text, only those with judgements
    qrels: Qrels


@dataclass
class Report:
    dataset: str
    documents: int
    chunks: int
    index_seconds: float
    methods: dict[str, dict[str, float]]  # method → metrics
    configured: str  # the method the chat page uses
    latency_ms: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """One object keyed by method; ``run`` holds what the methods share."""
        run = {
            "dataset": self.dataset,
            "documents": self.documents,
            "chunks": self.chunks,
            "index_seconds": round(self.index_seconds, 1),
            "configured_method": self.configured,
            "query_latency_ms": self.latency_ms,
        }
        return {**self.methods, "run": run}


def load_beir(folder: Path, split: str = "test") -> Dataset:
    corpus_file, queries_file = folder / "corpus.jsonl", folder / "queries.jsonl"
    qrels_file = folder / "qrels" / f"{split}.tsv"
    for needed in (corpus_file, queries_file, qrels_file):
        if not needed.is_file():
            raise DatasetError(
                f"{needed} is missing (BEIR layout: corpus.jsonl, queries.jsonl, qrels/{split}.tsv)"
            )
    corpus = {
        str(row["_id"]): (str(row.get("title") or ""), str(row.get("text") or ""))
        for row in _json_lines(corpus_file)
    }
    qrels: dict[str, dict[str, int]] = {}
    for number, line in enumerate(qrels_file.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.strip().split("\t")
        if not line.strip() or (number == 1 and fields[0] == "query-id"):
            continue
        if len(fields) != 3 or not fields[2].lstrip("-").isdigit():
            raise DatasetError(f"{qrels_file}:{number}: expected query-id, corpus-id, score")
        qrels.setdefault(fields[0], {})[fields[1]] = int(fields[2])
    queries = {
        str(row["_id"]): str(row["text"])
        for row in _json_lines(queries_file)
        if str(row["_id"]) in qrels
    }
    if not corpus or not queries:
        raise DatasetError(f"{folder}: no documents, or no judged queries in qrels/{split}.tsv")
    return Dataset(folder.resolve().name, corpus, queries, qrels)


def _json_lines(path: Path) -> Iterable[dict[str, Any]]:
    for number, row in json_lines(path):
        if "_id" not in row:
            raise DatasetError(f"{path}:{number}: no _id")
        yield row


def write_corpus(dataset: Dataset, folder: Path) -> dict[str, str]:
    """One Markdown file per corpus entry (rewritten only when it differs); file name → id."""
    folder.mkdir(parents=True, exist_ok=True)
    names: dict[str, str] = {}
    for doc_id, (title, text) in dataset.corpus.items():
        name = f"{quote(doc_id, safe='')}.md"
        content = f"# {' '.join(title.split())}\n\n{text}\n" if title.strip() else f"{text}\n"
        path = folder / name
        if not path.exists() or path.read_text(encoding="utf-8") != content:
            path.write_text(content, encoding="utf-8")
        names[name] = doc_id
    for stale in folder.glob("*.md"):
        if stale.name not in names:
            stale.unlink()
    return names


def run_evaluation(settings: Settings, folder: Path, split: str = "test") -> Report:
    """Index ``folder``'s corpus into ``<home>/eval/<name>`` and evaluate every method."""
    dataset = load_beir(folder, split)
    scratch = settings.home / "eval" / dataset.name
    corpus_folder = scratch / "corpus"
    names = write_corpus(dataset, corpus_folder)
    indexed = index_in_scratch(settings, scratch, [corpus_folder])
    label = corpus_folder.name
    beir_ids = {f"{label}/{name}": doc_id for name, doc_id in names.items()}

    def documents(hits: list[Hit] | list[Candidate]) -> list[str]:
        return _documents(hits, beir_ids)

    with live_index(indexed.settings) as (live_settings, store):
        retriever = Retriever(live_settings, store, load_reranker(live_settings))
        rankings, latencies = rank_every_method(retriever, dataset.queries, documents, depth=_DEPTH)
    return Report(
        dataset=dataset.name,
        documents=indexed.documents,
        chunks=indexed.chunks,
        index_seconds=indexed.seconds,
        methods={method: evaluate(ranked, dataset.qrels) for method, ranked in rankings.items()},
        configured=configured_method(retriever),
        latency_ms=latency_summary(latencies),
    )


def _documents(hits: list[Hit] | list[Candidate], beir_ids: dict[str, str]) -> list[str]:
    """The dataset's document ids in the order of their best chunk."""
    ranked: dict[str, None] = {}
    for hit in hits:
        doc_id = beir_ids.get(hit.payload.get("doc_id", ""))
        if doc_id is not None:
            ranked.setdefault(doc_id, None)
    return list(ranked)


def format_report(report: Report) -> str:
    lines = [
        f"{report.dataset}: {report.documents} documents, {report.chunks} chunks, indexed in "
        f"{report.index_seconds:.1f} s; {next(iter(report.methods.values()))['queries']} queries",
        f"{'method':<26} {'nDCG@10':>8} {'Recall@100':>11} {'MRR@10':>8}",
    ]
    for method, metrics in report.methods.items():
        mark = "  ← the chat page's" if method == report.configured else ""
        lines.append(
            f"{method:<26} {metrics['ndcg@10']:>8.4f} {metrics['recall@100']:>11.4f} "
            f"{metrics['mrr@10']:>8.4f}{mark}"
        )
    lines.append(format_latency(report.latency_ms))
    return "\n".join(lines)
