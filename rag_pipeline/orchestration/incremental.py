"""One incremental pass over a workspace's watched folders: what the CLI's ``index`` and
``eval``, the page's uploads and the watcher run.

It plans without Dagster (``indexing/planning.py``: mend, then compare the folders with the
catalog), and only when something changed runs it through an executor (``executors.py``): a
small change without Dagster (an unchanged re-run needs none of it either), a larger one as one
Dagster run in this process, or, with ``parallel``, as runs in Dagster's queue.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import Settings
from rag_pipeline.indexing.commit import finish_collections
from rag_pipeline.indexing.planning import find_work
from rag_pipeline.indexing.run import target_collection
from rag_pipeline.locking import index_lock, lock_place
from rag_pipeline.manifest import ManifestDiff, remember_listing
from rag_pipeline.orchestration.executors import choose_executor


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
    paths: Collection[Path] | None = None,
) -> IndexOutcome:
    """Index what changed, holding the workspace's indexing lock throughout; or, with ``parallel``,
    while planning: the runs go to Dagster's queue, ``parallel`` at a time. ``paths``: what a
    watcher's events named, compared alone when that suffices (``planning.find_work``)."""
    started = time.perf_counter()
    wait = None
    with index_lock(lock_place(settings)), Catalog(settings) as catalog:
        diff = find_work(
            settings, catalog, retry_failed=retry_failed, partial=not parallel, paths=paths
        )
        if diff.to_process:
            executor = choose_executor(
                settings, len(diff.to_process), parallel=parallel, verbose=verbose
            )
            wait = executor.start(settings, diff, retry_failed=retry_failed, trigger=trigger)
            if not parallel and wait():  # done, in this process, holding the lock
                remember_listing(settings, catalog, target_collection(settings, catalog).name, diff)
        else:
            finish_collections(settings, catalog)  # a build whose last run died before its end
    succeeded = wait() if wait else True
    failed: dict[str, str] = {}
    if diff.new or diff.changed:  # what it indexed, read again: which failed
        with Catalog(settings) as catalog:
            records = catalog.documents(
                target_collection(settings, catalog).name, [*diff.new, *diff.changed]
            )
        failed = {
            doc_id: records[doc_id].error or "unknown reason"
            for doc_id in [*diff.new, *diff.changed]
            if doc_id in records and records[doc_id].state == "failed"
        }
    return IndexOutcome(diff, succeeded, failed, time.perf_counter() - started)
