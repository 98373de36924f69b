"""Live folders: how long after a file is closed it is searchable under `rag-pipeline watch`.

A home with a few notes indexed; `rag-pipeline watch` runs as its own process. Each of ``--files``
new notes is written and closed, and the time until the catalog has it committed (its points
written: searchable) is taken. Printed against, in the same run, a fresh `rag-pipeline index`
process indexing one new note (what a user without the watcher runs by hand; the Dagster
sensor adds up to ``indexing.sensor_seconds`` of waiting for its tick to that).

    python bench/watch_latency.py [--files 10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import load_settings

CLI = [sys.executable, "-m", "rag_pipeline.cli"]


def note(folder: Path, number: int) -> Path:
    path = folder / f"note-{number:03d}.md"
    path.write_text(f"# Note {number}\n\nThe watcher indexed note {number} quickly.\n", "utf-8")
    return path


def committed(home: Path, doc_id: str) -> bool:
    settings = load_settings(home)
    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        record = catalog.document(live.name, doc_id) if live else None
    return record is not None and record.state == "indexed"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        home, docs = Path(scratch) / "home", Path(scratch) / "docs"
        docs.mkdir()
        for number in range(5):
            note(docs, number)
        subprocess.run([*CLI, "index", "--home", str(home), "--source", str(docs)], check=True)
        started = time.perf_counter()
        note(docs, 100)
        subprocess.run([*CLI, "index", "--home", str(home)], check=True, capture_output=True)
        by_hand = time.perf_counter() - started

        watcher = subprocess.Popen([*CLI, "watch", "--home", str(home)], stdout=subprocess.PIPE)
        try:
            assert watcher.stdout is not None
            watcher.stdout.readline()  # "watching …": the first pass follows
            time.sleep(5)
            latencies = []
            for number in range(200, 200 + args.files):
                closed = time.perf_counter()
                note(docs, number)
                while not committed(home, f"docs/note-{number:03d}.md"):
                    time.sleep(0.05)
                latencies.append(time.perf_counter() - closed)
        finally:
            watcher.terminate()
            watcher.wait(timeout=30)
    ordered = sorted(latencies)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    print(
        f"watch: a new note searchable {statistics.median(latencies):.2f} s after it was closed "
        f"(median of {len(latencies)}; p95 {p95:.2f} s; goal ≤ 5 s, p95 ≤ 10 s)"
    )
    print(f"by hand: a fresh `rag-pipeline index` process for one new note: {by_hand:.2f} s")


if __name__ == "__main__":
    main()
