"""Dagster's storage on a real PostgreSQL (``.ci/run`` starts one and sets the URL)."""

import uuid
from pathlib import Path

import pytest

from rag_pipeline.config import load_settings
from rag_pipeline.defs.instance import get_instance
from rag_pipeline.defs.partitions import RANGE_START_TAG
from rag_pipeline_tests.conftest import POSTGRES_URL, Cli, needs_postgres
from rag_pipeline_tests.defs.test_definitions import PIPELINE

# Dagster runs on PostgreSQL: seconds each (the quick run keeps the catalog and locks there).
pytestmark = [needs_postgres, pytest.mark.slow]


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of its own (the database is shared by every test), indexed with Dagster's
    storage on PostgreSQL."""
    monkeypatch.setenv("RAG_PIPELINE_DAGSTER__POSTGRES_URL", POSTGRES_URL or "")
    folder = tmp_path / f"pg-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    return folder


def test_a_postgres_backed_instance_runs_a_materialization(
    cli: Cli, home: Path, source: Path
) -> None:
    (source / "note.md").write_text("# Note\n\nPostgres keeps the run history.", encoding="utf-8")
    result = cli("index", "--home", home, "--source", source)
    assert result.code == 0, result.err
    settings = load_settings(home)
    with get_instance(settings) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        doc_id = f"{source.name}/note.md"
        assert doc_id in instance.get_dynamic_partitions("documents")
        materialized = instance.get_materialized_partitions(
            __import__("dagster").AssetKey("qdrant_points")
        )
        assert doc_id in materialized


def test_on_postgresql_a_run_over_many_documents_has_one_planned_event_per_asset(
    cli: Cli, home: Path, source: Path
) -> None:
    from dagster import DagsterEventType

    for number in range(5):
        (source / f"note-{number}.md").write_text(f"# Note {number}\n\nText {number}.")
    assert cli("index", "--home", home, "--source", source).code == 0
    with get_instance(load_settings(home)) as instance:
        [run] = [
            run
            for run in instance.get_runs(limit=20)
            if run.tags.get(RANGE_START_TAG, "").startswith(source.name)
        ]
        planned = instance.all_logs(
            run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION_PLANNED
        )
    # Not one per document and asset, which dagster-postgres would store one row at a time.
    assert sorted(event.dagster_event.asset_key.path[-1] for event in planned) == sorted(PIPELINE)
