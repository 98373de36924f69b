"""What every planner of a workspace's Dagster runs does first (the CLI's pass, the sensor):
runs whose process died are marked failed, runs made without Dagster are reported, and no plan
is made while a run of the workspace is queued or in progress."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rag_pipeline.config import Settings
from rag_pipeline.defs.direct import report_direct_runs
from rag_pipeline.defs.errors import RunsInProgress
from rag_pipeline.defs.runs import active_index_run, fail_abandoned_runs

if TYPE_CHECKING:
    from dagster import DagsterInstance


def clear_the_way(instance: DagsterInstance, settings: Settings) -> None:
    """Ready the instance for planning the workspace's runs, or raise :class:`RunsInProgress`.

    Call it holding the workspace's indexing lock, as planning needs. Queued or running runs of
    the workspace may hold some of the changed documents, and planning would move their
    partitions: nothing is planned until they end. A dead run left started would hold them back
    for ever, as would an unreported run without Dagster (its partitions are not yet added).
    """
    fail_abandoned_runs(instance, settings)  # e.g. an earlier `index` killed mid-way
    report_direct_runs(instance, settings)
    active = active_index_run(instance, settings.workspace)
    if active:
        status = active.status.value.lower()
        raise RunsInProgress(f"run {active.run_id} of this workspace is {status}")
