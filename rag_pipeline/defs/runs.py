"""Planning and starting indexing runs: shared by the CLI, the sensor and the schedule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dagster import AssetSelection, define_asset_job, in_process_executor

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import Settings
from rag_pipeline.defs.assets import document_assets
from rag_pipeline.defs.partitions import arrange_partitions
from rag_pipeline.manifest import ManifestDiff, diff_manifest, scan_sources

if TYPE_CHECKING:
    from dagster import DagsterInstance

# In-process: one process per run, the steps sharing the loaded models.
index_documents_job = define_asset_job(
    "index_documents",
    selection=AssetSelection.assets(*document_assets),
    executor_def=in_process_executor,
    description="Index the selected documents: parse, chunk, embed, write points.",
)

TRIGGER_TAG = "rag_pipeline/trigger"


@dataclass(frozen=True, slots=True)
class PlannedRun:
    diff: ManifestDiff
    tags: dict[str, str]  # partition range; empty when there is nothing to do

    def run_config(self, settings: Settings) -> dict[str, Any]:
        return {"resources": {"indexing": {"config": {"home": str(settings.home)}}}}


def plan_index_run(
    instance: DagsterInstance, settings: Settings, *, retry_failed: bool = False
) -> PlannedRun:
    """Scan the watched folders, sync the partitions, and range the documents to (re)index."""
    catalog = Catalog(settings.home)
    known = catalog.documents()
    files, missing = scan_sources(settings, known)
    diff = diff_manifest(files, missing, known, retry_failed=retry_failed)
    tags = arrange_partitions(instance, diff.to_process, [*diff.files, *known])
    return PlannedRun(diff=diff, tags=tags)
