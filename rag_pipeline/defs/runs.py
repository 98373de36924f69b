"""Planning and starting indexing runs: shared by the CLI, the sensor and the schedule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dagster import AssetSelection, define_asset_job, in_process_executor

from rag_pipeline.config import Settings
from rag_pipeline.defs.assets import document_assets
from rag_pipeline.defs.partitions import arrange_partitions
from rag_pipeline.manifest import ManifestDiff

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

    def run_config(self, settings: Settings, *, retry_failed: bool = False) -> dict[str, Any]:
        config: dict[str, Any] = {
            "resources": {"indexing": {"config": {"home": str(settings.home)}}}
        }
        if retry_failed:
            config["ops"] = {"file_manifest": {"config": {"retry_failed": True}}}
        return config


def plan_index_run(instance: DagsterInstance, diff: ManifestDiff) -> PlannedRun:
    """Sync the partitions with the documents, and range the ones to (re)index."""
    tags = arrange_partitions(instance, diff.to_process, diff.documents)
    return PlannedRun(diff=diff, tags=tags)
