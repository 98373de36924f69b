"""``rag-pipeline eval`` on a PDF question set: does retrieval find the evidence page?

Layout (FinanceBench's): ``pdfs/<doc_name>.pdf`` and ``questions.jsonl``, one object a line
with ``question``, ``doc_name`` and ``evidence[].evidence_page_num`` (a **0-based** page index;
``evidence[].doc_name`` when an evidence page is in another document).

Every PDF goes into ONE shared index, as a user would have them: ``pdfs/`` is indexed in place,
as the watched folder of the scratch home ``<home>/eval/<dataset>`` (incremental: a second
evaluation re-indexes nothing). Each question then runs through the chat page's retrieval for
every method (``harness.rank_every_method``: dense, bm25 or splade, hybrid with each fusion,
+ rerank when configured).

A unit is a page, ``(doc_name, 1-based page)``: a passage (a chunk) lies on the pages its boxes
lie on (the payload's ``bboxes``, else ``page`` to ``page_end``). Scores
(``metrics.evaluate_passages``): passage-hit@1/5/10 (an evidence page among the pages of the
first k passages, in the order the chat page gets them: what the answerer reads), and over pages
ranked where their first passage is, page-hit@1/5/10, doc-hit@5 and MRR@10.

Naive page-unit baselines are computed in the same run; each page is one passage:

- ``pages dense + name`` (the reference): the PDF's file stem with ``_`` as spaces, a line
  break, then PyMuPDF's ``page.get_text()``, cut to the first 256 tokens of the dense model's
  tokenizer (special tokens included, as a chunk's 256 are), embedded by the same dense model the
  pipeline uses; cosine top-k over every page of every PDF. The vectors go through the
  pipeline's embedding cache (model × text hash), so a second evaluation embeds nothing;
- ``pages dense``: the same without the name;
- ``pages hybrid`` and ``pages hybrid + name``: BM25 over whole page texts (the pipeline's
  sparse encoder, its average length set to the pages' own; IDF as Qdrant computes it), with the
  name first for the second, fused with the dense line of the same name by RRF.

Folds: the documents are split in two halves (:func:`document_fold`, fixed), so that a setting
tuned on one half's questions is reported on the other's (``bench/retrieval_folds.py``).
"""

from __future__ import annotations

import ast
import hashlib
import logging
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.harness import (
    DatasetError,
    configured_method,
    format_latency,
    index_in_scratch,
    json_lines,
    latency_summary,
    rank_every_method,
)
from evaluation.metrics import (
    PAGE_METRICS,
    PASSAGE_METRICS,
    PageUnit,
    Passage,
    evaluate_passages,
)
from rag_pipeline import ids
from rag_pipeline.config import RetrievalSettings, Settings
from rag_pipeline.embedding import (
    DenseEncoder,
    EmbeddingCache,
    SparseEncoder,
    SparseVector,
    ensure_dense,
    ensure_sparse,
    open_embedding_cache,
)
from rag_pipeline.embedding.dense import TokenCounter
from rag_pipeline.embedding.models import ENGLISH_STOPWORDS
from rag_pipeline.manifest import source_labels
from rag_pipeline.store.schema import Hit, NearestHits
from serving.rerank import load_reranker
from serving.retrieval import Candidate, Retriever, fuse, live_index

logger = logging.getLogger("rag_pipeline.evaluation")

QUESTIONS_FILE = "questions.jsonl"
PDFS_FOLDER = "pdfs"
LAYOUT = f"page layout: {QUESTIONS_FILE} and {PDFS_FOLDER}/<doc_name>.pdf"
BASELINE_TOKENS = 256  # what the page baseline's dense model is fed of each page
REFERENCE = "pages dense + name"  # the baseline the configured method is compared with
BASELINES = (REFERENCE, "pages hybrid + name", "pages dense", "pages hybrid")
_DEPTH = 100  # chunks per ranking: far more than the 10 pages scored
FOLDS = ("A", "B")
# Where on its page an answer is (MMLongBench-Doc's evidence_sources), as short names.
SOURCES = {
    "Pure-text (Plain-text)": "text",
    "Table": "table",
    "Chart": "chart",
    "Figure": "image",
    "Image": "image",
    "Generalized-text (Layout)": "layout",
}


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    doc_name: str
    evidence: frozenset[PageUnit]  # (doc_name, 1-based page)
    sources: frozenset[str] = frozenset()  # SOURCES' short names, when the dataset says


@dataclass
class PageDataset:
    name: str
    pdfs: Path
    documents: dict[str, Path]  # doc_name → its PDF
    page_counts: dict[str, int]
    questions: dict[str, Question]  # id (its line in questions.jsonl) → question


