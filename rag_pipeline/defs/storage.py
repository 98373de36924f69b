"""Dagster's SQLite event log, writing a run's per-document events in one transaction.

A run over N documents records N planned and N materialization events per asset. Dagster's
SQLite storage writes each event on its own connection (over 10 ms apiece here), which made the
bookkeeping of a 1,000-document run cost more than its embeddings; dagster-postgres already
writes the batches a run's event log hands it at once. This does the same for SQLite. Batching is
on when ``DAGSTER_EVENT_BATCH_SIZE`` is set (``rag_pipeline.definitions`` sets it). Neither
storage batches the planned events ``create_run`` writes before the run starts: those stay one row
at a time (``bench/partitions.py`` counts them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dagster._core.events import DagsterEventType
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._serdes import ConfigurableClassData

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
            materializations = [
                (event, event_id)
                for event, event_id in zip(events, event_ids, strict=True)
                if event.get_dagster_event().event_type == DagsterEventType.ASSET_MATERIALIZATION
            ]
            if materializations:
                self._store_asset_event_tags(
                    connection,
                    [event for event, _ in materializations],
                    [i for _, i in materializations],
                )
            # The asset table keeps each asset's latest event: the last one per asset and type.
            latest: dict[tuple[Any, DagsterEventType], tuple[EventLogEntry, int]] = {}
            for event, event_id in zip(events, event_ids, strict=True):
                dagster_event = event.get_dagster_event()
                latest[(dagster_event.asset_key, dagster_event.event_type)] = (event, event_id)
            for event, event_id in latest.values():
                self._store_asset_event(connection, event, event_id)
