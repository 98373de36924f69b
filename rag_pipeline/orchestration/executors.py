"""The three ways a pass's documents are indexed, behind one small interface:

- :class:`Direct`: in this process without Dagster (``indexing/direct.py``), for a small change;
  Dagster takes seconds to import and open. The next Dagster run reports it.
- :class:`InProcess`: Dagster runs in this process, one after another.
- :class:`Queued`: runs in Dagster's queue, started by a ``dagster-daemon`` (``defs/queue.py``),
  ``dagster.max_concurrent_runs`` at a time.

Each starts holding the workspace's indexing lock and is waited for after the pass lets go of
it: a queued run takes the lock itself. Dagster is imported by the executors that use it only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from rag_pipeline.config import Settings
from rag_pipeline.indexing.direct import index_directly, indexes_directly
from rag_pipeline.manifest import ManifestDiff

logger = logging.getLogger(__name__)

# Waits for what an executor started; whether all of it succeeded (what a failed run committed
# stays committed).
Wait = Callable[[], bool]


class Executor(Protocol):
    def start(
        self, settings: Settings, diff: ManifestDiff, *, retry_failed: bool, trigger: str
    ) -> Wait: ...


def choose_executor(
    settings: Settings, documents: int, *, parallel: int | None, verbose: bool
) -> Executor:
    """Queued runs when asked for (``parallel``), else a small change without Dagster, else
    Dagster runs in this process."""
    if parallel:
        return Queued()
    if indexes_directly(settings, documents):
        return Direct()
    return InProcess(verbose=verbose)


class Direct:
    def start(
        self, settings: Settings, diff: ManifestDiff, *, retry_failed: bool, trigger: str
    ) -> Wait:
        _log_change(diff)
        try:
            index_directly(
                settings, diff.to_process, diff.deleted, retry_failed=retry_failed, trigger=trigger
            )
        except Exception:  # as a Dagster run's failure: logged, and what was committed stays
            logger.exception("indexing failed")
            return lambda: False
        return lambda: True


@dataclass(frozen=True, slots=True)
class InProcess:
    verbose: bool

    def start(
        self, settings: Settings, diff: ManifestDiff, *, retry_failed: bool, trigger: str
    ) -> Wait:
        """The diff's documents as runs of at most ``indexing.run_documents``, one after another
        in this process: each commits what it did, so a change of hours stopped mid-way loses
        one run's work, and a run's memory does not grow with the change. A run that fails
        (documents that fail do not fail their run) ends the pass."""
        from rag_pipeline.definitions import defs
        from rag_pipeline.defs.instance import get_instance
        from rag_pipeline.defs.partitions import remove_partitions
        from rag_pipeline.defs.planning import clear_the_way
        from rag_pipeline.defs.runs import TRIGGER_TAG, index_documents_job, plan_index_runs

        _log_change(diff)
        job = defs.resolve_job_def(index_documents_job.name)
        level = "DEBUG" if self.verbose else "ERROR"
        with get_instance(settings) as instance:
            clear_the_way(instance, settings)
            planned_runs = plan_index_runs(instance, settings, diff)
            for part, planned in enumerate(planned_runs, 1):
                if len(planned_runs) > 1:
                    logger.info("run %d of %d", part, len(planned_runs))
                result = job.execute_in_process(
                    instance=instance,
                    run_config=planned.run_config(settings, retry_failed=retry_failed)
                    | {"loggers": {"console": {"config": {"log_level": level}}}},
                    tags={**planned.tags, TRIGGER_TAG: trigger},
                    raise_on_error=False,
                )
                if not result.success:  # not a document's failure: the next pass retries
                    logger.error("the Dagster run %s failed; see `rag-pipeline ui`", result.run_id)
                    return lambda: False
            remove_partitions(instance, settings, diff.deleted)
        return lambda: True


class Queued:
    def start(
        self, settings: Settings, diff: ManifestDiff, *, retry_failed: bool, trigger: str
    ) -> Wait:
        """The diff's documents as runs of at most ``indexing.run_documents`` in the queue."""
        from rag_pipeline.defs.instance import get_instance
        from rag_pipeline.defs.planning import clear_the_way
        from rag_pipeline.defs.queue import submit_runs
        from rag_pipeline.defs.runs import plan_index_runs

        with get_instance(settings) as instance:
            clear_the_way(instance, settings)
            planned = plan_index_runs(instance, settings, diff)
            logger.info("queueing %d runs for %d documents", len(planned), len(diff.to_process))
            run_ids = submit_runs(
                instance, settings, planned, retry_failed=retry_failed, trigger=trigger
            )
        return lambda: _wait(settings, run_ids, diff)


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


def _log_change(diff: ManifestDiff) -> None:
    seen = (
        f"{len(diff.files)} compared, the rest as the last pass left them"
        if diff.partial
        else f"{len(diff.files)} in the watched folders"
    )
    logger.info(
        "indexing %d new, %d changed and %d deleted documents (%s)",
        len(diff.new),
        len(diff.changed),
        len(diff.deleted),
        seen,
    )
