"""Watching the folders: a sensor that batches every change into one run, and an hourly fallback."""

from __future__ import annotations

import hashlib

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

from rag_pipeline.config import load_settings
from rag_pipeline.defs.runs import TRIGGER_TAG, index_documents_job, plan_index_run
from rag_pipeline.locking import index_is_running
from rag_pipeline.manifest import find_changes

_ACTIVE = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
]


def _index_run_request(instance: DagsterInstance, trigger: str) -> RunRequest | SkipReason:
    settings = load_settings()
    if index_is_running(settings.home):
        return SkipReason("an indexing run is in progress")
    active = instance.get_runs(
        RunsFilter(job_name=index_documents_job.name, statuses=_ACTIVE), limit=1
    )
    if active:
        return SkipReason("an indexing run is queued or in progress")
    # Also removes the partitions of documents a previous run deleted.
    planned = plan_index_run(instance, find_changes(settings))
    if not planned.tags:
        return SkipReason("no document changed")
    diff = planned.diff
    fingerprint = hashlib.sha256(
        "\n".join(
            f"{doc_id}:{diff.files[doc_id].version if doc_id in diff.files else '-'}"
            for doc_id in diff.to_process
        ).encode()
    ).hexdigest()[:16]
    return RunRequest(
        run_key=fingerprint,
        run_config=planned.run_config(settings),
        tags={**planned.tags, TRIGGER_TAG: trigger},
    )


@sensor(
    job=index_documents_job,
    minimum_interval_seconds=30,
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
