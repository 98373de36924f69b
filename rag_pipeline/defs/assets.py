"""The asset graph, one dynamic partition per document (or bucket of documents), each asset a
thin call into ``Indexer``.

Partition keys name the workspace too (``ids.partition_key``); the indexer sees document ids.

Every asset materializes all the run's documents in one invocation (single-run backfill policy),
so a run over N changed documents is one process and the embedding batches span documents.
"""

import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    BackfillPolicy,
    BetaWarning,
    Config,
    MaterializeResult,
    asset,
)
from dagster._core.execution.context.metadata_logging import (
    AssetMetadataHandle,
    OutputMetadataAccumulator,
)
from pydantic import Field

from rag_pipeline.defs.partitions import documents_partitions
from rag_pipeline.defs.resources import IndexingResource
from rag_pipeline.ids import is_bucket, partition_document
from rag_pipeline.indexing.checks import CheckOutcome, run_checks
from rag_pipeline.indexing.commit import write_points
from rag_pipeline.indexing.run import Metadata

# BackfillPolicy is "beta"; it is what runs a batch of documents in one invocation.
warnings.filterwarnings("ignore", category=BetaWarning, message=".*backfill_policy.*")

_FAILURES_SHOWN = 50
_PER_DOCUMENT = {
    "partitions_def": documents_partitions,
    "backfill_policy": BackfillPolicy.single_run(),
    "group_name": "indexing",
}


class ManifestConfig(Config):
    force: bool = Field(
        default=False,
        description="Re-index the selected documents even if their version is unchanged.",
    )
    retry_failed: bool = Field(
        default=False,
        description="Retry the selected documents that failed, without waiting for their retry.",
    )


def run_stage(
    context: AssetExecutionContext,
    indexing: IndexingResource,
    stage: Callable[[list[str]], Mapping[str, Mapping[str, Any]]],
) -> MaterializeResult:
    """``stage`` over the run's documents, its report recorded per partition."""
    members = indexing.members(context.partition_keys)
    return record_per_partition(context, members, stage(indexing.documents(context.partition_keys)))


def record_per_partition(
    context: AssetExecutionContext,
    members: Mapping[str, list[str]],
    report: Mapping[str, Mapping[str, Any]],
) -> MaterializeResult:
    """Attach each partition's metadata (:func:`partition_metadata`) to its own materialization.

    ``context.add_asset_metadata(..., partition_key=k)`` re-reads every dynamic partition to
    validate ``k`` on each call, which is quadratic over a large batch; the keys here are the
    run's own, so the accumulator is extended once. (Dagster internals, pinned by
    ``dagster==1.13.*`` and by a test reading the metadata back.)
    """
    step = context.op_execution_context._step_execution_context
    accumulated = dict(step._metadata_accumulator.per_output_metadata)
    for key, doc_ids in members.items():
        values = partition_metadata(report, key, doc_ids)
        if values:
            accumulated[
                AssetMetadataHandle(asset_key=context.assets_def.key, partition_key=key)
            ] = values
    step._metadata_accumulator = OutputMetadataAccumulator(per_output_metadata=accumulated)
    documents = [doc_id for doc_ids in members.values() for doc_id in doc_ids]
    return MaterializeResult(metadata=batch_summary(report, documents))


def partition_metadata(
    report: Mapping[str, Mapping[str, Any]], key: str, doc_ids: list[str]
) -> Metadata:
    """What a stage reports of a partition: of its document, without the values left empty;
    of a bucket, how many of its documents there were, what the plan did with them, and which
    failed (each document's own metadata is the catalog's, shown by ``status``)."""
    if not is_bucket(partition_document(key)[1]):
        return {
            name: value for name, value in report.get(doc_ids[0], {}).items() if value is not None
        }
    entries = [report.get(doc_id, {}) for doc_id in doc_ids]
    failed = {
        doc_id: entry["error"]
        for doc_id, entry in zip(doc_ids, entries, strict=True)
        if "error" in entry
    }
    actions = Counter(entry["action"] for entry in entries if "action" in entry)
    summary: Metadata = {"documents": len(doc_ids), "failed": len(failed)}
    summary |= {f"documents_{action}": count for action, count in sorted(actions.items())}
    if failed:
        summary["failures"] = dict(list(failed.items())[:_FAILURES_SHOWN])
    return summary


def batch_summary(report: Mapping[str, Mapping[str, Any]], doc_ids: Iterable[str]) -> Metadata:
    """What a stage reports of the whole batch (``doc_ids``), shown with each document."""
    doc_ids = list(doc_ids)
    failed = sum(1 for doc_id in doc_ids if "error" in report.get(doc_id, {}))
    summary = {"batch_documents": len(doc_ids), "batch_failed": failed}
    return summary | {f"batch_{name}": value for name, value in report.get("*", {}).items()}


@asset(
    **_PER_DOCUMENT,
    description="The document's file: path, size, content hash, version, and what this run does "
    "with it (index, unchanged, delete).",
)
def file_manifest(
    context: AssetExecutionContext, config: ManifestConfig, indexing: IndexingResource
) -> MaterializeResult:
    return run_stage(
        context,
        indexing,
        partial(indexing.indexer.plan, force=config.force, retry_failed=config.retry_failed),
    )


