"""Dagster's SQLite event log, writing a run's per-document events in one transaction, and
its SQLite storages on connections they keep open.

A run over N documents records N planned and N materialization events per asset. Dagster's
SQLite storage writes each event on its own connection (over 10 ms apiece here), which made the
bookkeeping of a 1,000-document run cost more than its embeddings; dagster-postgres already
writes such batches at once. This does the same for SQLite. Batching is on when
``DAGSTER_EVENT_BATCH_SIZE`` is set (``rag_pipeline.definitions`` sets it).

Dagster's SQLite storages also build a new SQLAlchemy engine, and open and close a new
connection, for every statement, and ask the database whether a table exists before each
dynamic-partition query: a one-document run made over 400 of them, about a second. Here each
database's engine is kept (the run storage's, the event log's index shard's and the latest
runs', with their pooled connections) and a table once seen is not looked up again. A new
database is made a write-ahead log before its tables are created, not after, and commits wait
for the disk only at checkpoints (``synchronous=NORMAL``: durable when the process is killed;
a power cut of the machine may lose the last events, which Dagster's run monitoring and
``runs.fail_abandoned_runs`` already cover). (Dagster internals, pinned by ``dagster==1.13.*``
and ``rag_pipeline_tests/defs/test_storage.py``.)
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from dagster._core.events import DagsterEventType
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SqliteEventLogStorage,
)
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._serdes import ConfigurableClassData
from sqlalchemy import create_engine
from sqlalchemy import event as sqlalchemy_event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError

_BATCHED = {DagsterEventType.ASSET_MATERIALIZATION, DagsterEventType.ASSET_MATERIALIZATION_PLANNED}
_EVENTS_PER_STATEMENT = 2000  # about 7 SQL variables each
# Engines kept open: the index shard's and the last few run shards' (the webserver reads many
# runs; each kept engine holds its database's file open).
_KEPT_ENGINES = 8


class BatchedSqliteEventLogStorage(SqliteEventLogStorage):
    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._engines_pid = os.getpid()
        self._engines_lock = threading.Lock()
        self._tables: set[str] = set()
        super().__init__(base_dir, inst_data=inst_data)

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> BatchedSqliteEventLogStorage:
        return cls(inst_data=inst_data, **config_value)

    # -- connections -----------------------------------------------------------------------

    def _engine(self, shard: str) -> Engine:
        """The shard's engine, made (and its database created when new) on first use."""
        with self._engines_lock:
            if self._engines_pid != os.getpid():  # a forked child must not share connections
                self._engines = OrderedDict()
                self._engines_pid = os.getpid()
            engine = self._engines.pop(shard, None)
            if engine is None:
                engine = _pooled_engine(self.conn_string_for_shard(shard))
                if shard not in self._initialized_dbs:
                    if not os.path.exists(self.path_for_shard(shard)):
                        # Another process creating it too: Dagster's _initdb copes, as before.
                        with contextlib.suppress(OperationalError), engine.connect() as connection:
                            connection.exec_driver_sql("PRAGMA journal_mode=WAL")
                    self._initdb(engine)
                    self._initialized_dbs.add(shard)
            self._engines[shard] = engine  # the most recently used last
            while len(self._engines) > _KEPT_ENGINES:
                _, oldest = self._engines.popitem(last=False)
                oldest.dispose()
            return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        # As Dagster's: one connection at a time, in a transaction, but from a kept engine.
        engine = self._engine(shard)
        with self._db_lock, engine.connect() as connection, connection.begin():
            yield connection

    def has_table(self, table_name: str) -> bool:
        if table_name in self._tables:  # tables are added by migrations, never dropped
            return True
        with self._engine(INDEX_SHARD_NAME).connect() as connection:
            found = bool(connection.dialect.has_table(connection, table_name))
        if found:
            self._tables.add(table_name)
        return found

    def _dispose_engines(self) -> None:
        with self._engines_lock:
            engines, self._engines = list(self._engines.values()), OrderedDict()
        for engine in engines:
            engine.dispose()

    def wipe(self) -> None:
        self._dispose_engines()  # before the run shards' files are deleted
        super().wipe()

    def upgrade(self) -> None:
        self._dispose_engines()
        super().upgrade()

    def dispose(self) -> None:
        self._dispose_engines()
        super().dispose()

    # -- batched writes --------------------------------------------------------------------

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


class PooledSqliteRunStorage(SqliteRunStorage):
    """Dagster's SQLite run storage on one kept engine (see above)."""

    def __init__(self, conn_string: str, inst_data: ConfigurableClassData | None = None) -> None:
        super().__init__(conn_string, inst_data)
        self._engine: Engine | None = None
        self._engine_pid = os.getpid()
        self._engine_lock = threading.Lock()

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> PooledSqliteRunStorage:
        return cls.from_local(inst_data=inst_data, **config_value)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._engine_lock:
            if self._engine is None or self._engine_pid != os.getpid():
                self._engine = _pooled_engine(self._conn_string)
                self._engine_pid = os.getpid()
            engine = self._engine
        with engine.connect() as connection, connection.begin():
            yield connection

    def dispose(self) -> None:
        with self._engine_lock:
            engine, self._engine = self._engine, None
        if engine is not None and self._engine_pid == os.getpid():
            engine.dispose()
        super().dispose()


def _pooled_engine(conn_string: str) -> Engine:
    engine = create_engine(conn_string, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
    sqlalchemy_event.listen(engine, "connect", _sync_at_checkpoints)
    return engine


def _sync_at_checkpoints(connection: Any, _record: Any) -> None:
    connection.execute("PRAGMA synchronous=NORMAL")
