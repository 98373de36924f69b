"""Dagster's SQLite storages on kept connections (Dagster internals: ``defs/storage.py``)."""

import sqlite3
from pathlib import Path

from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME

from rag_pipeline.config import load_settings
from rag_pipeline.defs import storage
from rag_pipeline.defs.instance import get_instance
from rag_pipeline_tests.conftest import Cli


def _indexed(cli: Cli, home: Path, source: Path) -> None:
    (source / "note.md").write_text("# Note\n\nHerons stand still in shallow water.")
    result = cli("index", "--home", home, "--source", source)
    assert result.code == 0 and "added 1" in result.out


def test_the_storages_keep_their_engines_and_their_connections(
    cli: Cli, home: Path, source: Path
) -> None:
    _indexed(cli, home, source)
    with get_instance(load_settings(home)) as instance:
        runs = instance.run_storage
        events = instance.event_log_storage
        assert type(runs) is storage.PooledSqliteRunStorage
        assert type(events) is storage.BatchedSqliteEventLogStorage
        (run,) = instance.get_runs()
        assert instance.get_run_by_id(run.run_id) is not None
        with runs.connect() as first, runs.connect() as second:  # the pool lends two at once
            assert first.connection.dbapi_connection is not second.connection.dbapi_connection
        with runs.connect() as again:
            assert again.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL

        assert events.get_logs_for_run(run.run_id)  # the run's shard, read back
        engine = events._engines[run.run_id]
        assert events.get_logs_for_run(run.run_id)
        assert events._engines[run.run_id] is engine
        with events.index_connection() as connection:
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 1
        assert events.has_table("dynamic_partitions")
        assert "dynamic_partitions" in events._tables
        assert not events.has_table("no_such_table")


def test_a_new_run_shard_is_a_write_ahead_log_and_few_engines_stay_open(
    cli: Cli, home: Path, source: Path
) -> None:
    _indexed(cli, home, source)
    with get_instance(load_settings(home)) as instance:
        events = instance.event_log_storage
        shards = [f"shard-{number}" for number in range(storage._KEPT_ENGINES + 3)]
        for shard in shards:
            with events.run_connection(shard) as connection:
                connection.exec_driver_sql("SELECT 1")
        assert len(events._engines) == storage._KEPT_ENGINES
        assert shards[-1] in events._engines and shards[0] not in events._engines
        with sqlite3.connect(events.path_for_shard(shards[0])) as connection:
            assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        with events.run_connection(shards[0]) as connection:  # made again when needed
            connection.exec_driver_sql("SELECT 1")
        with events.index_connection() as connection:
            connection.exec_driver_sql("SELECT 1")
        assert INDEX_SHARD_NAME in events._engines
        assert len(events._engines) == storage._KEPT_ENGINES
    assert events._engines == {}  # disposed with the instance
