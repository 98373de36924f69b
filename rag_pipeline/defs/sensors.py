"""Watching the folders: a sensor that batches every change into one run, and an hourly fallback."""

from __future__ import annotations

from dagster import (
    DagsterInstance,
    DagsterRunStatus,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SkipReason,
    schedule,
    sensor,
)

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import load_settings
from rag_pipeline.defs.runs import (
    TRIGGER_TAG,
    fail_abandoned_runs,
    index_documents_job,
    plan_index_run,
)
from rag_pipeline.indexing.incremental import find_work
from rag_pipeline.locking import LockTimeout, index_lock

_ACTIVE = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
]


def _index_run_request(instance: DagsterInstance, trigger: str) -> RunRequest | SkipReason:
    settings = load_settings()
    fail_abandoned_runs(instance, settings.home)
    active = instance.get_runs(
        RunsFilter(job_name=index_documents_job.name, statuses=_ACTIVE), limit=1
    )
    if active:
        return SkipReason("an indexing run is queued or in progress")
    try:
        with index_lock(settings.home, timeout_seconds=0), Catalog(settings) as catalog:
            diff = find_work(settings, catalog)
    except LockTimeout:
        return SkipReason("an indexing run is in progress")
    # Also removes the partitions of documents a previous run deleted.
    planned = plan_index_run(instance, diff)
    if not planned.tags:
        return SkipReason("no document changed")
    # No run key: Dagster never launches a key twice, and the same change may need another run
    # (a failed run, a file changed back: A, B, A). The active-run check above is the guard.
    return RunRequest(
        run_config=planned.run_config(settings), tags={**planned.tags, TRIGGER_TAG: trigger}
    )


@sensor(
    job=index_documents_job,
    # Read when the code location loads (RAG_PIPELINE_INDEXING__SENSOR_SECONDS).
    minimum_interval_seconds=load_settings().indexing.sensor_seconds,
    default_status=DefaultSensorStatus.RUNNING,
    description="Scans the watched folders and requests one run for all new, changed and "
    "deleted documents.",
)
def watched_folders_sensor(context: SensorEvaluationContext) -> RunRequest | SkipReason:
    return _index_run_request(context.instance, "sensor")


@schedule(
    job=index_documents_job,
    cron_schedule="0 * * * *",
    default_status=DefaultScheduleStatus.STOPPED,
    description="Hourly fallback for when the sensor is off: the same scan and batched run.",
)
def hourly_index_schedule(context: ScheduleEvaluationContext) -> RunRequest | SkipReason:
    return _index_run_request(context.instance, "schedule")
