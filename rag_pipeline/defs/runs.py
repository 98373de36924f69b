"""Planning and starting indexing runs: shared by the CLI, the sensor and the schedule."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dagster import (
    AssetSelection,
    DagsterRun,
    DagsterRunStatus,
    RunsFilter,
    define_asset_job,
    in_process_executor,
)

from rag_pipeline.config import Settings, load_settings
from rag_pipeline.defs.assets import VECTOR_STORE_POOL, document_assets
from rag_pipeline.defs.partitions import (
    PLAN_TAG,
    arrange_partition_ranges,
    documents_by_partition,
    range_tags,
)
from rag_pipeline.ids import DEFAULT_WORKSPACE
from rag_pipeline.locking import (
    LockPlace,
    forget_run_locks,
    lock_place,
    process_alive,
    run_lock_state,
)
from rag_pipeline.manifest import ManifestDiff

if TYPE_CHECKING:
    from dagster import DagsterInstance

logger = logging.getLogger(__name__)

# In-process: one process per run, the steps sharing the loaded models.
index_documents_job = define_asset_job(
    "index_documents",
    selection=AssetSelection.assets(*document_assets),
    executor_def=in_process_executor,
    description="Index the selected documents: parse, chunk, embed, write points.",
)

ACTIVE_STATUSES = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
]

TRIGGER_TAG = "rag_pipeline/trigger"
WORKSPACE_TAG = "rag_pipeline/workspace"


@dataclass(frozen=True, slots=True)
class PlannedRun:
    tags: dict[str, str]  # partition range, workspace and plan
    run_key: str  # unique to its plan and part of it
    # With dagster.document_buckets: the documents of its buckets to index or delete, and how
    # many others each bucket holds (unchanged: left alone, counted in the bucket's reports).
    bucket_documents: tuple[str, ...] = ()
    bucket_unchanged: tuple[tuple[str, int], ...] = ()

    def run_config(self, settings: Settings, *, retry_failed: bool = False) -> dict[str, Any]:
        where: dict[str, Any] = {"home": str(settings.root), "workspace": settings.workspace}
        if self.bucket_documents:
            where["bucket_documents"] = list(self.bucket_documents)
            where["bucket_unchanged"] = dict(self.bucket_unchanged)
        config: dict[str, Any] = {"resources": {"indexing": {"config": where}}}
        if retry_failed:
            config["ops"] = {"file_manifest": {"config": {"retry_failed": True}}}
        return config


def plan_index_runs(
    instance: DagsterInstance, settings: Settings, diff: ManifestDiff
) -> list[PlannedRun]:
    """Sync the workspace's partitions with its documents, and range the ones to (re)index, cut
    into runs of at most ``indexing.run_documents`` documents, each with a run key.

    The keys name the plan: the documents and the workspace's latest run. The same plan asked
    for again (a sensor tick evaluated twice) has the same keys, and Dagster launches a key
    once; any run since (a failed one, a file changed back, A → B → A) makes new keys.
    """
    if diff.partial:  # a programming error: find_work(partial=True) is for direct runs only
        raise ValueError("runs are planned from a comparison of every document, not a partial one")
    if diff.quiet:  # nothing to do, and no list to sync with: the partitions stay as they are
        return []
    buckets = settings.dagster.document_buckets
    ranges = arrange_partition_ranges(
        instance,
        settings.workspace,
        diff.to_process,
        diff.documents,
        settings.indexing.run_documents,
        buckets=buckets,
    )
    latest = instance.get_runs(
        RunsFilter(job_name=index_documents_job.name, tags={WORKSPACE_TAG: settings.workspace}),
        limit=1,
    )
    plan = hashlib.sha256(
        json.dumps(
            [settings.workspace, latest[0].run_id if latest else "", diff.to_process]
        ).encode()
    ).hexdigest()[:16]
    if not buckets:
        return [
            PlannedRun(
                tags=range_tags(keys) | {WORKSPACE_TAG: settings.workspace, PLAN_TAG: plan},
                run_key=f"{plan}-{part}-of-{len(ranges)}",
            )
            for part, keys in enumerate(ranges, 1)
        ]
    # A run is told the changes alone: a bucket holds about a hundredth of a large share, and
    # a change of a few documents in each of many buckets would otherwise plan, and name in
    # the run's configuration, every document of the share.
    changes = documents_by_partition(settings.workspace, diff.to_process, buckets)
    held = documents_by_partition(settings.workspace, [*diff.files, *diff.deleted], buckets)
    return [
        PlannedRun(
            tags=range_tags(keys) | {WORKSPACE_TAG: settings.workspace, PLAN_TAG: plan},
            run_key=f"{plan}-{part}-of-{len(ranges)}",
            bucket_documents=tuple(doc for key in keys for doc in changes[key]),
            bucket_unchanged=tuple((key, len(held[key]) - len(changes[key])) for key in keys),
        )
        for part, keys in enumerate(ranges, 1)
    ]


def active_index_run(instance: DagsterInstance, workspace: str) -> DagsterRun | None:
    """A run of the workspace queued or in progress: while one is, nothing is planned (its
    documents may be among the changes, and planning would move its partitions)."""
    active = instance.get_runs(
        RunsFilter(
            job_name=index_documents_job.name,
            statuses=ACTIVE_STATUSES,
            tags={WORKSPACE_TAG: workspace},
        ),
        limit=1,
    )
    return active[0] if active else None


def workspace_of_run(tags: Mapping[str, str]) -> str:
    """The workspace a run indexes (runs from before workspaces: the default one)."""
    return tags.get(WORKSPACE_TAG, DEFAULT_WORKSPACE)


# A run takes its run lock within seconds of starting (its resource does, before any step): a
# started run that has not taken it after this long is gone.
_LOCK_TAKEN_WITHIN_SECONDS = 120.0
# A run records its end within moments of letting go of its lock: one that let go this long ago
# and is still called started died in between.
_END_RECORDED_WITHIN_SECONDS = 120.0


def fail_abandoned_runs(instance: DagsterInstance, settings: Settings) -> list[str]:
    """Mark failed the indexing runs that Dagster still calls started but whose process died
    (killed, out of memory, a machine restart): the run lock they took is free.

    Dagster's own run monitoring cannot tell for runs launched in a local process
    (``DefaultRunLauncher`` has no worker health check) nor for the CLI's in-process runs; a run
    left started would make the sensor skip every tick. What such a run committed stays; the
    rest is found changed and indexed again by the next plan. A run in another container or on
    another machine (``DockerRunLauncher``, ``K8sRunLauncher``), whose process cannot be looked
    up from here, is dead when it let go of its lock long ago. The concurrency slot of an ended
    run, if it died writing the store, is given back at once. Every workspace's runs are looked
    at (each in its own home): the store's concurrency pool is the instance's, so another
    workspace's dead run would hold its slot for all.
    """
    abandoned = []
    started_runs: dict[LockPlace, set[str]] = {}  # by workspace
    for record in instance.get_run_records(
        RunsFilter(job_name=index_documents_job.name, statuses=[DagsterRunStatus.STARTED])
    ):
        workspace = workspace_of_run(record.dagster_run.tags)
        run_id = record.dagster_run.run_id
        try:
            place = lock_place(
                settings
                if workspace == settings.workspace
                else load_settings(settings.root, workspace)
            )
        except ValueError as error:  # a tag no plan of ours wrote
            logger.warning("run %s names no workspace of ours (%s): left alone", run_id, error)
            continue
        started_runs.setdefault(place, set()).add(run_id)
        lock = run_lock_state(place, run_id)
        if lock is not None and lock.holding:
            dead = False
        elif lock is None or lock.pid is None:  # never took its lock (or is taking it now)
            started = record.start_time or record.create_timestamp.timestamp()
            dead = time.time() - started > _LOCK_TAKEN_WITHIN_SECONDS
        elif lock.here:  # it let go: dead, unless its process lives on, recording its end
            dead = not process_alive(lock.pid)
        else:  # on another machine or container, whose processes cannot be seen from here
            dead = time.time() - lock.changed > _END_RECORDED_WITHIN_SECONDS
        if dead:
            instance.report_run_failed(
                record.dagster_run,
                "the run's process ended without finishing (killed?): what it committed stays, "
                "the next run indexes the rest",
            )
            abandoned.append(run_id)
    _free_slots_of_ended_runs(instance)
    for place in {lock_place(settings), *started_runs}:
        forget_run_locks(place, keep=started_runs.get(place, set()) - set(abandoned))
    return abandoned


def _free_slots_of_ended_runs(instance: DagsterInstance) -> None:
    """Give back the store's concurrency slot that an ended run still holds: one that died
    writing the store, failed by us or by Dagster's code server as its process exited. Dagster's
    run monitoring would free it only at its next poll (minutes), and every run meanwhile waits."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return
    claimed = storage.get_concurrency_info(VECTOR_STORE_POOL).claimed_slots
    holders = {slot.run_id for slot in claimed}
    if not holders:
        return
    for record in instance.get_run_records(RunsFilter(run_ids=list(holders))):
        if record.dagster_run.is_finished:
            storage.free_concurrency_slots_for_run(record.dagster_run.run_id)
