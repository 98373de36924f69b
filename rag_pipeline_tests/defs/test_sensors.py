import subprocess
import sys
from pathlib import Path

import pytest
from dagster import (
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    SkipReason,
    build_sensor_context,
)

from rag_pipeline.config import load_settings
from rag_pipeline.defs.instance import get_instance
from rag_pipeline.defs.partitions import DOCUMENTS, RANGE_END_TAG, RANGE_START_TAG
from rag_pipeline.defs.runs import WORKSPACE_TAG
from rag_pipeline.defs.sensors import watched_folders_sensor
from rag_pipeline.locking import index_lock
from rag_pipeline.workspaces import create_workspace
from rag_pipeline_tests.conftest import Cli


@pytest.fixture
def watched(home: Path, source: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAG_PIPELINE_HOME", str(home))
    load_settings(home).remember_sources([source])
    return source


def test_new_files_become_partitions_and_one_run_request_per_workspace(
    home: Path, watched: Path
) -> None:
    for name in ("a.md", "b.md", "c.md"):
        (watched / name).write_text(f"# {name}\n\nSome text about {name}.", encoding="utf-8")
    acme = create_workspace(load_settings(home), "Acme")
    (acme.settings.upload_folder / "a.md").write_text("# Acme\n\nText.", encoding="utf-8")
    with get_instance(load_settings(home)) as instance:
        result = watched_folders_sensor(build_sensor_context(instance=instance))
        assert isinstance(result, list)
        by_workspace = {request.tags[WORKSPACE_TAG]: request for request in result}
        assert sorted(by_workspace) == ["acme", "default"]
        default, acme_run = by_workspace["default"], by_workspace["acme"]
        assert (default.tags[RANGE_START_TAG], default.tags[RANGE_END_TAG]) == (
            "docs/a.md",
            "docs/c.md",
        )
        assert (
            acme_run.tags[RANGE_START_TAG] == acme_run.tags[RANGE_END_TAG] == "/acme/uploads/a.md"
        )
        assert acme_run.run_config["resources"]["indexing"]["config"] == {
            "home": str(home),
            "workspace": "acme",
        }
        assert sorted(instance.get_dynamic_partitions(DOCUMENTS)) == [
            "/acme/uploads/a.md",
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


def _started_run(instance: DagsterInstance) -> str:
    from rag_pipeline.defs.runs import index_documents_job

    run = DagsterRun(job_name=index_documents_job.name, status=DagsterRunStatus.STARTED)
    instance.add_run(run)
    return run.run_id


def test_a_run_whose_process_let_go_of_the_lock_but_lives_is_not_abandoned(home: Path) -> None:
    from rag_pipeline.defs.runs import fail_abandoned_runs

    with get_instance(load_settings(home)) as instance:
        run_id = _started_run(instance)
        with index_lock(home, holder=run_id):  # this process: it is still recording its end
            pass
        assert fail_abandoned_runs(instance, load_settings(home)) == []


def test_a_run_whose_process_died_after_taking_the_lock_is_marked_failed(home: Path) -> None:
    from rag_pipeline.defs.runs import fail_abandoned_runs

    with get_instance(load_settings(home)) as instance:
        run_id = _started_run(instance)
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from pathlib import Path\n"
                "from rag_pipeline.locking import index_lock\n"
                "with index_lock(Path(sys.argv[1]), holder=sys.argv[2]): pass",
                str(home),
                run_id,
            ],
            check=True,
        )
        assert fail_abandoned_runs(instance, load_settings(home)) == [run_id]
        assert instance.get_run_by_id(run_id).status == DagsterRunStatus.FAILURE
