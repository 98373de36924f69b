"""The Dagster internals this project uses, in one place; nothing else imports ``dagster._``.

Each has no public equivalent in Dagster 1.12 or 1.13 (the range pyproject.toml allows);
``rag_pipeline_tests/defs/test_compat.py`` pins what is used here, so that a Dagster upgrade that
changes them fails there first.

- **Instance configuration**: the storage classes that ``dagster.yaml`` names (re-exported, so
  the file names this module rather than Dagster's private ones), and an SQLite event log that
  writes a run's per-document events in one transaction. A run over N documents records N
  planned and N materialization events per asset; Dagster's SQLite storage writes each event on
  its own connection (over 10 ms apiece here), which made the bookkeeping of a 1,000-document run
  cost more than its embeddings. dagster-postgres already writes the batches a run's event log
  hands it at once; this does the same for SQLite. Batching is on when
  ``DAGSTER_EVENT_BATCH_SIZE`` is set (``defs/instance.py`` sets it). Neither storage batches the
  planned events ``create_run`` writes before the run starts (``bench/partitions.py`` counts
  them).
- **Per-partition metadata**: ``context.add_asset_metadata(..., partition_key=k)`` re-reads every
  dynamic partition to validate ``k`` on each call, which is quadratic over a large batch; the
  keys here are the run's own, so the step's accumulator is extended once.
- **Queued runs from a code location**: what ``dagster job launch`` does, for many runs with one
  code server (``defs/queue.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagster import AssetExecutionContext, DagsterInstance
from dagster._core.events import DagsterEventType
from dagster._core.events.log import EventLogEntry
from dagster._core.execution.context.metadata_logging import (
    AssetMetadataHandle,
    OutputMetadataAccumulator,
)
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.local_compute_log_manager import LocalComputeLogManager
from dagster._core.storage.root import LocalArtifactStorage
from dagster._core.storage.runs import SqliteRunStorage
from dagster._core.storage.schedules import SqliteScheduleStorage
from dagster._serdes import ConfigurableClassData

if TYPE_CHECKING:
    from rag_pipeline.indexing.run import Metadata

# The storage classes are named by the instance configuration (defs/instance.py, dagster.yaml)
# as this module's.
__all__ = [
    "BatchedSqliteEventLogStorage",
    "LocalArtifactStorage",
    "LocalComputeLogManager",
    "SqliteRunStorage",
    "SqliteScheduleStorage",
    "add_partition_metadata",
    "submit_runs_of_location",
]

_BATCHED = {DagsterEventType.ASSET_MATERIALIZATION, DagsterEventType.ASSET_MATERIALIZATION_PLANNED}
_EVENTS_PER_STATEMENT = 2000  # about 7 SQL variables each


class BatchedSqliteEventLogStorage(SqliteEventLogStorage):
    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> BatchedSqliteEventLogStorage:
        return cls(inst_data=inst_data, **config_value)

    def store_event_batch(self, events: Sequence[EventLogEntry]) -> None:
        # A run's planned events mix asset materializations (one per document and asset) with a
        # few asset-check events: batch the former, store the rest as Dagster does.
        batched = [event for event in events if event.dagster_event_type in _BATCHED]
        for event in events:
            if event.dagster_event_type not in _BATCHED:
                self.store_event(event)
        # Slices bound the statement's SQL variables (SQLite refuses more than 32,766 in most
        # builds; a refused batch would make Dagster store the events one by one instead).
        for start in range(0, len(batched), _EVENTS_PER_STATEMENT):
            self._store_asset_events(batched[start : start + _EVENTS_PER_STATEMENT])

    def _store_asset_events(self, events: Sequence[EventLogEntry]) -> None:
        insert = self.prepare_insert_event_batch(events)
        with self.run_connection(events[0].run_id) as connection:
            connection.execute(insert)
        # As store_event does: mirror asset events into the cross-run index shard.
        with self.index_transaction() as connection:
            returned = connection.execute(insert.returning(SqlEventLogStorageTable.c.id))
            event_ids = [row[0] for row in returned.fetchall()]
        # Then the asset tables, through the storage's public methods: they open connections of
        # their own, so only after the insert's (the SQLite storage's connection lock is not
        # reentrant). The variants on an open connection are private and new in Dagster 1.13.
        materializations = [
            (event, event_id)
            for event, event_id in zip(events, event_ids, strict=True)
            if event.get_dagster_event().event_type == DagsterEventType.ASSET_MATERIALIZATION
        ]
        if materializations:
            self.store_asset_event_tags(
                [event for event, _ in materializations], [i for _, i in materializations]
            )
        # The asset table keeps each asset's latest event: the last one per asset and type.
        latest: dict[tuple[Any, DagsterEventType], tuple[EventLogEntry, int]] = {}
        for event, event_id in zip(events, event_ids, strict=True):
            dagster_event = event.get_dagster_event()
            latest[(dagster_event.asset_key, dagster_event.event_type)] = (event, event_id)
        for event, event_id in latest.values():
            self.store_asset_event(event, event_id)


def add_partition_metadata(
    context: AssetExecutionContext, per_partition: Mapping[str, Metadata]
) -> None:
    """Attach each of the run's partitions' metadata to its own materialization of the asset."""
    step = context.op_execution_context._step_execution_context
    accumulated = dict(step._metadata_accumulator.per_output_metadata)
    for key, values in per_partition.items():
        handle = AssetMetadataHandle(asset_key=context.assets_def.key, partition_key=key)
        accumulated[handle] = values
    step._metadata_accumulator = OutputMetadataAccumulator(per_output_metadata=accumulated)


def submit_runs_of_location(
    instance: DagsterInstance,
    workspace_file: Path,
    location: str,
    job_name: str,
    runs: Sequence[tuple[dict[str, Any], dict[str, str]]],
) -> list[str]:
    """Create runs of ``job_name`` (each a run config and tags) from the code location, as the
    daemon loads it, and submit them to the instance's run queue; their ids."""
    from dagster._cli.job import _create_run
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget

    target = WorkspaceFileTarget(paths=[str(workspace_file)])
    with WorkspaceProcessContext(instance, target, code_server_log_level="WARNING") as process:
        workspace = process.create_request_context()
        code_location = workspace.get_code_location(location)
        repository = next(iter(code_location.get_repositories().values()))
        job = repository.get_full_job(job_name)
        run_ids = []
        for run_config, tags in runs:
            created = _create_run(
                instance=instance,
                code_location=code_location,
                remote_repo=repository,
                remote_job=job,
                run_config=run_config,
                tags=tags,
                op_selection=None,
                run_id=None,
            )
            instance.submit_run(created.run_id, workspace)
            run_ids.append(created.run_id)
    return run_ids
