"""Live folders: how long after a file is closed it is searchable under `rag-pipeline watch`.

A home with a few notes indexed; `rag-pipeline watch` runs as its own process. Each of ``--files``
new notes is written and closed, and the time until the catalog has it committed (its points
written: searchable) is taken. Printed against, in the same run, a fresh `rag-pipeline index`
process indexing one new note (what a user without the watcher runs by hand; the Dagster
sensor adds up to ``indexing.sensor_seconds`` of waiting for its tick to that).

Then a burst: ``--burst`` new notes written at once into the watched folder, timed until the
last is searchable, against `rag-pipeline index` over the same notes in a fresh home.

With ``--home`` and ``--folder``, an indexed home (the million-document one of
``bench/scale.py --keep``), its notes written into that folder, with no burst (``--burst 0``).

    python bench/watch_latency.py [--files 10] [--burst 1000]
    python bench/watch_latency.py --home DIR --folder DIR --burst 0 [--first-pass-seconds 120]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from rag_pipeline import ids
from rag_pipeline.catalog import Catalog
from rag_pipeline.config import load_settings
from rag_pipeline.manifest import source_labels

CLI = [sys.executable, "-m", "rag_pipeline.cli"]


# Names new to the folder on every run, which may be an existing home's.
RUN = uuid.uuid4().hex[:8]


def note(folder: Path, number: int) -> Path:
    path = folder / f"note-{RUN}-{number:03d}.md"
    path.write_text(f"# Note {number}\n\nThe watcher indexed note {number} quickly.\n", "utf-8")
    return path


def committed(home: Path, notes: list[Path]) -> bool:
    """Whether every one of ``notes`` is searchable: their rows alone read, in one go, so that
    polling a burst's thousand notes (or a million-document catalog) takes no seconds of its
    own."""
    settings = load_settings(home)
    folders = source_labels(settings.watched_folders)
    doc_ids = [
        ids.document_id(label, path.relative_to(folder).as_posix())
        for path in notes
        for label, folder in folders.items()
        if path.is_relative_to(folder)
    ]
    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        records = catalog.documents(live.name, doc_ids) if live else {}
    return len(records) == len(notes) and all(r.state == "indexed" for r in records.values())


def timed_index(home: Path, folder: Path, number: int) -> float:
    """A fresh `rag-pipeline index` process for one new note, timed from the note's write."""
    started = time.perf_counter()
    note(folder, number)
    subprocess.run([*CLI, "index", "--home", str(home)], check=True, capture_output=True)
    return time.perf_counter() - started


def watched_latencies(
    home: Path, folder: Path, files: int, burst: int, first_pass: float
) -> tuple[list[float], float]:
    """With `rag-pipeline watch` running (``first_pass`` seconds given to its first pass): each
    of ``files`` notes timed from its close until it is committed, one after another; then
    ``burst`` notes written at once, until the last is."""
    watcher = subprocess.Popen([*CLI, "watch", "--home", str(home)], stdout=subprocess.PIPE)
    try:
        assert watcher.stdout is not None
        watcher.stdout.readline()  # "watching …": the first pass follows
        time.sleep(first_pass)
        latencies = []
        for number in range(200, 200 + files):
            closed = time.perf_counter()
            written = note(folder, number)
            while not committed(home, [written]):
                time.sleep(0.05)
            latencies.append(time.perf_counter() - closed)
        burst_started = time.perf_counter()
        written = [note(folder, number) for number in range(1000, 1000 + burst)]
        while not committed(home, written):
            time.sleep(0.2)
        return latencies, time.perf_counter() - burst_started
    finally:
        watcher.terminate()
        watcher.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--burst", type=int, default=1000, help="0: no burst")
    parser.add_argument("--home", type=Path, help="an indexed home, instead of a fresh one")
    parser.add_argument("--folder", type=Path, help="with --home: where its notes are written")
    parser.add_argument("--first-pass-seconds", type=float, default=5.0)
    args = parser.parse_args()
    if args.home and not args.folder:
        parser.error("--home needs --folder: a folder inside its watched folders")
    with tempfile.TemporaryDirectory() as scratch:
        home, docs = args.home, args.folder
        if home is None:
            home, docs = Path(scratch) / "home", Path(scratch) / "docs"
            docs.mkdir()
            for number in range(5):
                note(docs, number)
            subprocess.run([*CLI, "index", "--home", str(home), "--source", str(docs)], check=True)
        by_hand = timed_index(home, docs, 100)
        latencies, burst_seconds = watched_latencies(
            home, docs, args.files, args.burst, args.first_pass_seconds
        )
        if args.burst:
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
    if args.burst:
        print(
            f"burst: {args.burst} new notes all searchable {burst_seconds:.1f} s after the first "
            f"was written; `rag-pipeline index` over them in a fresh home {indexed_by_hand:.1f} s "
            f"({burst_seconds / indexed_by_hand:.2f} ×; goal ≤ 1.1 ×)"
        )


if __name__ == "__main__":
    main()
