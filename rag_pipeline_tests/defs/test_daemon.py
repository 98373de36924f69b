"""The sensor with a real ``dagster-daemon`` launching real runs: indexing converges by itself.

The daemon evaluates the sensor every second here (``indexing.sensor_seconds``), and each run
it requests is launched in a process of its own, as in a deployment; several at a time when a
change set is cut into runs (``indexing.run_documents``, ``dagster.max_concurrent_runs``).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, AssetRecordsFilter, DagsterRunStatus, RunRecord, RunsFilter

from rag_pipeline.config import load_settings
from rag_pipeline.defs.instance import get_instance, write_instance_config
from rag_pipeline.defs.queue import start_daemon
from rag_pipeline.defs.runs import index_documents_job
from rag_pipeline.processes import stop_process_group
from rag_pipeline_tests.conftest import POSTGRES_URL, Cli
from rag_pipeline_tests.index_state import inconsistencies, live_records
from rag_pipeline_tests.processes import within

_KILLED_RUN_MARKER = "kill-one-run"
CLI = [sys.executable, "-m", "rag_pipeline.cli"]


def _eventually(what: str, condition: Callable[[], bool], timeout: float = 240.0) -> None:
    within(timeout, what, condition)  # the daemon's runs take minutes on a loaded machine


@contextmanager
def _running_daemon(
    home: Path, source: Path, tmp_path: Path, environment: dict[str, str]
) -> Iterator[None]:
    """A daemon watching ``source`` for ``home``, with ``environment`` added to its own."""
    settings = load_settings(home).remember_sources([source])
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(
        yaml.safe_dump({"load_from": [{"python_module": "rag_pipeline.definitions"}]})
    )
    environment = {
        **os.environ,
        "DAGSTER_HOME": str(write_instance_config(settings)),
        "RAG_PIPELINE_HOME": str(home),
        "RAG_PIPELINE_INDEXING__SENSOR_SECONDS": "1",
        **environment,
    }
    with (tmp_path / "daemon.log").open("w") as log:
        process = start_daemon(workspace, environment, log)
        try:
            yield
        finally:
            stop_process_group(process)


@pytest.fixture
def dagster_daemons() -> Iterator[Callable[[int], list[int]]]:
    """For a test that starts dagster-daemons (``index --parallel`` does too): the daemons a
    process started (:func:`_daemons_of`). None that this process started outlives the test."""
    yield _daemons_of
    _eventually("this process's daemons stopped", lambda: _daemons_of(os.getpid()) == [], 60)


@pytest.fixture
def daemon(
    home: Path,
    source: Path,
    tmp_path: Path,
    dagster_daemons: Callable[[int], list[int]],
    kill_at: Callable[..., dict[str, str]],
) -> Iterator[Path]:
    """A daemon watching ``source`` for ``home``; one run it launches dies at its first upsert
    while the file ``<tmp>/kill-one-run`` exists."""
    with _running_daemon(
        home,
        source,
        tmp_path,
        {
            "RAG_PIPELINE_INDEXING__RETRY_SECONDS": "2",
            **kill_at("after-upsert", once=tmp_path / _KILLED_RUN_MARKER),
        },
    ):
        yield tmp_path


def _state(home: Path, doc_id: str) -> tuple[str | None, str | None]:
    """(state, live version) of a document, (None, None) while it is unknown."""
    record = live_records(home).get(doc_id) if (home / "catalog").exists() else None
    return (record.state, record.indexed_version) if record else (None, None)


def _runs(home: Path, status: DagsterRunStatus) -> int:
    with get_instance(load_settings(home)) as instance:
        return len(
            instance.get_runs(RunsFilter(job_name=index_documents_job.name, statuses=[status]))
        )


def test_the_sensor_indexes_a_file_changed_back_to_an_earlier_version(
    home: Path, source: Path, daemon: Path
) -> None:
    note = source / "note.md"
    note.write_text("# Note\n\nVersion A of the note.", encoding="utf-8")
    _eventually("A indexed", lambda: _state(home, "docs/note.md")[0] == "indexed")
    version_a = _state(home, "docs/note.md")[1]
    note.write_text("# Note\n\nVersion B of the note, longer.", encoding="utf-8")
    _eventually("B indexed", lambda: _state(home, "docs/note.md")[1] not in (None, version_a))
    note.write_text("# Note\n\nVersion A of the note.", encoding="utf-8")
    _eventually("A again", lambda: _state(home, "docs/note.md")[1] == version_a)
    assert inconsistencies(home) == []


def test_a_failed_document_is_retried_by_the_sensor_until_it_indexes(
    home: Path, source: Path, daemon: Path
) -> None:
    (source / "report.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << broken")
    _eventually("failed", lambda: _state(home, "docs/report.pdf")[0] == "failed")
    # Retried after its backoff with the file unchanged: the attempts are counted.
    _eventually("retried", lambda: live_records(home)["docs/report.pdf"].attempts >= 2, timeout=120)
    assert "not a readable PDF" in (live_records(home)["docs/report.pdf"].error or "")
    (source / "report.pdf").unlink()
    (source / "report.md").write_text("# Report\n\nNow readable.", encoding="utf-8")
    _eventually("gone and replaced", lambda: set(live_records(home)) == {"docs/report.md"})
    assert _runs(home, DagsterRunStatus.FAILURE) == 0  # failing documents fail no run


def test_a_run_killed_mid_way_is_marked_failed_and_its_documents_are_indexed_again(
    home: Path, source: Path, daemon: Path
) -> None:
    (daemon / _KILLED_RUN_MARKER).touch()
    for number in range(3):
        (source / f"n{number}.md").write_text(f"# N{number}\n\nText {number}.", encoding="utf-8")
    _eventually("the kill", lambda: not (daemon / _KILLED_RUN_MARKER).exists())
    _eventually("the dead run failed", lambda: _runs(home, DagsterRunStatus.FAILURE) == 1)
    _eventually(
        "all indexed",
        lambda: (
            {d for d, r in live_records(home).items() if r.state == "indexed"}
            == {f"docs/n{number}.md" for number in range(3)}
        ),
    )
    assert inconsistencies(home) == []
    # The run that indexed them records its success a moment after its last commit.
    _eventually("no run left started", lambda: _runs(home, DagsterRunStatus.STARTED) == 0)


def _run_records(home: Path) -> list[RunRecord]:
    with get_instance(load_settings(home)) as instance:
        return list(instance.get_run_records(RunsFilter(job_name=index_documents_job.name)))


def _most_at_once(records: list[RunRecord]) -> int:
    """The most runs in progress at one moment, from their start and end times."""
    moments = sorted(
        [(record.start_time, 1) for record in records if record.start_time]
        + [(record.end_time, -1) for record in records if record.end_time]
    )
    running = most = 0
    for _, change in moments:  # an end sorts before a start at the same moment
        running += change
        most = max(most, running)
    return most


def _store_writes_overlap(home: Path, records: list[RunRecord]) -> bool:
    """Whether two runs' ``qdrant_points`` steps (the embedded store's writes) overlapped."""
    with get_instance(load_settings(home)) as instance:
        windows = sorted(
            (stats.start_time or 0.0, stats.end_time or 0.0)
            for record in records
            for stats in instance.get_run_step_stats(
                record.dagster_run.run_id, step_keys=["qdrant_points"]
            )
        )
    return any(later[0] < earlier[1] for earlier, later in itertools.pairwise(windows))


def _materialized_once_each(home: Path) -> dict[str, int]:
    """How many times each document's ``qdrant_points`` partition was materialized."""
    with get_instance(load_settings(home)) as instance:
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey("qdrant_points")), limit=1000
        ).records
    return dict(Counter(record.partition_key for record in records))


