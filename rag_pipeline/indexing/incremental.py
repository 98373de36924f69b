"""One incremental pass over the watched folders: what the CLI's ``index`` and ``eval`` run.

It first mends what an interrupted run or a damaged store left (``commit.repair_pending``,
``checks.verify_collections``), then finds what changed without Dagster, and only when something
did runs it as one Dagster run in this process (Dagster takes over a second to import and
open; an unchanged re-run needs none of it). Meanwhile what the run needs gets ready: the parser
workers start on the other core, the models load in a thread, the store the checks opened is
lent to the run, and the garbage collector leaves alone what the imports load (see ``_run``).
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import Settings
from rag_pipeline.indexing.checks import verify_collections
from rag_pipeline.indexing.commit import finish_collections, repair_pending
from rag_pipeline.indexing.run import (
    PARSER_PRELOAD,
    close_lent_stores,
    forget_models_ahead,
    lend_store,
    load_models_ahead,
    target_collection,
)
from rag_pipeline.locking import index_lock
from rag_pipeline.manifest import ManifestDiff, find_changes
from rag_pipeline.parsing.pool import prestart_workers, stop_prestarted_workers
from rag_pipeline.store import VectorStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IndexOutcome:
    diff: ManifestDiff
    succeeded: bool  # False when the Dagster run failed (what it committed stays committed)
    failed: dict[str, str]  # documents of this run that could not be indexed → why
    seconds: float


def index_once(
    settings: Settings, *, retry_failed: bool = False, verbose: bool = False, trigger: str = "cli"
) -> IndexOutcome:
    """Index what changed, holding the home's indexing lock throughout."""
    started = time.perf_counter()
    with index_lock(settings.home), Catalog(settings) as catalog:
        target = target_collection(settings, catalog).name
        opened: dict[str, VectorStore] = {}  # by the checks: the run takes its collection's
        try:
            diff = find_work(settings, catalog, retry_failed=retry_failed, keep_open=opened)
        except BaseException:
            _close_all(opened)
            raise
        kept = opened.pop(target, None)
        _close_all(opened)  # the run may open the others itself
        succeeded = True
        if diff.to_process:
            if kept is not None:
                lend_store(settings, target, kept)
            succeeded = _run(
                settings, diff, retry_failed=retry_failed, verbose=verbose, trigger=trigger
            )
        else:
            if kept is not None:
                kept.close()
            finish_collections(settings, catalog)  # a build whose last run died before its end
        records = catalog.documents(target)
    failed = {
        doc_id: records[doc_id].error or "unknown reason"
        for doc_id in [*diff.new, *diff.changed]
        if doc_id in records and records[doc_id].state == "failed"
    }
    return IndexOutcome(diff, succeeded, failed, time.perf_counter() - started)


def _close_all(stores: dict[str, VectorStore]) -> None:
    while stores:
        stores.popitem()[1].close()


def find_work(
    settings: Settings,
    catalog: Catalog,
    *,
    retry_failed: bool = False,
    keep_open: dict[str, VectorStore] | None = None,
) -> ManifestDiff:
    """Mend what interrupted runs and damaged stores left, then find what changed.

    Call it holding the home's indexing lock: repairs must not meet a run's writes.
    ``keep_open``: where to leave the stores the checks opened (see ``verify_collections``).
    """
    target = target_collection(settings, catalog)
    repair_pending(settings, catalog)
    verify_collections(settings, catalog, keep_open=keep_open)
    diff = find_changes(settings, catalog, target.name, retry_failed=retry_failed)
    for folder in diff.missing_sources:
        logger.warning("watched folder %s is missing; its documents are kept", folder)
    return diff


def _run(
    settings: Settings, diff: ManifestDiff, *, retry_failed: bool, verbose: bool, trigger: str
) -> bool:
    """One Dagster run over the diff's documents, in this process; whether it succeeded.

    What the run needs starts first: the parser workers on the second core and the models in
    a thread, while Dagster loads (the target collection's store, opened by the checks, is lent
    to the run already).
    """
    to_parse = len(diff.new) + len(diff.changed)
    try:
        with _sweep_after_loading() as loaded:
            if to_parse:
                prestart_workers(min(settings.parsing.workers, to_parse), PARSER_PRELOAD)
                load_models_ahead(settings)
            return _run_in_dagster(
                settings,
                diff,
                loaded=loaded,
                retry_failed=retry_failed,
                verbose=verbose,
                trigger=trigger,
            )
    finally:  # what the run did not take (it failed early)
        stop_prestarted_workers()
        forget_models_ahead()
        close_lent_stores()


@contextmanager
def _sweep_after_loading() -> Iterator[Callable[[], None]]:
    """No garbage collection while Dagster and the models load, then none over what they
    loaded until the run ends.

    Importing them leaves a few million long-lived objects, which Python's collector would
    otherwise sweep again and again, each full sweep longer (0.6 s of a one-document run, most
    of it useless). Objects made by the run are collected as usual. Yields the call that ends
    the loading: from then on what exists is set aside (``gc.freeze``) until the run ends.
    """
    enabled = gc.isenabled()
    gc.disable()

    def loaded() -> None:
        gc.freeze()
        if enabled:
            gc.enable()

    try:
        yield loaded
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()


def _run_in_dagster(
    settings: Settings,
    diff: ManifestDiff,
    *,
    loaded: Callable[[], None],
    retry_failed: bool,
    verbose: bool,
    trigger: str,
) -> bool:
    from rag_pipeline.definitions import defs
    from rag_pipeline.defs.instance import get_instance
    from rag_pipeline.defs.partitions import remove_partitions
    from rag_pipeline.defs.runs import (
        TRIGGER_TAG,
        fail_abandoned_runs,
        index_documents_job,
        plan_index_run,
    )

    logger.info(
        "indexing %d new, %d changed and %d deleted documents (%d in the watched folders)",
        len(diff.new),
        len(diff.changed),
        len(diff.deleted),
        len(diff.files),
    )
    with get_instance(settings) as instance:
        loaded()
        fail_abandoned_runs(instance, settings)  # e.g. an earlier `index` killed mid-way
        planned = plan_index_run(instance, settings, diff)
        level = "DEBUG" if verbose else "ERROR"
        result = defs.resolve_job_def(index_documents_job.name).execute_in_process(
            instance=instance,
            run_config=planned.run_config(settings, retry_failed=retry_failed)
            | {"loggers": {"console": {"config": {"log_level": level}}}},
            tags={**planned.tags, TRIGGER_TAG: trigger},
            asset_selection=planned.asset_selection,
            raise_on_error=False,
        )
        if result.success:
            remove_partitions(instance, settings.workspace, diff.deleted)
        else:
            logger.error("the Dagster run %s failed; see `rag-pipeline ui`", result.run_id)
        return result.success
