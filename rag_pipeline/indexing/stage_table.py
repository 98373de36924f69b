"""The stages of indexing a batch of documents, declared once: each stage's name, the stages it
reads from, the call that runs it, and what it makes.

Dagster's asset graph is made from this table (``defs/assets.py``), and a run without Dagster
runs the same table in its order (``direct.py``); nothing else lists the stages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from rag_pipeline.indexing.checks import CheckOutcome, run_checks
from rag_pipeline.indexing.commit import write_points
from rag_pipeline.indexing.run import Indexer, Metadata

# The Indexer's work on a batch: doc id (or "*": the batch) → metadata. The plan's takes
# keyword options (force, retry_failed).
StageCall = Callable[..., dict[str, Metadata]]


@dataclass(frozen=True, slots=True)
class Stage:
    name: str
    parents: tuple[str, ...]
    run: StageCall
    description: str
    # The stage that writes the vector store: one run at a time with the embedded engine, and
    # the checks of what it wrote follow it.
    writes_store: bool = False


def _indexer(method: str) -> StageCall:
    """The Indexer's method of that name, looked up at each call (a subclass's, a patched one)."""

    def call(indexer: Indexer, doc_ids: list[str], **options: bool) -> dict[str, Metadata]:
        return getattr(indexer, method)(doc_ids, **options)

    return call


STAGES: tuple[Stage, ...] = (
    Stage(
        "file_manifest",
        (),
        _indexer("plan"),
        "The document's file: path, size, content hash, version, and what this run does with it "
        "(index, unchanged, delete).",
    ),
    Stage(
        "parsed_pages",
        ("file_manifest",),
        _indexer("parse"),
        "Text elements with page, box and section path (PyMuPDF, unstructured, direct parsers).",
    ),
    Stage(
        "chunks",
        ("parsed_pages",),
        _indexer("chunk"),
        "Chunks sized in the dense model's tokens, with pages, boxes and section.",
    ),
    Stage(
        "dense_embeddings",
        ("chunks",),
        _indexer("embed_dense"),
        "Dense vectors of the chunks; only texts not in the embedding cache are embedded.",
    ),
    Stage(
        "sparse_embeddings",
        ("chunks",),
        _indexer("embed_sparse"),
        "Sparse keyword vectors of the chunks (BM25 with jieba for Chinese, or SPLADE).",
    ),
    Stage(
        "image_embeddings",
        ("chunks",),
        _indexer("embed_pictures"),
        "CLIP vectors of the document's pictures (OpenCLIP, images.clip_model); only pictures "
        "not in the embedding cache are embedded. Nothing when no CLIP model is set.",
    ),
    Stage(
        "qdrant_points",
        ("dense_embeddings", "sparse_embeddings", "image_embeddings"),
        write_points,
        "The document's points in the vector store and its catalog rows: the new version "
        "upserted, then made live in one catalog transaction, then the older ones deleted.",
        writes_store=True,
    ),
)
PLAN_STAGE = STAGES[0]


class Journal(Protocol):
    """Where a run's stages report what they did: Dagster's step context in a Dagster run
    (``defs/assets.py``), the record a run without Dagster keeps for the next Dagster run to
    report (``direct.py``)."""

    def stage_done(self, stage: str, report: Mapping[str, Mapping[str, Any]]) -> None: ...

    def checks_done(self, outcomes: Mapping[str, CheckOutcome]) -> None: ...


def run_stage(
    stage: Stage, indexer: Indexer, doc_ids: list[str], journal: Journal, **options: bool
) -> dict[str, Metadata]:
    """One stage over a batch of documents, reported to ``journal``; after the store's stage,
    its checks too."""
    report = stage.run(indexer, doc_ids, **options)
    journal.stage_done(stage.name, report)
    if stage.writes_store:
        journal.checks_done(run_checks(indexer, doc_ids))
    return report