@asset(
    **_PER_DOCUMENT,
    deps=[file_manifest],
    description="Text elements with page, box and section path (PyMuPDF, unstructured, "
    "direct parsers).",
)
def parsed_pages(context: AssetExecutionContext, indexing: IndexingResource) -> MaterializeResult:
    return run_stage(context, indexing, indexing.indexer.parse)


@asset(
    **_PER_DOCUMENT,
    deps=[parsed_pages],
    description="Chunks sized in the dense model's tokens, with pages, boxes and section.",
)
def chunks(context: AssetExecutionContext, indexing: IndexingResource) -> MaterializeResult:
    return run_stage(context, indexing, indexing.indexer.chunk)


@asset(
    **_PER_DOCUMENT,
    deps=[chunks],
    description="Dense vectors of the chunks; only texts not in the embedding cache are embedded.",
)
def dense_embeddings(
    context: AssetExecutionContext, indexing: IndexingResource
) -> MaterializeResult:
    return run_stage(context, indexing, indexing.indexer.embed_dense)


@asset(
    **_PER_DOCUMENT,
    deps=[chunks],
    description="Sparse keyword vectors of the chunks (BM25 with jieba for Chinese, or SPLADE).",
)
def sparse_embeddings(
    context: AssetExecutionContext, indexing: IndexingResource
) -> MaterializeResult:
    return run_stage(context, indexing, indexing.indexer.embed_sparse)


@asset(
    **_PER_DOCUMENT,
    deps=[chunks],
    description="CLIP vectors of the document's pictures (OpenCLIP, images.clip_model); only "
    "pictures not in the embedding cache are embedded. Nothing when no CLIP model is set.",
)
def image_embeddings(
    context: AssetExecutionContext, indexing: IndexingResource
) -> MaterializeResult:
    return run_stage(context, indexing, indexing.indexer.embed_pictures)


QDRANT_POINTS = AssetKey("qdrant_points")
VECTOR_STORE_POOL = "vector_store"
CHECKS = {
    "every_chunk_has_point": "Each indexed document has exactly one point per chunk.",
    "no_orphan_points": "Every point belongs to a document's indexed version.",
    "vector_size_matches_model": "The collection's text and image vectors have the models' sizes.",
    "no_document_silently_empty": "No document indexed without chunks or failed without a reason.",
}


@asset(
    **_PER_DOCUMENT,
    deps=[dense_embeddings, sparse_embeddings, image_embeddings],
    description="The document's points in the vector store and its catalog rows: the new "
    "version upserted, then made live in one catalog transaction, then the older ones deleted.",
    check_specs=[
        AssetCheckSpec(name, asset=QDRANT_POINTS, description=description)
        for name, description in CHECKS.items()
    ],
    # One run at a time writes the embedded store (its pool limit is set in the instance's
    # configuration, defs/instance.py; none with a Qdrant server); the stages before it are free.
    pool=VECTOR_STORE_POOL,
)
def qdrant_points(
    context: AssetExecutionContext, indexing: IndexingResource
) -> Iterator[MaterializeResult | AssetCheckResult | AssetCheckEvaluation]:
    indexer = indexing.indexer
    members = indexing.members(context.partition_keys)
    doc_ids = indexing.documents(context.partition_keys)
    try:
        yield record_per_partition(context, members, write_points(indexer, doc_ids))
        for name, outcome in run_checks(indexer, doc_ids).items():
            yield from _check_events(name, outcome, members)
    finally:
        indexer.close_store()  # the next run's write may start as this step ends


def _check_events(
    name: str, outcome: CheckOutcome, members: Mapping[str, list[str]]
) -> Iterator[AssetCheckResult | AssetCheckEvaluation]:
    yield from failed_document_evaluations(name, outcome, members)
    yield AssetCheckResult(
        check_name=name,
        passed=outcome.passed,
        severity=AssetCheckSeverity.ERROR,
        metadata=check_summary(outcome),
    )


def failed_document_evaluations(
    name: str, outcome: CheckOutcome, members: Mapping[str, list[str]]
) -> Iterator[AssetCheckEvaluation]:
    """An evaluation per failing document of ``members`` (partition key → its documents: one,
    or a bucket's): each is an event of its own, so the passing documents are summed up in the
    batch's result instead."""
    if not outcome.failures:
        return
    keys = {doc_id: key for key, doc_ids in members.items() for doc_id in doc_ids}
    for doc_id, problem in outcome.failures.items():
        if doc_id in keys:
            yield AssetCheckEvaluation(
                asset_key=QDRANT_POINTS,
                check_name=name,
                passed=False,
                partition=keys[doc_id],
                severity=AssetCheckSeverity.ERROR,
                metadata={"document": doc_id, "problem": problem},
            )


def check_summary(outcome: CheckOutcome) -> dict[str, Any]:
    """A check's metadata for the whole batch: its counts and the first failures."""
    return {**outcome.summary, "failures": dict(list(outcome.failures.items())[:_FAILURES_SHOWN])}


document_assets = [
    file_manifest,
    parsed_pages,
    chunks,
    dense_embeddings,
    sparse_embeddings,
    image_embeddings,
    qdrant_points,
]
