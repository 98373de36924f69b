"""What a pass must index: first what an interrupted run or a damaged store left is mended
(``commit.repair_pending``, ``checks.verify_collections``), then the watched folders are
compared with the catalog (``manifest.find_changes``). The CLI's passes and the sensor's ticks
both plan here."""

from __future__ import annotations

import logging

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import Settings
from rag_pipeline.indexing.checks import verify_collections
from rag_pipeline.indexing.commit import repair_pending
from rag_pipeline.indexing.run import target_collection
from rag_pipeline.manifest import ManifestDiff, find_changes

logger = logging.getLogger(__name__)


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
