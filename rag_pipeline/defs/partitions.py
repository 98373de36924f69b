"""One dynamic partition per document, keyed by its readable id (``<folder>/<path inside it>``,
under ``/<workspace>/`` outside the default workspace: ``ids.partition_key``); or, with
``dagster.document_buckets``, one per bucket of documents, for installations whose documents
would be too many partitions (a run over a bucket handles its documents that changed).

A Dagster run covers one contiguous range of partition keys, and dynamic partitions are ordered
by when they were added. So before a run, the documents it must handle are removed and added
again, which moves them to the end in one contiguous range; materialization history survives
this. A run over a range of partitions is one process, however many documents it has; a large
range is cut into several runs (``indexing.run_documents``), which the run queue may run side by
side.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from dagster import DynamicPartitionsDefinition

from rag_pipeline.ids import partition_document, partition_key

if TYPE_CHECKING:
    from dagster import DagsterInstance

    from rag_pipeline.config import Settings

DOCUMENTS = "documents"
documents_partitions = DynamicPartitionsDefinition(name=DOCUMENTS)

RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
# The runs one plan was cut into share it; their ranges are disjoint (defs/runs.py).
PLAN_TAG = "rag_pipeline/plan"


def documents_by_partition(
    workspace: str, doc_ids: Iterable[str], buckets: int = 0
) -> dict[str, list[str]]:
    """Partition key → the documents of ``doc_ids`` it holds (one each, or a bucket's), in order."""
    grouped: dict[str, list[str]] = {}
    for doc_id in doc_ids:
        grouped.setdefault(partition_key(workspace, doc_id, buckets), []).append(doc_id)
    return grouped


def range_tags(keys: list[str]) -> dict[str, str]:
    """The run tags of a range of consecutive partition keys."""
    return {RANGE_START_TAG: keys[0], RANGE_END_TAG: keys[-1]}


def arrange_partition_ranges(
    instance: DagsterInstance,
    workspace: str,
    documents: list[str],
    listed: Iterable[str],
    run_documents: int,
    *,
    buckets: int = 0,
) -> list[list[str]]:
    """Make the partitions of a workspace's ``documents`` one contiguous range and return its
    consecutive slices of about ``run_documents`` documents, each a range of partition keys in
    order (with ``buckets``, as many buckets as hold that many of ``documents`` on average).

    ``listed`` are all the workspace's documents that should have a partition (on disk or in
    the catalog); its partitions of anything else are removed, missing ones added; other
    workspaces' partitions stay. Partitions are only moved when the batch is not already
    contiguous (a single document always is).
    """
    batch = list(documents_by_partition(workspace, documents, buckets))
    wanted = set(documents_by_partition(workspace, listed, buckets)) | set(batch)
    run_partitions = max(1, run_documents * len(batch) // max(len(documents), 1))
    existing = []
    for key in instance.get_dynamic_partitions(DOCUMENTS):
        if key in wanted or partition_document(key)[0] != workspace:
            existing.append(key)
        else:
            instance.delete_dynamic_partition(DOCUMENTS, key)
    position = {key: index for index, key in enumerate(existing)}
    present = sorted(position[key] for key in batch if key in position)
    absent = [key for key in batch if key not in position]
    others = sorted(wanted - set(position) - set(batch))
    in_place = not others and (
        not present
        or (
            present[-1] - present[0] + 1 == len(present)
            and (not absent or present[-1] == len(existing) - 1)
        )
    )
    if in_place:
        ordered = [existing[index] for index in present] + absent
        instance.add_dynamic_partitions(DOCUMENTS, absent)
    else:
        for key in batch:
            if key in position:
                instance.delete_dynamic_partition(DOCUMENTS, key)
        ordered = batch
        instance.add_dynamic_partitions(DOCUMENTS, others + batch)
    return [
        ordered[start : start + run_partitions] for start in range(0, len(ordered), run_partitions)
    ]


def remove_partitions(
    instance: DagsterInstance, settings: Settings, documents: Iterable[str]
) -> None:
    """Remove the partitions of the workspace's deleted ``documents``; with buckets none (other
    documents may share them: a bucket left empty goes at the next plan, which syncs them all)."""
    if settings.dagster.document_buckets:
        return
    existing = set(instance.get_dynamic_partitions(DOCUMENTS))
    for doc_id in documents:
        key = partition_key(settings.workspace, doc_id)
        if key in existing:
            instance.delete_dynamic_partition(DOCUMENTS, key)


def remove_other_workspaces_partitions(instance: DagsterInstance, workspaces: set[str]) -> None:
    """Forget the partitions of workspaces that were deleted."""
    for key in instance.get_dynamic_partitions(DOCUMENTS):
        if partition_document(key)[0] not in workspaces:
            instance.delete_dynamic_partition(DOCUMENTS, key)
