import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    SkipReason,
    build_sensor_context,
)

from rag_pipeline.config import load_settings
from rag_pipeline.defs.instance import get_instance
from rag_pipeline.defs.partitions import DOCUMENTS, RANGE_END_TAG, RANGE_START_TAG
from rag_pipeline.defs.runs import WORKSPACE_TAG, index_documents_job
from rag_pipeline.defs.sensors import watched_folders_sensor
from rag_pipeline.indexing.direct import unreported_runs
from rag_pipeline.locking import HomeLocks, run_lock
from rag_pipeline.workspaces import create_workspace
from rag_pipeline_tests.conftest import Cli


@pytest.fixture
def watched(home: Path, source: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAG_PIPELINE_HOME", str(home))
    load_settings(home).remember_sources([source])
    return source


def test_the_sensor_reports_what_index_did_without_dagster_unless_a_run_is_active(
    cli: Cli, home: Path, watched: Path
) -> None:
    (watched / "a.md").write_text("# A\n\nOtters float on their backs.", encoding="utf-8")
    assert "added 1" in cli("index", "--home", home).out  # a small change: no Dagster run
    settings = load_settings(home)
    with get_instance(settings) as instance:
        waiting = DagsterRun(
            job_name=index_documents_job.name,
            status=DagsterRunStatus.NOT_STARTED,
            tags={WORKSPACE_TAG: settings.workspace},
        )
        instance.add_run(waiting)  # its partition range must not move
        assert isinstance(
            watched_folders_sensor(build_sensor_context(instance=instance)), SkipReason
        )
        assert len(list(unreported_runs(settings))) == 1
        instance.delete_run(waiting.run_id)
        assert isinstance(
            watched_folders_sensor(build_sensor_context(instance=instance)), SkipReason
        )
        assert list(unreported_runs(settings)) == []
        assert instance.get_dynamic_partitions(DOCUMENTS) == ["docs/a.md"]
        # A tick finding the folders as the last pass left them leaves the partitions alone.
        assert isinstance(
            watched_folders_sensor(build_sensor_context(instance=instance)), SkipReason
        )
        assert instance.get_dynamic_partitions(DOCUMENTS) == ["docs/a.md"]
        [record] = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey("qdrant_points"), asset_partitions=["docs/a.md"]),
            limit=10,
        ).records
    assert record.asset_materialization.metadata["points"].value == 1


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


def test_a_large_change_set_becomes_runs_of_at_most_run_documents_with_stable_keys(
    home: Path, watched: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_PIPELINE_INDEXING__RUN_DOCUMENTS", "2")
    for number in range(5):
        (watched / f"n{number}.md").write_text(f"# N{number}\n\nText.", encoding="utf-8")
    with get_instance(load_settings(home)) as instance:
        first = watched_folders_sensor(build_sensor_context(instance=instance))
        again = watched_folders_sensor(build_sensor_context(instance=instance))
        partitions = instance.get_dynamic_partitions(DOCUMENTS)
    assert isinstance(first, list) and isinstance(again, list)
    ranges = [
        partitions[
            partitions.index(r.tags[RANGE_START_TAG]) : partitions.index(r.tags[RANGE_END_TAG]) + 1
        ]
        for r in first
    ]
    assert [len(documents) for documents in ranges] == [2, 2, 1]
    assert sorted(key for documents in ranges for key in documents) == [
        f"docs/n{number}.md" for number in range(5)
    ]
    keys = [request.run_key for request in first]
    assert len(set(keys)) == 3 and None not in keys
    assert [request.run_key for request in again] == keys  # a tick asked twice: launched once


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
        with run_lock(HomeLocks(home), run_id):  # this process: it is still recording its end
            pass
        assert fail_abandoned_runs(instance, load_settings(home)) == []


def test_a_run_holding_its_lock_is_not_abandoned_while_another_died(home: Path) -> None:
    from rag_pipeline.defs.runs import fail_abandoned_runs

    with get_instance(load_settings(home)) as instance:
        living, dead = _started_run(instance), _started_run(instance)
        _hold_run_lock_in_a_process_that_ends(home, dead)
        with run_lock(HomeLocks(home), living):
            assert fail_abandoned_runs(instance, load_settings(home)) == [dead]
        assert instance.get_run_by_id(living).status == DagsterRunStatus.STARTED


def _hold_run_lock_in_a_process_that_ends(home: Path, run_id: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path\n"
            "from rag_pipeline.locking import HomeLocks, run_lock\n"
            "with run_lock(HomeLocks(Path(sys.argv[1])), sys.argv[2]): pass",
            str(home),
            run_id,
        ],
        check=True,
    )


