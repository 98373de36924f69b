"""`rag-pipeline ui`: the Dagster UI with its daemon, and the folders watched meanwhile."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import AssetKey

from rag_pipeline.config import load_settings
from rag_pipeline.defs.direct import TRIGGER_METADATA
from rag_pipeline.defs.instance import get_instance
from rag_pipeline_tests.conftest import Cli
from rag_pipeline_tests.processes import answers, free_port, processes_of, within


@pytest.mark.slow
@pytest.mark.daemon  # `ui` starts dagster dev: a daemon, a webserver, a code server
def test_ui_indexes_a_dropped_file_as_it_settles_shows_it_in_dagster_and_stops_whole(
    cli: Cli, home: Path, source: Path, tmp_path: Path
) -> None:
    assert cli("index", "--home", home, "--source", source).code == 0
    port = free_port()
    environment = os.environ | {
        "RAG_PIPELINE_INDEXING__WATCH_SETTLE_MS": "500",
        "RAG_PIPELINE_INDEXING__SENSOR_SECONDS": "3600",  # not the sensor's tick: the watcher
    }
    command = [sys.executable, "-m", "rag_pipeline.cli", "ui", "--home", str(home)]
    with (tmp_path / "ui.log").open("wb") as log:
        ui = subprocess.Popen(
            [*command, "--port", str(port)], env=environment, stdout=log, stderr=log
        )
        try:
            within(180, "the Dagster UI up", lambda: answers(f"http://127.0.0.1:{port}/"))
            time.sleep(2)  # the watcher's first pass and its watch set up
            (source / "heron.md").write_text("# Herons\n\nHerons stand still in water.\n")
            seconds = within(
                30,
                "the dropped file searchable",
                lambda: '"docs/heron.md"' in cli("query", "herons", "--home", home, "--json").out,
            )
            assert seconds < 30

            def materialized() -> dict[str, str]:
                with get_instance(load_settings(home)) as instance:
                    event = instance.get_latest_materialization_event(AssetKey("qdrant_points"))
                shown = event.asset_materialization if event else None
                if shown is None or shown.partition != "docs/heron.md":
                    return {}
                return {name: value.value for name, value in shown.metadata.items()}

            within(30, "shown in Dagster", lambda: bool(materialized()))
            assert materialized()[TRIGGER_METADATA] == "watch"
            assert processes_of(home), "the UI's processes carry the home"
        finally:
            ui.send_signal(signal.SIGTERM)
            code = ui.wait(timeout=10)
    assert code == 0, (tmp_path / "ui.log").read_text(errors="replace")[-3000:]
    within(10, "every process of the UI gone", lambda: not processes_of(home))