@dataclass
class PageReport:
    dataset: str
    documents: int  # PDFs in the dataset
    pages: int  # their pages with text: the baseline's units
    chunks: int
    index_seconds: float
    baseline_seconds: float  # reading, embedding (or finding in the cache) the pages
    methods: dict[str, dict[str, float]]  # method → metrics
    configured: str  # the method the chat page uses
    groups: dict[str, dict[str, dict[str, float]]]  # group (question_groups) → method → metrics
    latency_ms: dict[str, float] = field(default_factory=dict)
    not_indexed: dict[str, str] = field(default_factory=dict)  # document → why

    @property
    def ratio(self) -> float | None:
        """The configured method's passage-hit@5 over the reference baseline's (None if 0)."""
        reference = self.methods[REFERENCE]["passage-hit@5"]
        if not reference:
            return None
        return self.methods[self.configured]["passage-hit@5"] / reference

    def as_json(self) -> dict[str, Any]:
        """One object keyed by method; ``run`` holds what the methods share."""
        ratio = self.ratio
        run = {
            "dataset": self.dataset,
            "documents": self.documents,
            "pages": self.pages,
            "chunks": self.chunks,
            "index_seconds": round(self.index_seconds, 1),
            "baseline_seconds": round(self.baseline_seconds, 1),
            "configured_method": self.configured,
            "baselines": list(BASELINES),
            "reference_baseline": REFERENCE,
            "passage_hit@5_over_reference": None if ratio is None else round(ratio, 4),
            "groups": self.groups,
            "query_latency_ms": self.latency_ms,
            "not_indexed": self.not_indexed,
        }
        return {**self.methods, "run": run}


def is_page_dataset(folder: Path) -> bool:
    """Whether ``folder`` is meant as a page-level dataset (else it is read as BEIR)."""
    return (folder / QUESTIONS_FILE).exists() or (folder / PDFS_FOLDER).exists()


def load_pages(folder: Path) -> PageDataset:
    questions_file, pdfs = folder / QUESTIONS_FILE, folder / PDFS_FOLDER
    if not questions_file.is_file():
        raise DatasetError(f"{questions_file} is missing ({LAYOUT})")
    if not pdfs.is_dir():
        raise DatasetError(f"{pdfs} is missing or not a folder ({LAYOUT})")
    documents = {
        path.stem: path
        for path in sorted(pdfs.iterdir())
        if path.is_file() and path.suffix.lower() == ".pdf"
    }
    if not documents:
        raise DatasetError(f"{pdfs} holds no PDF ({LAYOUT})")
    page_counts = {name: _page_count(path) for name, path in documents.items()}
    questions: dict[str, Question] = {}
    for number, row in json_lines(questions_file):
        where = f"{questions_file}:{number}"
        text = row.get("question")
        if not isinstance(text, str):
            raise DatasetError(f"{where}: no question (a string)")
        doc_name = _document(row.get("doc_name"), documents, pdfs, where)
        evidence = row.get("evidence")
        if not isinstance(evidence, list) or not evidence:
            raise DatasetError(f"{where}: no evidence (a list of {{evidence_page_num: …}})")
        pages: set[PageUnit] = set()
        for item in evidence:
            if not isinstance(item, dict):
                raise DatasetError(f"{where}: an evidence entry is not an object")
            document = _document(item.get("doc_name", doc_name), documents, pdfs, where)
            index = item.get("evidence_page_num")
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                raise DatasetError(
                    f"{where}: evidence_page_num must be a 0-based page index, not {index!r}"
                )
            if index >= page_counts[document]:
                raise DatasetError(
                    f"{where}: evidence page {index} (0-based) is beyond "
                    f"{documents[document].name}'s {page_counts[document]} pages"
                )
            pages.add((document, index + 1))
        sources = _sources(row.get("evidence_sources"), where)
        questions[str(number)] = Question(text, doc_name, frozenset(pages), sources)
    if not questions:
        raise DatasetError(f"{questions_file}: no questions")
    return PageDataset(folder.resolve().name, pdfs, documents, page_counts, questions)


def _sources(value: object, where: str) -> frozenset[str]:
    """``evidence_sources`` (a list, or a list written as a Python string, as MMLongBench-Doc
    has it) as SOURCES' short names; unknown kinds are kept as they are spelled."""
    if value is None:
        return frozenset()
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError) as error:
            raise DatasetError(f"{where}: evidence_sources is not a list ({error})") from error
    if not isinstance(value, list | tuple) or not all(isinstance(kind, str) for kind in value):
        raise DatasetError(f"{where}: evidence_sources is not a list of strings")
    return frozenset(SOURCES.get(kind, kind) for kind in value)


def document_fold(doc_name: str) -> str:
    """The fold a document belongs to, A or B: fixed by its name alone, so both halves hold
    documents of every kind and a fold never changes when documents are added."""
    return FOLDS[int(hashlib.sha256(doc_name.encode()).hexdigest(), 16) % 2]


