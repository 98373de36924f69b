"""One incremental pass over the watched folders: what the CLI's ``index`` and ``eval`` run.

It first mends what an interrupted run or a damaged store left (``commit.repair_pending``,
``checks.verify_collections``), then finds what changed without Dagster, and only when something
did runs it: a small change without Dagster (``direct.py``; Dagster takes seconds to import
and open, and an unchanged re-run needs none of it either), a larger one as one Dagster run in
this process, or, with ``parallel``, as runs in Dagster's queue (``defs/queue.py``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import Settings
from rag_pipeline.indexing.checks import verify_collections
from rag_pipeline.indexing.commit import finish_collections, repair_pending
from rag_pipeline.indexing.direct import index_directly, indexes_directly
from rag_pipeline.indexing.run import target_collection
from rag_pipeline.locking import index_lock, lock_place
from rag_pipeline.manifest import ManifestDiff, find_changes

if TYPE_CHECKING:
    from dagster import DagsterInstance

logger = logging.getLogger(__name__)


class NoDaemon(Exception):
    """Queued runs are waiting and no ``dagster-daemon`` runs to start them."""


class RunsInProgress(Exception):
    """Runs of the workspace are queued or in progress: another plan's documents."""


@dataclass(frozen=True, slots=True)
class IndexOutcome:
    diff: ManifestDiff
    succeeded: bool  # False when the Dagster run failed (what it committed stays committed)
    failed: dict[str, str]  # documents of this run that could not be indexed → why
    seconds: float


def index_once(
    settings: Settings,
    *,
    retry_failed: bool = False,
    verbose: bool = False,
    trigger: str = "cli",
    parallel: int | None = None,
) -> IndexOutcome:
    """Index what changed, holding the workspace's indexing lock throughout; or, with ``parallel``,
    while planning: the runs go to Dagster's queue, ``parallel`` at a time."""
    started = time.perf_counter()
    queued: list[str] = []
    with index_lock(lock_place(settings)), Catalog(settings) as catalog:
        diff = find_work(settings, catalog, retry_failed=retry_failed)
        succeeded = True
        if diff.to_process and parallel:
            queued = _queue(settings, diff, retry_failed=retry_failed, trigger=trigger)
        elif diff.to_process and indexes_directly(settings, len(diff.to_process)):
            succeeded = _run_directly(settings, diff, retry_failed=retry_failed, trigger=trigger)
        elif diff.to_process:
            succeeded = _run(
                settings, diff, retry_failed=retry_failed, verbose=verbose, trigger=trigger
            )
        else:
            finish_collections(settings, catalog)  # a build whose last run died before its end
    if queued:
        succeeded = _wait(settings, queued, diff)
    failed: dict[str, str] = {}
    if diff.new or diff.changed:  # a pass that indexed nothing reads the documents once
        with Catalog(settings) as catalog:
            records = catalog.documents(target_collection(settings, catalog).name)
        failed = {
            doc_id: records[doc_id].error or "unknown reason"
            for doc_id in [*diff.new, *diff.changed]
            if doc_id in records and records[doc_id].state == "failed"
        }
    return IndexOutcome(diff, succeeded, failed, time.perf_counter() - started)


def find_work(settings: Settings, catalog: Catalog, *, retry_failed: bool = False) -> ManifestDiff:
    """Mend what interrupted runs and damaged stores left, then find what changed.

    Call it holding the workspace's indexing lock: repairs must not meet a run's writes.
    """
    target = target_collection(settings, catalog)
    repair_pending(settings, catalog)
    verify_collections(settings, catalog)
    diff = find_changes(settings, catalog, target.name, retry_failed=retry_failed)
    for folder in diff.missing_sources:
        logger.warning("watched folder %s is missing; its documents are kept", folder)
    return diff


