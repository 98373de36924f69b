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

Naive page-unit baselines are computed in the same run; each page is one passage. The
configured method is compared with the strongest of them on the same questions (over the set,
and on each fold and group: which is strongest depends on the documents), and with each of its
own sides alone (dense, keywords):

- ``pages dense + name``: the PDF's file stem with ``_`` as spaces, a line
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

The parts: the question set and its folds and groups (``dataset``), the naive page baselines
(``baselines``), the run that ranks and scores every method (``run``), and its report
(``report``).
"""

from evaluation.pages.baselines import (
    BASELINE_TOKENS,
    BASELINES,
    PageBaseline,
    bm25_length,
    first_tokens,
    named,
    page_sparse_encoder,
    rank_baselines,
    read_pages,
)
from evaluation.pages.dataset import (
    FOLDS,
    LAYOUT,
    PDFS_FOLDER,
    QUESTIONS_FILE,
    SOURCES,
    PageDataset,
    Question,
    document_fold,
    is_page_dataset,
    load_pages,
    question_groups,
)
from evaluation.pages.report import PageReport, format_page_report, strongest_baseline
from evaluation.pages.run import document_names, passages_of, run_page_evaluation

__all__ = [
    "BASELINES",
    "BASELINE_TOKENS",
    "FOLDS",
    "LAYOUT",
    "PDFS_FOLDER",
    "QUESTIONS_FILE",
    "SOURCES",
    "PageBaseline",
    "PageDataset",
    "PageReport",
    "Question",
    "bm25_length",
    "document_fold",
    "document_names",
    "first_tokens",
    "format_page_report",
    "is_page_dataset",
    "load_pages",
    "named",
    "page_sparse_encoder",
    "passages_of",
    "question_groups",
    "rank_baselines",
    "read_pages",
    "run_page_evaluation",
    "strongest_baseline",
]
