"""Live folders: `rag-pipeline watch` indexes a change once it settles."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import AssetKey, AssetRecordsFilter, EventLogRecord

from rag_pipeline.catalog import Catalog
from rag_pipeline.cli import main
from rag_pipeline.config import Settings, load_settings
from rag_pipeline.defs.direct import TRIGGER_METADATA
from rag_pipeline.defs.instance import get_instance
from rag_pipeline.indexing.direct import unreported_runs_folder
from rag_pipeline.orchestration.incremental import IndexOutcome
from rag_pipeline.orchestration.watch import watch
from rag_pipeline.workspaces import Workspace
from rag_pipeline_tests.conftest import Cli
from rag_pipeline_tests.processes import within

SETTLE_MS = 700
RESCAN_SECONDS = 4.0
# The watcher's passes and the settling of each change are waited for: seconds.
pytestmark = pytest.mark.slow


@pytest.fixture
def watching(home: Path, source: Path) -> Iterator[tuple[Settings, list[IndexOutcome]]]:
    """The watcher running on ``source`` in a thread: (settings, each pass's outcome)."""
    assert main(["index", "--home", str(home), "--source", str(source)]) == 0
    settings = load_settings(
        home, indexing={"watch_settle_ms": SETTLE_MS, "watch_rescan_seconds": RESCAN_SECONDS}
    )
    passes: list[IndexOutcome] = []
    stop = threading.Event()

    def record(_: Workspace, outcome: IndexOutcome) -> None:
        passes.append(outcome)

    watcher = threading.Thread(target=watch, args=(settings, stop, record))
    watcher.start()
    within(30, "the first pass", lambda: bool(passes))
    time.sleep(1)  # and the watch set up after it
    try:
        yield settings, passes
    finally:
        stop.set()
        watcher.join(timeout=30)
        assert not watcher.is_alive()


def _indexed(settings: Settings) -> dict[str, int]:
    """doc_id -> chunks of the indexed documents."""
    with Catalog(settings) as catalog:
        records = catalog.live_documents()
    return {doc_id: r.chunks for doc_id, r in records.items() if r.state == "indexed"}


def _drop_a_note(settings: Settings, source: Path) -> None:
    """heron.md written into the watched folder, and waited for until it is searchable."""
    (source / "heron.md").write_text("# Herons\n\nHerons stand still in water.\n", "utf-8")
    within(30, "heron.md searchable", lambda: "docs/heron.md" in _indexed(settings))


def test_a_dropped_file_is_indexed_once_it_settles_and_a_deleted_one_goes(
    watching: tuple[Settings, list[IndexOutcome]], source: Path
) -> None:
    settings, passes = watching
    _drop_a_note(settings, source)

    # Written in pieces, each sooner than the settle time after the last: indexed once, whole.
    before = len(passes)
    with (source / "owls.md").open("w", encoding="utf-8") as note:
        for piece in ("# Owls\n\n", "Owls hunt at night. ", "Their flight is silent.\n"):
            note.write(piece)
            note.flush()
            time.sleep(SETTLE_MS / 1000 / 3)

    def indexing_owls() -> list[IndexOutcome]:
        return [p for p in passes[before:] if "docs/owls.md" in p.diff.to_process]

    within(30, "a pass indexing owls.md", lambda: bool(indexing_owls()))
    time.sleep(3 * SETTLE_MS / 1000)  # time enough for a second pass, were one coming
    assert len(indexing_owls()) == 1 and "docs/owls.md" in _indexed(settings)
    # The event's path compared alone: the folder was not walked, heron.md not looked at.
    assert indexing_owls()[0].diff.partial and set(indexing_owls()[0].diff.files) == {
        "docs/owls.md"
    }
    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        assert live is not None
        rows = [row for row in catalog.chunk_rows(live.name) if row["doc_id"] == "docs/owls.md"]
    assert "silent" in " ".join(row["text"] for row in rows)

    (source / "heron.md").unlink()
    within(30, "heron.md gone", lambda: "docs/heron.md" not in _indexed(settings))


def _reported_metadata(settings: Settings, asset: str, doc_id: str) -> dict[str, object]:
    """The metadata of the document's latest materialization of ``asset``, once the watcher
    has reported it (its pass's record is written a moment after its commit)."""
    records: list[EventLogRecord] = []
    with get_instance(settings) as instance:

        def reported() -> bool:
            records[:] = instance.fetch_materializations(
                AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[doc_id]), limit=1
            ).records
            return bool(records)

        within(30, "the materialization reported", reported)
    metadata = records[0].asset_materialization.metadata if records[0].asset_materialization else {}
    return {key: value.value for key, value in metadata.items()}