def _notes(source: Path, count: int) -> set[str]:
    for number in range(count):
        (source / f"n{number}.md").write_text(
            f"# Note {number}\n\nHerons, note number {number}.", encoding="utf-8"
        )
    return {f"docs/n{number}.md" for number in range(count)}


@pytest.fixture(params=["sqlite", "postgres"])
def dagster_storage(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[str]:
    """Dagster's storage and the catalog: SQLite in the home, or, as several workers share
    them, a PostgreSQL database of the test's own, whose advisory locks then order the plans
    and the runs, with the stage files in a folder of their own reached through fsspec (the
    role of RAG_PIPELINE_TEST_POSTGRES_URL needs CREATEDB, as .ci/run grants)."""
    if request.param == "sqlite":
        yield "sqlite"
        return
    if not POSTGRES_URL:
        pytest.skip("set RAG_PIPELINE_TEST_POSTGRES_URL to a PostgreSQL database")
    import psycopg2

    name = f"rag_ci_parallel_{uuid.uuid4().hex[:8]}"
    connection = psycopg2.connect(POSTGRES_URL)
    connection.autocommit = True
    connection.cursor().execute(f"CREATE DATABASE {name}")
    url = POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"
    monkeypatch.setenv("RAG_PIPELINE_DAGSTER__POSTGRES_URL", url)
    monkeypatch.setenv("RAG_PIPELINE_CATALOG__URL", url)
    monkeypatch.setenv("RAG_PIPELINE_INDEXING__STAGE_URL", (tmp_path / "shared").as_uri())
    try:
        yield "postgres"
    finally:
        connection.cursor().execute(f"DROP DATABASE {name} WITH (FORCE)")
        connection.close()


@pytest.mark.usefixtures("dagster_daemons")
def test_index_parallel_queues_runs_of_run_documents_at_most_n_at_a_time_each_document_once(
    cli: Cli, home: Path, source: Path, dagster_storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_PIPELINE_INDEXING__RUN_DOCUMENTS", "2")
    documents = _notes(source, 5)
    result = cli("index", "--home", home, "--source", source, "--parallel", "2")
    assert result.code == 0, result.err
    assert "added 5," in result.out
    records = _run_records(home)  # the command started a daemon of its own, and stopped it
    assert len(records) == 3
    assert all(record.dagster_run.status == DagsterRunStatus.SUCCESS for record in records)
    assert _most_at_once(records) <= 2
    assert not _store_writes_overlap(home, records)  # the vector_store pool's one slot
    # The runs' locks and stage files: in the home, or PostgreSQL's and the shared folder's.
    assert (home / "run-locks").exists() == (dagster_storage == "sqlite")
    assert (home / "stages").exists() == (dagster_storage == "sqlite")
    assert _materialized_once_each(home) == dict.fromkeys(sorted(documents), 1)
    assert {d for d, r in live_records(home).items() if r.state == "indexed"} == documents
    assert inconsistencies(home) == []  # points per document = its chunks, none left over
    hits = json.loads(cli("query", "--home", home, "Herons note number 3", "--json").out)
    assert hits[0]["doc_id"] == "docs/n3.md"


@pytest.mark.usefixtures("dagster_daemons")
def test_a_run_killed_among_parallel_runs_leaves_its_documents_to_converge_by_themselves(
    home: Path,
    source: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kill_at: Callable[..., dict[str, str]],
) -> None:
    monkeypatch.setenv("RAG_PIPELINE_DAGSTER__MAX_CONCURRENT_RUNS", "2")
    monkeypatch.setenv("RAG_PIPELINE_INDEXING__RUN_DOCUMENTS", "2")
    marker = tmp_path / _KILLED_RUN_MARKER
    marker.touch()
    with _running_daemon(home, source, tmp_path, kill_at("after-upsert", once=marker)):
        documents = _notes(source, 5)
        _eventually("the kill", lambda: not marker.exists())
        _eventually("the dead run failed", lambda: _runs(home, DagsterRunStatus.FAILURE) == 1)
        _eventually(
            "all indexed",
            lambda: {d for d, r in live_records(home).items() if r.state == "indexed"} == documents,
        )
        _eventually("no run left", lambda: _runs(home, DagsterRunStatus.STARTED) == 0)
    assert inconsistencies(home) == []
    assert _most_at_once(_run_records(home)) <= 2


def test_the_daemon_index_parallel_started_stops_when_the_command_is_killed(
    home: Path, source: Path, dagster_daemons: Callable[[int], list[int]]
) -> None:
    _notes(source, 3)
    command = subprocess.Popen(
        [*CLI, "index", "--home", str(home), "--source", str(source), "--parallel", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _eventually("the command's daemon", lambda: dagster_daemons(command.pid) != [])
        [daemon] = dagster_daemons(command.pid)
        command.kill()
        command.wait()
        _eventually("the orphaned daemon stopped", lambda: not _alive(daemon), timeout=60)
    finally:
        command.kill()


@pytest.mark.usefixtures("dagster_daemons")
def test_ctrl_c_of_index_parallel_cancels_its_runs_and_the_next_index_indexes_the_rest(
    cli: Cli, home: Path, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_PIPELINE_INDEXING__RUN_DOCUMENTS", "1")
    documents = _notes(source, 3)
    command = subprocess.Popen(
        [*CLI, "index", "--home", str(home), "--source", str(source), "--parallel", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=os.environ,
        # As from a terminal: a test run started in the background ignores SIGINT, and its
        # children would inherit that.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        _eventually(
            "a run started, others queued",
            lambda: (
                _runs(home, DagsterRunStatus.STARTED) == 1
                and _runs(home, DagsterRunStatus.QUEUED) >= 1
            ),
        )
        command.send_signal(signal.SIGINT)
        _, err = command.communicate(timeout=120)
    finally:
        command.kill()
    assert command.returncode == 130, err.decode()
    statuses = Counter(record.dagster_run.status for record in _run_records(home))
    assert sum(statuses.values()) == 3
    assert statuses[DagsterRunStatus.CANCELED] >= 1  # what was queued never started
    assert all(status.value in {"SUCCESS", "CANCELED"} for status in statuses)

    result = cli("index", "--home", home)  # nothing left queued or started blocks it
    assert result.code == 0, result.err
    assert {d for d, r in live_records(home).items() if r.state == "indexed"} == documents
    assert inconsistencies(home) == []


def _daemons_of(parent: int) -> list[int]:
    """The ``dagster-daemon`` processes whose parent is ``parent``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command_line = (stat.parent / "cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
        if int(fields[1]) == parent and b"dagster-daemon" in command_line:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    """Running, not ended (a zombie has ended: no one may be there to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
