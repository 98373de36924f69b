"""The Dagster internals of ``defs/compat.py``, pinned: the batched SQLite event log, the
per-partition metadata, the creation of queued runs, and the storage classes it re-exports."""

from pathlib import Path

import pytest
from dagster import AssetKey

from rag_pipeline.config import load_settings
from rag_pipeline.defs import compat
from rag_pipeline.defs.instance import get_instance
from rag_pipeline_tests.conftest import Cli
from rag_pipeline_tests.defs.test_definitions import PIPELINE


def test_batched_events_in_several_statements_record_every_partition(
    cli: Cli, home: Path, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compat, "_EVENTS_PER_STATEMENT", 2)
    monkeypatch.setenv("RAG_PIPELINE_INDEXING__DIRECT_DOCUMENTS", "0")  # a Dagster run
    for number in range(5):
        (source / f"note-{number}.md").write_text(f"# Note {number}\n\nText {number}.")
    result = cli("index", "--home", home, "--source", source)
    assert result.code == 0 and "added 5" in result.out
    assert "storing event batch" not in result.err  # Dagster's fallback to one-by-one writes
    documents = {f"docs/note-{number}.md" for number in range(5)}
    with get_instance(load_settings(home)) as instance:
        assert type(instance.event_log_storage) is compat.BatchedSqliteEventLogStorage
        for asset in PIPELINE:
            assert instance.get_materialized_partitions(AssetKey(asset)) == documents, asset
            planned = instance.get_latest_planned_materialization_info(
                AssetKey(asset), partition="docs/note-4.md"
            )
            assert planned is not None, asset


def test_the_dagster_internals_that_queueing_runs_uses_are_as_written() -> None:
    """compat.py creates runs as `dagster job launch` does; defs/queue.py reads the queue
    daemon's heartbeat; defs/runs.py frees a dead run's concurrency slots."""
    import inspect

    from dagster._cli.job import _create_run
    from dagster._core.storage.event_log.base import EventLogStorage
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import (
        QueuedRunCoordinatorDaemon,
    )

    from rag_pipeline.defs.queue import QUEUE_DAEMON

    assert list(inspect.signature(_create_run).parameters) == [
        "instance",
        "code_location",
        "remote_repo",
        "remote_job",
        "run_config",
        "tags",
        "op_selection",
        "run_id",
    ]
    assert QueuedRunCoordinatorDaemon.daemon_type() == QUEUE_DAEMON
    assert callable(EventLogStorage.free_concurrency_slots_for_run)


def test_the_instance_configuration_names_dagsters_storage_through_compat(home: Path) -> None:
    from rag_pipeline.defs.instance import instance_config

    config = instance_config(load_settings(home))
    named = [entry for entry in config.values() if isinstance(entry, dict) and "module" in entry]
    assert named and {entry["module"] for entry in named} == {compat.__name__}
    assert all(hasattr(compat, entry["class"]) for entry in named)
    with get_instance(load_settings(home)) as instance:
        assert type(instance.run_storage).__name__ == "SqliteRunStorage"


def test_the_step_metadata_accumulator_compat_extends_is_as_written() -> None:
    import inspect

    from dagster._core.execution.context.metadata_logging import OutputMetadataAccumulator
    from dagster._core.execution.context.system import StepExecutionContext

    assert list(inspect.signature(OutputMetadataAccumulator).parameters) == ["per_output_metadata"]
    assert "_metadata_accumulator" in inspect.getsource(StepExecutionContext.__init__)