def _page_count(path: Path) -> int:
    import pymupdf

    try:
        with pymupdf.open(path) as doc:
            return int(doc.page_count)
    except Exception as error:  # PyMuPDF raises several types for unreadable files
        raise DatasetError(f"{path}: not a readable PDF ({error})") from error


def _document(name: object, documents: Mapping[str, Path], pdfs: Path, where: str) -> str:
    """``name``, a doc_name with a PDF; else a :class:`DatasetError` saying which is missing."""
    if not isinstance(name, str) or not name:
        raise DatasetError(f"{where}: no doc_name")
    if name not in documents:
        raise DatasetError(f"{where}: doc_name {name!r} has no PDF ({pdfs / name}.pdf)")
    return name


# -- the pipeline's hits as pages -------------------------------------------------------------


def hit_pages(payload: Mapping[str, Any]) -> list[int]:
    """The 1-based pages a chunk lies on, in its reading order: those of its boxes, else its
    ``page`` to ``page_end``; none for a chunk without a page."""
    pages = [box["page"] for box in payload.get("bboxes") or () if box.get("page") is not None]
    if not pages:
        first = payload.get("page")
        if first is None:
            return []
        last = payload.get("page_end")
        pages = list(range(first, (last if last is not None else first) + 1))
    return list(dict.fromkeys(pages))


def passages_of(hits: Iterable[Hit | Candidate], names: Mapping[str, str]) -> list[Passage]:
    """Each hit as the dataset's pages it lies on, in order; ``names``: doc_id → doc_name (a
    passage of another document, or without a page, lies on none of them but still takes its
    place among the first k)."""
    passages: list[Passage] = []
    for hit in hits:
        name = names.get(hit.payload.get("doc_id", ""))
        pages = hit_pages(hit.payload) if name is not None else []
        passages.append(tuple((name, page) for page in pages if name is not None))
    return passages


# -- the page baseline --------------------------------------------------------------------------


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


def question_groups(dataset: PageDataset) -> dict[str, dict[str, frozenset[PageUnit]]]:
    """The questions' evidence by group: ``fold A`` and ``fold B`` (by their document's
    fold), and where the answer sits on its page (``text``, ``table``, … when the dataset says)."""
    groups: dict[str, dict[str, frozenset[PageUnit]]] = {f"fold {fold}": {} for fold in FOLDS}
    for query_id, question in dataset.questions.items():
        groups[f"fold {document_fold(question.doc_name)}"][query_id] = question.evidence
    for source in sorted({source for q in dataset.questions.values() for source in q.sources}):
        groups[source] = {
            query_id: question.evidence
            for query_id, question in dataset.questions.items()
            if source in question.sources
        }
    return groups


def format_page_report(report: PageReport) -> str:
    questions = next(iter(report.methods.values()))["queries"]
    metrics = PASSAGE_METRICS + PAGE_METRICS
    headers = ["p-hit@1", "p-hit@5", "p-hit@10", "page@1", "page@5", "page@10", "doc@5", "MRR@10"]
    lines = [
        f"{report.dataset}: {report.documents} PDFs, {report.pages} pages with text, "
        f"{report.chunks} chunks, indexed in {report.index_seconds:.1f} s; {questions} "
        f"questions; page baselines ready in {report.baseline_seconds:.1f} s",
        "p-hit@k: an evidence page among the pages of the first k passages (what the answerer "
        "reads); page@k: among the first k pages, each ranked by its first passage",
        f"{'method':<30}" + "".join(f"{header:>9}" for header in headers),
    ]
    marks = {report.configured: "  ← the chat page's", REFERENCE: "  ← the reference"}
    for method, values in report.methods.items():
        name = f"{method} (baseline)" if method in BASELINES else method
        lines.append(
            f"{name:<30}"
            + "".join(f"{values[metric]:>9.4f}" for metric in metrics)
            + marks.get(method, "")
        )
    ratio = report.ratio
    configured = report.methods[report.configured]["passage-hit@5"]
    reference = report.methods[REFERENCE]["passage-hit@5"]
    times = "n/a (the baseline found nothing)" if ratio is None else f"{ratio:.2f}"
    lines.append(
        f"configured method ({report.configured}) passage-hit@5 = {configured:.4f}, = {times} × "
        f"the reference ({REFERENCE} passage-hit@5 = {reference:.4f})"
    )
    lines.append("passage-hit@5 by group (questions):")
    for group, by_method in report.groups.items():
        count = by_method[REFERENCE]["queries"]
        ours, theirs = (
            by_method[method]["passage-hit@5"] for method in (report.configured, REFERENCE)
        )
        lines.append(f"  {group:<10} ({count:>3}): {ours:.4f} against {theirs:.4f} ({REFERENCE})")
    for doc_id, reason in report.not_indexed.items():
        lines.append(f"not indexed (its pages are never found): {doc_id}: {reason}")
    lines.append(format_latency(report.latency_ms))
    return "\n".join(lines)