def _run_directly(
    settings: Settings, diff: ManifestDiff, *, retry_failed: bool, trigger: str
) -> bool:
    """The diff's documents indexed in this process without Dagster; whether that succeeded."""
    _log_change(diff)
    try:
        index_directly(
            settings, diff.to_process, diff.deleted, retry_failed=retry_failed, trigger=trigger
        )
    except Exception:  # as a Dagster run's failure: logged, and what was committed stays
        logger.exception("indexing failed")
        return False
    return True


def _run(
    settings: Settings, diff: ManifestDiff, *, retry_failed: bool, verbose: bool, trigger: str
) -> bool:
    """One Dagster run over the diff's documents, in this process; whether it succeeded."""
    from rag_pipeline.definitions import defs
    from rag_pipeline.defs.direct import report_direct_runs
    from rag_pipeline.defs.instance import get_instance
    from rag_pipeline.defs.partitions import remove_partitions
    from rag_pipeline.defs.runs import (
        TRIGGER_TAG,
        fail_abandoned_runs,
        index_documents_job,
        plan_index_run,
    )

    _log_change(diff)
    with get_instance(settings) as instance:
        fail_abandoned_runs(instance, settings)  # e.g. an earlier `index` killed mid-way
        report_direct_runs(instance, settings)  # a dead run left active would hold them back
        _refuse_while_runs_are_active(instance, settings)
        planned = plan_index_run(instance, settings, diff)
        level = "DEBUG" if verbose else "ERROR"
        result = defs.resolve_job_def(index_documents_job.name).execute_in_process(
            instance=instance,
            run_config=planned.run_config(settings, retry_failed=retry_failed)
            | {"loggers": {"console": {"config": {"log_level": level}}}},
            tags={**planned.tags, TRIGGER_TAG: trigger},
            raise_on_error=False,
        )
        if result.success:
            remove_partitions(instance, settings, diff.deleted)
        else:
            logger.error("the Dagster run %s failed; see `rag-pipeline ui`", result.run_id)
        return result.success


def _log_change(diff: ManifestDiff) -> None:
    logger.info(
        "indexing %d new, %d changed and %d deleted documents (%d in the watched folders)",
        len(diff.new),
        len(diff.changed),
        len(diff.deleted),
        len(diff.files),
    )


def _queue(
    settings: Settings, diff: ManifestDiff, *, retry_failed: bool, trigger: str
) -> list[str]:
    """The diff's documents as runs of at most ``indexing.run_documents`` in Dagster's queue."""
    from rag_pipeline.defs.direct import report_direct_runs
    from rag_pipeline.defs.instance import get_instance
    from rag_pipeline.defs.queue import submit_runs
    from rag_pipeline.defs.runs import fail_abandoned_runs, plan_index_runs

    with get_instance(settings) as instance:
        fail_abandoned_runs(instance, settings)
        report_direct_runs(instance, settings)
        _refuse_while_runs_are_active(instance, settings)
        planned = plan_index_runs(instance, settings, diff)
        logger.info("queueing %d runs for %d documents", len(planned), len(diff.to_process))
        return submit_runs(instance, settings, planned, retry_failed=retry_failed, trigger=trigger)


def _refuse_while_runs_are_active(instance: DagsterInstance, settings: Settings) -> None:
    """Queued or running runs of the workspace may hold some of these documents, and planning
    would move their partitions: nothing is planned until they end."""
    from rag_pipeline.defs.runs import active_index_run

    active = active_index_run(instance, settings.workspace)
    if active:
        status = active.status.value.lower()
        raise RunsInProgress(f"run {active.run_id} of this workspace is {status}")


def _wait(settings: Settings, run_ids: list[str], diff: ManifestDiff) -> bool:
    """Wait for the queued runs (started by a dagster-daemon); whether all succeeded."""
    from rag_pipeline.defs.instance import get_instance
    from rag_pipeline.defs.partitions import remove_partitions
    from rag_pipeline.defs.queue import queue_daemon, wait_for_runs

    with queue_daemon(settings) as daemon_alive, get_instance(settings) as instance:
        succeeded = wait_for_runs(instance, settings, run_ids, daemon_alive)
        if succeeded:
            remove_partitions(instance, settings, diff.deleted)
        return succeeded