def test_a_run_in_another_container_is_judged_by_when_it_let_go_not_by_its_process_id(
    home: Path,
) -> None:
    from rag_pipeline.defs.runs import fail_abandoned_runs

    with get_instance(load_settings(home)) as instance:
        run_id = _started_run(instance)
        with run_lock(HomeLocks(home), run_id):
            pass
        lock_file = home / "run-locks" / f"{run_id}.lock"
        # As a run in another container writes it: its process id means nothing here (this
        # one is of no process), and it let go a moment ago, so it is still recording its end.
        lock_file.write_text("4194000@run-container/pid:[4026532999]")
        assert fail_abandoned_runs(instance, load_settings(home)) == []
        an_hour_ago = time.time() - 3600
        os.utime(lock_file, (an_hour_ago, an_hour_ago))
        assert fail_abandoned_runs(instance, load_settings(home)) == [run_id]


def test_another_workspaces_dead_run_is_marked_failed_too(home: Path) -> None:
    """The store's concurrency pool is the instance's: a dead run of any workspace holds it."""
    from rag_pipeline.defs.runs import fail_abandoned_runs, index_documents_job

    acme = create_workspace(load_settings(home), "Acme")
    with get_instance(load_settings(home)) as instance:
        run = DagsterRun(
            job_name=index_documents_job.name,
            status=DagsterRunStatus.STARTED,
            tags={WORKSPACE_TAG: acme.id},
        )
        instance.add_run(run)
        _hold_run_lock_in_a_process_that_ends(acme.settings.home, run.run_id)
        assert fail_abandoned_runs(instance, load_settings(home)) == [run.run_id]


def test_a_run_whose_process_died_after_taking_the_lock_is_marked_failed(home: Path) -> None:
    from rag_pipeline.defs.runs import fail_abandoned_runs

    with get_instance(load_settings(home)) as instance:
        run_id = _started_run(instance)
        _hold_run_lock_in_a_process_that_ends(home, run_id)
        assert fail_abandoned_runs(instance, load_settings(home)) == [run_id]
        assert instance.get_run_by_id(run_id).status == DagsterRunStatus.FAILURE


@pytest.mark.parametrize("failed_by_dagster", [True, False], ids=["failed", "left-started"])
def test_a_dead_runs_store_slot_is_freed_by_the_sensor_while_a_waiting_run_holds_the_lock(
    home: Path, watched: Path, failed_by_dagster: bool
) -> None:
    """A run died writing the store, holding the store's one slot; the next run waits for the
    slot holding the workspace's indexing lock, so the sensor cannot plan. Its tick still marks
    the dead run failed (unless Dagster's code server did, seeing its process exit) and gives
    the slot back, rather than leaving every run waiting for run monitoring's next poll."""
    from rag_pipeline.defs.assets import VECTOR_STORE_POOL

    with get_instance(load_settings(home)) as instance:
        storage = instance.event_log_storage
        storage.set_concurrency_slots(VECTOR_STORE_POOL, 1)  # as the instance's default pool limit
        dead, living = _started_run(instance), _started_run(instance)
        _hold_run_lock_in_a_process_that_ends(home, dead)
        for run_id in (dead, living):
            storage.claim_concurrency_slot(VECTOR_STORE_POOL, run_id, "qdrant_points")
        claimed = storage.get_concurrency_info(VECTOR_STORE_POOL).claimed_slots
        assert [slot.run_id for slot in claimed] == [dead]  # one writer; the living run waits
        if failed_by_dagster:
            instance.report_run_failed(instance.get_run_by_id(dead), "its process exited")
        with run_lock(HomeLocks(home), living):
            result = watched_folders_sensor(build_sensor_context(instance=instance))
            assert isinstance(result, SkipReason)
            assert "in progress" in (result.skip_message or "")
        assert instance.get_run_by_id(dead).status == DagsterRunStatus.FAILURE
        claim = storage.claim_concurrency_slot(VECTOR_STORE_POOL, living, "qdrant_points")
        assert claim.is_claimed  # the waiting run's next try takes it


def test_a_run_no_plan_made_waits_for_the_runs_of_a_plan_which_run_side_by_side(
    home: Path,
) -> None:
    from rag_pipeline.locking import LockTimeout

    with (
        run_lock(HomeLocks(home), "planned-1"),
        run_lock(HomeLocks(home), "planned-2"),
        pytest.raises(LockTimeout),
        run_lock(HomeLocks(home), "from-the-ui", alone=True, timeout_seconds=0.2),
    ):
        pass


@pytest.mark.parametrize("queued", [True, False], ids=["parallel", "in-process"])
def test_index_refuses_to_plan_while_a_run_of_the_workspace_is_in_progress(
    cli: Cli, home: Path, watched: Path, queued: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A change indexed without a Dagster run moves no partition: it waits only for the
    # indexing lock that running runs hold.
    monkeypatch.setenv("RAG_PIPELINE_INDEXING__DIRECT_DOCUMENTS", "0")
    (watched / "a.md").write_text("# A\n\nText.", encoding="utf-8")
    with get_instance(load_settings(home)) as instance:
        instance.add_run(
            DagsterRun(
                job_name="index_documents",
                status=DagsterRunStatus.STARTED,  # just now: not abandoned
                tags={WORKSPACE_TAG: "default"},
            )
        )
    result = cli("index", "--home", home, *(["--parallel", "2"] if queued else []))
    assert result.code != 0
    assert "is started: nothing is planned while a run of the workspace" in result.err
