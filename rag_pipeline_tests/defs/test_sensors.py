from pathlib import Path

import pytest
from dagster import RunRequest, SkipReason, build_sensor_context

from rag_pipeline.config import load_settings
from rag_pipeline.defs.instance import get_instance
from rag_pipeline.defs.partitions import DOCUMENTS, RANGE_END_TAG, RANGE_START_TAG
from rag_pipeline.defs.sensors import watched_folders_sensor
from rag_pipeline_tests.conftest import Cli


@pytest.fixture
def watched(home: Path, source: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAG_PIPELINE_HOME", str(home))
    load_settings(home).remember_sources([source])
    return source


def test_new_files_become_partitions_and_one_run_request(home: Path, watched: Path) -> None:
    for name in ("a.md", "b.md", "c.md"):
        (watched / name).write_text(f"# {name}\n\nSome text about {name}.", encoding="utf-8")
    with get_instance(load_settings(home)) as instance:
        result = watched_folders_sensor(build_sensor_context(instance=instance))
        assert isinstance(result, RunRequest)
        assert (
            result.tags[RANGE_START_TAG] == "docs/a.md"
            and result.tags[RANGE_END_TAG] == "docs/c.md"
        )
        assert sorted(instance.get_dynamic_partitions(DOCUMENTS)) == [
            "docs/a.md",
            "docs/b.md",
            "docs/c.md",
        ]


def test_nothing_to_do_once_the_folder_is_indexed(cli: Cli, home: Path, watched: Path) -> None:
    (watched / "a.md").write_text("# A\n\nText.", encoding="utf-8")
    cli("index", "--home", home)
    with get_instance(load_settings(home)) as instance:
        result = watched_folders_sensor(build_sensor_context(instance=instance))
    assert isinstance(result, SkipReason)
