"""Reporting to Dagster what runs without Dagster did (``indexing/direct.py``).

Each document's metadata becomes a materialization of its partition, as a run's would; each
check an evaluation. Partitions are added for indexed documents and removed for deleted ones,
as a run's planner and its end do. Nothing is reported while a run of the workspace is queued
or in progress: their partition ranges must not move.
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING

from dagster import AssetCheckEvaluation, AssetCheckSeverity, AssetKey, AssetMaterialization

from rag_pipeline.config import Settings
from rag_pipeline.defs.assets import (
    QDRANT_POINTS,
    batch_summary,
    check_summary,
    failed_document_evaluations,
    partition_metadata,
)
from rag_pipeline.defs.instance import get_instance
from rag_pipeline.defs.partitions import DOCUMENTS, documents_by_partition, remove_partitions
from rag_pipeline.defs.runs import active_index_run
from rag_pipeline.indexing.direct import DirectRun, unreported_runs, unreported_runs_folder
from rag_pipeline.locking import LockTimeout, index_lock, lock_place
from rag_pipeline.workspaces import list_workspaces

if TYPE_CHECKING:
    from dagster import DagsterInstance

# The id of the run without Dagster that made a materialization, and what asked for it.
RUN_METADATA = "direct_run"
TRIGGER_METADATA = "trigger"


def report_direct_runs(instance: DagsterInstance, settings: Settings) -> int:
    """Report the workspace's unreported runs, oldest first; how many were reported.

    Call it holding the workspace's indexing lock (a run's planner does), so that no other
    process reports the same runs.
    """
    if active_index_run(instance, settings.workspace):
        return 0
    reported = 0
    for path, run in unreported_runs(settings):
        _report(instance, settings, run)
        path.unlink()
        reported += 1
    return reported


def report_every_workspace(settings: Settings) -> None:
    """Report every workspace's unreported runs (before the Dagster UI starts); a workspace that
    is being indexed just now is left to its next run or the sensor."""
    pending = [
        workspace.settings
        for workspace in list_workspaces(settings)
        if next(unreported_runs_folder(workspace.settings).glob("*.json"), None)
    ]
    if not pending:
        return
    with get_instance(settings) as instance:
        for workspace_settings in pending:
            with (
                suppress(LockTimeout),
                index_lock(lock_place(workspace_settings), timeout_seconds=0),
            ):
                report_direct_runs(instance, workspace_settings)


def _report(instance: DagsterInstance, settings: Settings, run: DirectRun) -> None:
    deleted = set(run.deleted)
    members = documents_by_partition(
        run.workspace,
        [doc_id for doc_id in run.documents if doc_id not in deleted],
        settings.dagster.document_buckets,
    )
    run_metadata = {RUN_METADATA: run.run_id, TRIGGER_METADATA: run.trigger}
    existing = set(instance.get_dynamic_partitions(DOCUMENTS))
    instance.add_dynamic_partitions(DOCUMENTS, [key for key in members if key not in existing])
    for stage, report in run.stages.items():
        batch = batch_summary(report, run.documents) | run_metadata
        for key, doc_ids in members.items():
            instance.report_runless_asset_event(
                AssetMaterialization(
                    asset_key=AssetKey(stage),
                    partition=key,
                    metadata=partition_metadata(report, key, doc_ids) | batch,
                )
            )
    for name, outcome in run.checks.items():
        for evaluation in failed_document_evaluations(name, outcome, members):
            instance.report_runless_asset_event(evaluation)
        instance.report_runless_asset_event(
            AssetCheckEvaluation(
                asset_key=QDRANT_POINTS,
                check_name=name,
                passed=outcome.passed,
                severity=AssetCheckSeverity.ERROR,
                metadata=check_summary(outcome) | run_metadata,
            )
        )
    remove_partitions(instance, settings, run.deleted)
