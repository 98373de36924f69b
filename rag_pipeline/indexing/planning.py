"""What a pass must index: first what an interrupted run or a damaged store left is mended
(``commit.repair_pending``, ``checks.verify_collections``), then the watched folders are
compared with the catalog (``manifest.find_changes``; a watcher's event, only the paths it
named). The CLI's passes, the watcher's and the sensor's ticks all plan here."""

from __future__ import annotations

import logging
from collections.abc import Collection
from pathlib import Path

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import Settings
from rag_pipeline.indexing.checks import verify_collections
from rag_pipeline.indexing.commit import repair_pending
from rag_pipeline.indexing.direct import indexes_directly
from rag_pipeline.indexing.run import target_collection
from rag_pipeline.manifest import ManifestDiff, find_changes, find_changes_at

logger = logging.getLogger(__name__)


def find_work(
    settings: Settings,
    catalog: Catalog,
    *,
    retry_failed: bool = False,
    partial: bool = False,
    paths: Collection[Path] | None = None,
) -> ManifestDiff:
    """Mend what interrupted runs and damaged stores left, then find what changed.

    ``partial``: a diff of only what changed will do, the change being indexed directly when it
    is small (``indexing/direct.py``; a Dagster run's plan needs every document): the paths a
    watcher's events named (``paths``; the store is not verified then, which the watcher's whole
    passes do), else the folders whose listing changed since the last quiet pass. A change too
    large to index directly gets the whole comparison.

    Call it holding the workspace's indexing lock: repairs must not meet a run's writes.
    """
    target = target_collection(settings, catalog)
    repair_pending(settings, catalog)
    # More paths than a direct change holds: the whole pass at once, without describing them.
    if (
        partial
        and paths is not None
        and not retry_failed
        and indexes_directly(settings, len(paths))
    ):
        diff = find_changes_at(settings, catalog, target.name, paths)
        if diff is not None and indexes_directly(settings, len(diff.to_process)):
            return diff
    verify_collections(settings, catalog)
    diff = find_changes(settings, catalog, target.name, retry_failed=retry_failed, partial=partial)
    if diff.partial and not indexes_directly(settings, len(diff.to_process)):
        diff = find_changes(settings, catalog, target.name, every_file=True, listing=diff.listing)
    for folder in diff.missing_sources:
        logger.warning("watched folder %s is missing; its documents are kept", folder)
    return diff
