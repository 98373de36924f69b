"""One incremental pass over the watched folders: what the CLI's ``index`` and ``eval`` run.

It finds what changed without Dagster, and only when something did runs it as one Dagster run
in this process (Dagster takes over a second to import and open; an unchanged re-run needs
none of it).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import Settings
from rag_pipeline.locking import index_lock
from rag_pipeline.manifest import ManifestDiff, find_changes

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IndexOutcome:
    diff: ManifestDiff
    succeeded: bool  # False when the Dagster run failed (nothing of it was committed)
    failed: dict[str, str]  # documents of this run that could not be indexed → why
    seconds: float


def index_once(
    settings: Settings, *, retry_failed: bool = False, verbose: bool = False, trigger: str = "cli"
) -> IndexOutcome:
    """Index what changed, holding the home's indexing lock throughout.

    With nothing to do, Dagster is not even imported (half a second): the partitions already
    match the catalog.
    """
    started = time.perf_counter()
    with index_lock(settings.home):
        diff = find_changes(settings, retry_failed=retry_failed)
        for folder in diff.missing_sources:
            logger.warning("watched folder %s is missing; its documents are kept", folder)
        succeeded = True
        if diff.to_process:
            from rag_pipeline.definitions import defs
            from rag_pipeline.defs.instance import get_instance
            from rag_pipeline.defs.partitions import remove_partitions
            from rag_pipeline.defs.runs import TRIGGER_TAG, index_documents_job, plan_index_run

            logger.info(
                "indexing %d new, %d changed and %d deleted documents (%d in the watched folders)",
                len(diff.new),
                len(diff.changed),
                len(diff.deleted),
                len(diff.files),
            )
            with get_instance(settings) as instance:
                planned = plan_index_run(instance, diff)
                level = "DEBUG" if verbose else "ERROR"
                result = defs.resolve_job_def(index_documents_job.name).execute_in_process(
                    instance=instance,
                    run_config=planned.run_config(settings)
                    | {"loggers": {"console": {"config": {"log_level": level}}}},
                    tags={**planned.tags, TRIGGER_TAG: trigger},
                    raise_on_error=False,
                )
                succeeded = result.success
                if succeeded:
                    remove_partitions(instance, diff.deleted)
                else:
                    logger.error("the Dagster run %s failed; see `rag-pipeline ui`", result.run_id)
    records = Catalog(settings.home).documents() if succeeded else {}
    failed = {
        doc_id: records[doc_id].error or "unknown reason"
        for doc_id in [*diff.new, *diff.changed]
        if doc_id in records and records[doc_id].state == "failed"
    }
    return IndexOutcome(diff, succeeded, failed, time.perf_counter() - started)
