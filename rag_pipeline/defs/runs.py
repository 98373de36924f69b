"""Planning and starting indexing runs: shared by the CLI, the sensor and the schedule."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dagster import (
    AssetSelection,
    DagsterRunStatus,
    RunsFilter,
    define_asset_job,
    in_process_executor,
)

from rag_pipeline.config import Settings
from rag_pipeline.defs.assets import document_assets
from rag_pipeline.defs.partitions import arrange_partitions
from rag_pipeline.ids import DEFAULT_WORKSPACE
from rag_pipeline.locking import index_is_running, last_holder, process_alive
from rag_pipeline.manifest import ManifestDiff

if TYPE_CHECKING:
    from dagster import DagsterInstance

# In-process: one process per run, the steps sharing the loaded models.
index_documents_job = define_asset_job(
    "index_documents",
    selection=AssetSelection.assets(*document_assets),
    executor_def=in_process_executor,
    description="Index the selected documents: parse, chunk, embed, write points.",
)

TRIGGER_TAG = "rag_pipeline/trigger"
WORKSPACE_TAG = "rag_pipeline/workspace"


@dataclass(frozen=True, slots=True)
class PlannedRun:
    diff: ManifestDiff
    tags: dict[str, str]  # partition range and workspace; empty when there is nothing to do

    def run_config(self, settings: Settings, *, retry_failed: bool = False) -> dict[str, Any]:
        where = {"home": str(settings.root), "workspace": settings.workspace}
        config: dict[str, Any] = {"resources": {"indexing": {"config": where}}}
        if retry_failed:
            config["ops"] = {"file_manifest": {"config": {"retry_failed": True}}}
        return config


def plan_index_run(instance: DagsterInstance, settings: Settings, diff: ManifestDiff) -> PlannedRun:
    """Sync the workspace's partitions with its documents, and range the ones to (re)index."""
    tags = arrange_partitions(instance, settings.workspace, diff.to_process, diff.documents)
    if tags:
        tags[WORKSPACE_TAG] = settings.workspace
    return PlannedRun(diff=diff, tags=tags)


def workspace_of_run(tags: Mapping[str, str]) -> str:
    """The workspace a run indexes (runs from before workspaces: the default one)."""
    return tags.get(WORKSPACE_TAG, DEFAULT_WORKSPACE)


# A run takes the indexing lock within seconds of starting (its resource does, before any
# step): a started run that has not taken it after this long, with the lock free, is gone.
_LOCK_TAKEN_WITHIN_SECONDS = 120.0


def fail_abandoned_runs(instance: DagsterInstance, settings: Settings) -> list[str]:
    """Mark failed the indexing runs that Dagster still calls started but whose process died
    (killed, out of memory, a machine restart): the indexing lock they took is free.

    Dagster's own run monitoring cannot tell for runs launched in a local process
    (``DefaultRunLauncher`` has no worker health check) nor for the CLI's in-process runs; a run
    left started would make the sensor skip every tick. What such a run committed stays; the
    rest is found changed and indexed again by the next run.
    """
    home = settings.home
    if index_is_running(home):
        return []
    holder, pid = last_holder(home)
    abandoned = []
    for record in instance.get_run_records(
        RunsFilter(job_name=index_documents_job.name, statuses=[DagsterRunStatus.STARTED])
    ):
        if workspace_of_run(record.dagster_run.tags) != settings.workspace:
            continue  # another workspace's lock tells about it
        started = record.start_time or record.create_timestamp.timestamp()
        if holder == record.dagster_run.run_id:
            # Its process, alive, has let go of the lock and is recording its success.
            dead = pid is None or not process_alive(pid)
        else:
            dead = time.time() - started > _LOCK_TAKEN_WITHIN_SECONDS
        if dead:
            instance.report_run_failed(
                record.dagster_run,
                "the run's process ended without finishing (killed?): what it committed stays, "
                "the next run indexes the rest",
            )
            abandoned.append(record.dagster_run.run_id)
    return abandoned