def test_a_note_moved_within_the_watched_folder_keeps_its_vectors_and_one_written_again_returns(
    watching: tuple[Settings, list[IndexOutcome]], source: Path, tmp_path: Path
) -> None:
    settings, _ = watching
    _drop_a_note(settings, source)
    (source / "birds").mkdir()
    (source / "heron.md").rename(source / "birds" / "heron.md")
    within(
        30,
        "the note found at its new place only",
        lambda: (
            set(_indexed(settings)) & {"docs/heron.md", "docs/birds/heron.md"}
            == {"docs/birds/heron.md"}
        ),
    )
    dense = _reported_metadata(settings, "dense_embeddings", "docs/birds/heron.md")
    assert dense["embedded"] == 0 and dense["cached"] == dense["chunks"] > 0

    # Removed, then written again with the same content: searchable again.
    moved = source / "birds" / "heron.md"
    text = moved.read_text("utf-8")
    moved.unlink()
    within(30, "the moved note gone", lambda: "docs/birds/heron.md" not in _indexed(settings))
    moved.write_text(text, "utf-8")
    within(30, "the note back", lambda: "docs/birds/heron.md" in _indexed(settings))

    # The folder moved out of the watched one (one event, for the folder): its note goes.
    (source / "birds").rename(tmp_path / "birds")
    within(30, "the folder's note gone", lambda: "docs/birds/heron.md" not in _indexed(settings))


def test_a_change_no_event_told_of_is_found_by_the_rescan(
    watching: tuple[Settings, list[IndexOutcome]], source: Path, tmp_path: Path
) -> None:
    """Written through a hard link outside the watched folder, the change sends the folder's
    watch no event (as a change made by another machine on a network mount)."""
    settings, _ = watching
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "crane.md").write_text("# Cranes\n\nCranes dance in spring.\n", "utf-8")
    os.link(elsewhere / "crane.md", source / "crane.md")
    within(30, "crane.md searchable", lambda: "docs/crane.md" in _indexed(settings))
    with (elsewhere / "crane.md").open("a", encoding="utf-8") as note:
        note.write("Cranes fly south in autumn, calling loudly.\n")

    def says_autumn() -> bool:
        with Catalog(settings) as catalog:
            live = catalog.live_collection()
            rows = catalog.chunk_rows(live.name) if live else []
            return any("autumn" in row["text"] for row in rows if row["doc_id"] == "docs/crane.md")

    time.sleep(RESCAN_SECONDS / 2)  # were an event sent, its pass would be done by now
    assert not says_autumn()
    within(RESCAN_SECONDS + 30, "the rescan's pass", says_autumn)


def test_another_process_gets_the_store_the_watcher_keeps_open_between_passes(
    watching: tuple[Settings, list[IndexOutcome]], source: Path
) -> None:
    settings, _ = watching
    _drop_a_note(settings, source)
    command = ["query", "--home", str(settings.home), "--json", "herons stand still"]
    query = subprocess.run(
        [sys.executable, "-m", "rag_pipeline.cli", *command],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert query.returncode == 0, query.stderr[-3000:]
    assert "docs/heron.md" in query.stdout
    # The watcher opens it again for its next pass.
    (source / "owls.md").write_text("# Owls\n\nOwls hunt at night.\n", "utf-8")
    within(30, "owls.md searchable", lambda: "docs/owls.md" in _indexed(settings))


def test_a_pass_without_dagster_is_shown_in_dagster_while_the_watcher_waits(
    watching: tuple[Settings, list[IndexOutcome]], source: Path
) -> None:
    """Reported as it happens, so that a burst's run does not first report a backlog."""
    settings, _ = watching
    _drop_a_note(settings, source)
    shown = _reported_metadata(settings, "qdrant_points", "docs/heron.md")
    assert shown[TRIGGER_METADATA] == "watch"
    # The fixture's `index` run without Dagster, reported as well.
    within(
        30, "every run reported", lambda: not list(unreported_runs_folder(settings).glob("*.json"))
    )


def test_the_watch_command_stops_on_sigterm_after_a_dagster_run(
    cli: Cli, home: Path, source: Path, tmp_path: Path
) -> None:
    """A Dagster run in the watcher's process leaves SIGTERM raising KeyboardInterrupt; the
    watcher must still stop, as a service manager asks it to."""
    assert cli("index", "--home", home, "--source", source).code == 0
    environment = os.environ | {
        "RAG_PIPELINE_INDEXING__WATCH_SETTLE_MS": str(SETTLE_MS),
        "RAG_PIPELINE_INDEXING__DIRECT_DOCUMENTS": "0",  # every pass a Dagster run
    }
    with (tmp_path / "watch.log").open("wb") as log:
        watcher = subprocess.Popen(
            [sys.executable, "-m", "rag_pipeline.cli", "watch", "--home", str(home)],
            env=environment,
            stdout=log,
            stderr=log,
        )
        try:
            time.sleep(5)  # the first pass, and the watch set up after it
            (source / "heron.md").write_text("# Herons\n\nHerons stand still in water.\n")
            settings = load_settings(home)
            within(60, "heron.md searchable", lambda: "docs/heron.md" in _indexed(settings))
        finally:
            watcher.send_signal(signal.SIGTERM)
            code = watcher.wait(timeout=60)
    assert code == 0, (tmp_path / "watch.log").read_text(errors="replace")[-3000:]
