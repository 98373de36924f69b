"""The asset graph, made from the stage table (``indexing/stage_table.py``): an asset per
stage, one dynamic partition per document (or bucket of documents), each asset a thin call into
``Indexer``.

Partition keys name the workspace too (``ids.partition_key``); the indexer sees document ids.

Every asset materializes all the run's documents in one invocation (single-run backfill policy),
so a run over N changed documents is one process and the embedding batches span documents.
"""

import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    BackfillPolicy,
    BetaWarning,
    Config,
    MaterializeResult,
    asset,
)
from pydantic import Field

from rag_pipeline.defs.compat import add_partition_metadata
from rag_pipeline.defs.partitions import documents_partitions
from rag_pipeline.defs.resources import IndexingResource
from rag_pipeline.ids import is_bucket, partition_document
from rag_pipeline.indexing.checks import CHECKS, CheckOutcome
from rag_pipeline.indexing.run import Metadata
from rag_pipeline.indexing.stage_table import STAGES, Stage, run_stage

# BackfillPolicy is "beta"; it is what runs a batch of documents in one invocation.
warnings.filterwarnings("ignore", category=BetaWarning, message=".*backfill_policy.*")

_FAILURES_SHOWN = 50
QDRANT_POINTS = AssetKey(next(stage.name for stage in STAGES if stage.writes_store))
# One run at a time writes the embedded store (its pool limit is set in the instance's
# configuration, defs/instance.py; none with a Qdrant server); the stages before it are free.
VECTOR_STORE_POOL = "vector_store"


class ManifestConfig(Config):
    force: bool = Field(
        default=False,
        description="Re-index the selected documents even if their version is unchanged.",
    )
    retry_failed: bool = Field(
        default=False,
        description="Retry the selected documents that failed, without waiting for their retry.",
    )


class _StepJournal:
    """What a stage reports, recorded in its Dagster step: each partition's metadata on its
    own materialization (:func:`partition_metadata`), the batch's on the result, and the checks
    as check results and, per failing document, evaluations."""

    def __init__(
        self,
        context: AssetExecutionContext,
        members: Mapping[str, list[str]],
        unchanged: Mapping[str, int],
    ) -> None:
        self._context = context
        self._members = members
        self._unchanged = unchanged  # bucket → its documents the run was not told of
        self.events: list[MaterializeResult | AssetCheckResult | AssetCheckEvaluation] = []

    def stage_done(self, stage: str, report: Mapping[str, Mapping[str, Any]]) -> None:
        per_partition = {
            key: values
            for key, doc_ids in self._members.items()
            if (values := partition_metadata(report, key, doc_ids, self._unchanged.get(key, 0)))
        }
        add_partition_metadata(self._context, per_partition)
        documents = [doc_id for doc_ids in self._members.values() for doc_id in doc_ids]
        self.events.append(MaterializeResult(metadata=batch_summary(report, documents)))

    def checks_done(self, outcomes: Mapping[str, CheckOutcome]) -> None:
        for name, outcome in outcomes.items():
            self.events.extend(failed_document_evaluations(name, outcome, self._members))
            self.events.append(
                AssetCheckResult(
                    check_name=name,
                    passed=outcome.passed,
                    severity=AssetCheckSeverity.ERROR,
                    metadata=check_summary(outcome),
                )
            )


def partition_metadata(
    report: Mapping[str, Mapping[str, Any]], key: str, doc_ids: list[str], unchanged: int = 0
) -> Metadata:
    """What a stage reports of a partition: of its document, without the values left empty;
    of a bucket, how many of its documents there were (``unchanged`` of them not handed to
    the run), what the plan did with them, and which failed (each document's own metadata is
    the catalog's, shown by ``status``)."""
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
    if actions and unchanged:
        actions["unchanged"] += unchanged
    summary: Metadata = {"documents": len(doc_ids) + unchanged, "failed": len(failed)}
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


def stage_asset(stage: Stage) -> AssetsDefinition:
    """The asset of one stage: the stage over the run's documents, reported per partition. The
    plan's asset takes the run's options (:class:`ManifestConfig`); the store's claims the
    store's pool and carries the checks."""
    options: dict[str, Any] = {
        "name": stage.name,
        "deps": list(stage.parents),
        "description": stage.description,
        "partitions_def": documents_partitions,
        "backfill_policy": BackfillPolicy.single_run(),
        "group_name": "indexing",
    }
    if stage.writes_store:
        options["pool"] = VECTOR_STORE_POOL
        options["check_specs"] = [
            AssetCheckSpec(name, asset=stage.name, description=description)
            for name, description in CHECKS.items()
        ]

    def materialize(
        context: AssetExecutionContext, indexing: IndexingResource, **run_options: bool
    ) -> Iterator[MaterializeResult | AssetCheckResult | AssetCheckEvaluation]:
        journal = _StepJournal(
            context, indexing.members(context.partition_keys), indexing.bucket_unchanged
        )
        try:
            run_stage(
                stage,
                indexing.indexer,
                indexing.documents(context.partition_keys),
                journal,
                **run_options,
            )
        finally:
            if stage.writes_store:
                indexing.indexer.close_store()  # the next run's write may start as this ends
        yield from journal.events

    if stage.parents:

        @asset(**options)
        def stage_step(
            context: AssetExecutionContext, indexing: IndexingResource
        ) -> Iterator[MaterializeResult | AssetCheckResult | AssetCheckEvaluation]:
            yield from materialize(context, indexing)

    else:

        @asset(**options)
        def stage_step(
            context: AssetExecutionContext, config: ManifestConfig, indexing: IndexingResource
        ) -> Iterator[MaterializeResult | AssetCheckResult | AssetCheckEvaluation]:
            yield from materialize(
                context, indexing, force=config.force, retry_failed=config.retry_failed
            )

    return stage_step


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


document_assets = [stage_asset(stage) for stage in STAGES]
