"""The SQLite event log that writes a run's per-document events in batches."""

from pathlib import Path

import pytest
from dagster import AssetKey

from rag_pipeline.config import load_settings
from rag_pipeline.defs import storage
from rag_pipeline.defs.instance import get_instance
from rag_pipeline_tests.conftest import Cli
from rag_pipeline_tests.defs.test_definitions import PIPELINE


def test_batched_events_in_several_statements_record_every_partition(
    cli: Cli, home: Path, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage, "_EVENTS_PER_STATEMENT", 2)
    monkeypatch.setenv("RAG_PIPELINE_INDEXING__DIRECT_DOCUMENTS", "0")  # a Dagster run
    for number in range(5):
        (source / f"note-{number}.md").write_text(f"# Note {number}\n\nText {number}.")
    result = cli("index", "--home", home, "--source", source)
    assert result.code == 0 and "added 5" in result.out
    assert "storing event batch" not in result.err  # Dagster's fallback to one-by-one writes
    documents = {f"docs/note-{number}.md" for number in range(5)}
    with get_instance(load_settings(home)) as instance:
        assert type(instance.event_log_storage) is storage.BatchedSqliteEventLogStorage
        for asset in PIPELINE:
            assert instance.get_materialized_partitions(AssetKey(asset)) == documents, asset
            planned = instance.get_latest_planned_materialization_info(
                AssetKey(asset), partition="docs/note-4.md"
            )
            assert planned is not None, asset
