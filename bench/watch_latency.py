"""Live folders: how long after a file is closed it is searchable under `rag-pipeline watch`.

A home with a few notes indexed; `rag-pipeline watch` runs as its own process. Each of ``--files``
new notes is written and closed, and the time until the catalog has it committed (its points
written: searchable) is taken. Printed against, in the same run, a fresh `rag-pipeline index`
process indexing one new note (what a user without the watcher runs by hand; the Dagster
sensor adds up to ``indexing.sensor_seconds`` of waiting for its tick to that).

Then a burst: ``--burst`` new notes written at once into the watched folder, timed until the
last is searchable, against `rag-pipeline index` over the same notes in a fresh home.

    python bench/watch_latency.py [--files 10] [--burst 1000]
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


def committed(home: Path, notes: list[Path]) -> bool:
    """Whether every one of ``notes`` is searchable: one read of the catalog, so that polling a
    burst's thousand notes does not take seconds of its own."""
    settings = load_settings(home)
    with Catalog(settings) as catalog:
        records = catalog.live_documents()
    states = [records.get(f"docs/{path.name}") for path in notes]
    return all(record is not None and record.state == "indexed" for record in states)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--burst", type=int, default=1000)
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
                written = note(docs, number)
                while not committed(home, [written]):
                    time.sleep(0.05)
                latencies.append(time.perf_counter() - closed)
            burst_started = time.perf_counter()
            burst = [note(docs, number) for number in range(1000, 1000 + args.burst)]
            while not committed(home, burst):
                time.sleep(0.2)
            burst_seconds = time.perf_counter() - burst_started
        finally:
            watcher.terminate()
            watcher.wait(timeout=30)
        fresh, burst_docs = Path(scratch) / "fresh", Path(scratch) / "burst"
        burst_docs.mkdir()
        for number in range(1000, 1000 + args.burst):
            note(burst_docs, number)
        started = time.perf_counter()
        subprocess.run(
            [*CLI, "index", "--home", str(fresh), "--source", str(burst_docs)],
            check=True,
            capture_output=True,
        )
        indexed_by_hand = time.perf_counter() - started
    ordered = sorted(latencies)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    print(
        f"watch: a new note searchable {statistics.median(latencies):.2f} s after it was closed "
        f"(median of {len(latencies)}; p95 {p95:.2f} s; goal ≤ 5 s, p95 ≤ 10 s)"
    )
    print(f"by hand: a fresh `rag-pipeline index` process for one new note: {by_hand:.2f} s")
    print(
        f"burst: {args.burst} new notes all searchable {burst_seconds:.1f} s after the first was "
        f"written; `rag-pipeline index` over them in a fresh home {indexed_by_hand:.1f} s "
        f"({burst_seconds / indexed_by_hand:.2f} ×; goal ≤ 1.1 ×)"
    )


if __name__ == "__main__":
    main()
