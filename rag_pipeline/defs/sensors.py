"""Watching the folders: a sensor that batches each workspace's changes into runs (one per
``indexing.run_documents`` documents, queued side by side), and an hourly fallback."""

from __future__ import annotations

from dagster import (
    DagsterInstance,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SkipReason,
    schedule,
    sensor,
)

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import Settings, load_settings
from rag_pipeline.defs.errors import RunsInProgress
from rag_pipeline.defs.partitions import remove_other_workspaces_partitions
from rag_pipeline.defs.planning import clear_the_way
from rag_pipeline.defs.runs import (
    TRIGGER_TAG,
    fail_abandoned_runs,
    index_documents_job,
    plan_index_runs,
)
from rag_pipeline.indexing.planning import find_work
from rag_pipeline.locking import LockTimeout, index_lock, lock_place
from rag_pipeline.workspaces import list_workspaces


def _index_run_requests(instance: DagsterInstance, trigger: str) -> list[RunRequest] | SkipReason:
    """Runs for each workspace with changes and no run of its own queued or in progress (a
    run per ``indexing.run_documents`` documents)."""
    settings = load_settings()
    workspaces = list_workspaces(settings)
    remove_other_workspaces_partitions(instance, {workspace.id for workspace in workspaces})
    # Before any workspace's lock, which a living run holds while it waits for the store's slot
    # that a dead run may still hold: planning would skip until run monitoring freed it.
    fail_abandoned_runs(instance, settings)
    requests, skipped = [], []
    for workspace in workspaces:
        planned = _index_run_requests_of(instance, workspace.settings, trigger)
        if isinstance(planned, SkipReason):
            skipped.append(f"{workspace.name}: {planned.skip_message}")
        else:
            requests.extend(planned)
    return requests or SkipReason("; ".join(skipped))


def _index_run_requests_of(
    instance: DagsterInstance, settings: Settings, trigger: str
) -> list[RunRequest] | SkipReason:
    try:
        with index_lock(lock_place(settings), timeout_seconds=0), Catalog(settings) as catalog:
            # The guard against planning a document twice, and against moving the partitions
            # of queued runs; checked holding the lock, which other planners (the CLI) take.
            clear_the_way(instance, settings)
            diff = find_work(settings, catalog)
            # Also removes the partitions of documents a previous run deleted.
            planned = plan_index_runs(instance, settings, diff)
    except RunsInProgress:
        return SkipReason("an indexing run is queued or in progress")
    except LockTimeout:
        return SkipReason("an indexing run is in progress")
    if not planned:
        return SkipReason("no document changed")
    # Run keys name the plan (see plan_index_runs): the same change needing another run later
    # (a failed run, a file changed back: A, B, A) is another plan, with other keys.
    return [
        RunRequest(
            run_key=run.run_key,
            run_config=run.run_config(settings),
            tags={**run.tags, TRIGGER_TAG: trigger},
        )
        for run in planned
    ]


@sensor(
    job=index_documents_job,
    # Read when the code location loads (RAG_PIPELINE_INDEXING__SENSOR_SECONDS).
    minimum_interval_seconds=load_settings().indexing.sensor_seconds,
    default_status=DefaultSensorStatus.RUNNING,
    description="Scans every workspace's watched folders and requests runs for each "
    "workspace's new, changed and deleted documents (indexing.run_documents per run).",
)
def watched_folders_sensor(context: SensorEvaluationContext) -> list[RunRequest] | SkipReason:
    return _index_run_requests(context.instance, "sensor")


@schedule(
    job=index_documents_job,
    cron_schedule="0 * * * *",
    default_status=DefaultScheduleStatus.STOPPED,
    description="Hourly fallback for when the sensor is off: the same scan and batched run.",
)
def hourly_index_schedule(context: ScheduleEvaluationContext) -> list[RunRequest] | SkipReason:
    return _index_run_requests(context.instance, "schedule")
