"""One home grown to a million documents, measured at each step on the way (10k, 100k, 1M).

Run through ``python bench/scale.py --documents 1000000``. Generated documents (``_corpus.py``:
distinct texts, mostly short notes and pages, some long files, about 2.2 chunks each, in nested
folders) are added to one watched folder and indexed by ``rag-pipeline index`` in a fresh
process, with Dagster: 10,000 documents, then 90,000 more, then 900,000 more. The dense model
is a random-weight one-layer BERT with the real vector size, loaded through the real ONNX path
(``_random_dense.py``): the model's cost is linear and measured elsewhere, so this measures the
rest (manifest, parsing, chunking, sparse vectors, the commit, catalog, Dagster, the store).
Partitions are in buckets of about ``--bucket-documents`` documents, as docs/scaling.md tells a
user past 100,000 documents (the count is set for each step's total: at most one rearrangement
per step, inside that step's build). After each build: an unchanged re-run, one file changed
and indexed (then found by a query in a new process), one deleted, ``status``, ``check``,
``export``, and the home's disk use and Dagster event log. Each row is printed as its step
ends, then the whole table; ratios are against the first step, of the same run.

    python bench/scale.py --documents 1000000 [--steps 10000,100000] [--bucket-documents 100]
                          [--work DIR] [--keep]
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import SIZE_MIX, document_path, write_documents
from _harness import Measured, run_cli
from _random_dense import LABEL, build_random_dense_model

STEPS = (10_000, 100_000, 1_000_000)
HOME_PARTS = ("catalog", "dagster", "qdrant", "stages", "cache")


@dataclass
class Step:
    documents: int
    figures: dict[str, str] = field(default_factory=dict)

    def put(self, name: str, value: str, detail: str = "") -> None:
        """A figure for the table; ``detail`` (the command's own report) is only printed."""
        self.figures[name] = value
        print(f"  {name}: {value}" + (f" | {detail}" if detail else ""), flush=True)


def steps_to(documents: int, steps: list[int] | None) -> list[int]:
    chosen = steps or [size for size in STEPS if size < documents]
    return sorted({size for size in chosen if size < documents} | {documents})


def disk_bytes(folder: Path) -> int:
    """Bytes the folder's files take on disk (allocated blocks), symbolic links not followed."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total


def event_log(dagster: Path) -> str:
    """Rows and bytes of the SQLite event log: one database per run, and the index of the
    events Dagster looks up across runs (materializations, partitions)."""
    runs = dagster / "history" / "runs"
    counts = {"per-run": 0, "index": 0}
    for database in runs.glob("?*.db"):  # ".db" is an empty one Dagster leaves
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
            tables = {row[0] for row in connection.execute("select name from sqlite_master")}
            if "event_logs" in tables:
                (rows,) = connection.execute("select count(*) from event_logs").fetchone()
                counts["index" if database.name == "index.db" else "per-run"] += rows
    return (
        f"{counts['per-run']:,} rows in {len(list(runs.glob('*-*.db')))} run databases, "
        f"{counts['index']:,} in the index; {mb(disk_bytes(runs))}"
    )


def catalog_chunks(home: Path) -> int:
    with sqlite3.connect(f"file:{home / 'catalog' / 'catalog.sqlite'}?mode=ro", uri=True) as db:
        return db.execute("select count(*) from chunks").fetchone()[0]


def mb(size: float) -> str:
    return f"{size / 2**20:,.0f} MB"


def measured(run: Measured) -> str:
    return (
        f"{run.seconds:,.2f} s (CPU {run.cpu_seconds:,.1f} s, peak RSS {run.peak_rss_mb:,.0f} MB)"
    )


def change_one(share: Path, number: int, marker: str) -> None:
    path = share / document_path(number)
    path.write_text(path.read_text() + f"\nThe {marker} review moved to the harbour office.\n")


def measure_step(
    step: Step,
    previous: int,
    share: Path,
    home: Path,
    work: Path,
    env: dict[str, str],
    first_per_100k: float | None,
) -> float:
    """Grow the share from ``previous`` to ``step.documents`` and measure; the build's seconds
    per 100,000 documents."""
    started = time.perf_counter()
    write_documents(share, previous, step.documents)
    step.put(
        "documents written",
        f"{step.documents - previous:,} in {time.perf_counter() - started:,.0f} s",
    )
    build = run_cli("index", "--home", home, "--source", share, env=env)
    added = step.documents - previous
    step.put("build", measured(build), build.summary)
    per_100k = build.seconds / added * 100_000
    baseline = f" ({per_100k / first_per_100k:.2f} x the first step)" if first_per_100k else ""
    step.put("build per 100k documents", f"{per_100k:,.0f} s{baseline}")
    step.put("index peak RSS", f"{build.peak_rss_mb:,.0f} MB")
    chunks = catalog_chunks(home)
    step.put("chunks in the catalog", f"{chunks:,} ({chunks / step.documents:.2f} a document)")
    unchanged = run_cli("index", "--home", home, env=env)
    assert "added 0, changed 0" in unchanged.stdout, unchanged.stdout
    step.put("unchanged re-run", measured(unchanged))
    marker = f"zq{step.documents}x"
    change_one(share, previous, marker)
    changed = run_cli("index", "--home", home, env=env)
    assert "changed 1" in changed.stdout, changed.stdout
    found = run_cli("query", marker, "--home", home, "--json", env=env)
    hits = json.loads(found.stdout)
    assert hits and marker in hits[0]["text"], hits[:1]
    step.put("one file changed: index", measured(changed), changed.summary)
    step.put("then found by a query (new process)", f"{found.seconds:,.2f} s")
    (share / document_path(previous + 1)).unlink()
    deleted = run_cli("index", "--home", home, env=env)
    assert "deleted 1" in deleted.stdout, deleted.stdout
    step.put("one file deleted: index", measured(deleted), deleted.summary)
    step.put("status", measured(run_cli("status", "--home", home, env=env)))
    step.put("check", measured(run_cli("check", "--home", home, env=env)))
    exported = work / "export"
    export = run_cli("export", "--home", home, "--to", exported, env=env)
    step.put("export", f"{measured(export)}, {mb(disk_bytes(exported))} of Parquet")
    shutil.rmtree(exported)
    parts = {part: disk_bytes(home / part) for part in HOME_PARTS}
    whole = disk_bytes(home)
    parts["other"] = whole - sum(parts.values())
    step.put("home on disk", f"{mb(whole)}: " + ", ".join(f"{k} {mb(v)}" for k, v in parts.items()))
    step.put("Dagster event log", event_log(home / "dagster"))
    step.put("share on disk", mb(disk_bytes(share)))
    return per_100k


def room_to_grow(work: Path, size: int, documents: int) -> bool:
    """Whether the disk holds the work folder grown from ``size`` to ``documents`` at the same
    bytes a document (a run that would fill the disk stops here rather than hours later)."""
    used = disk_bytes(work)
    needed = used / size * documents - used
    free = shutil.disk_usage(work).free
    print(f"disk: {mb(needed)} more needed at {documents:,} documents, {mb(free)} free", flush=True)
    if needed > 0.95 * free:
        print("stopping: not enough disk for the next steps (free some, or --work elsewhere)")
        return False
    return True


def run(
    documents: int, steps: list[int] | None, bucket_documents: int, work: Path | None, keep: bool
) -> None:
    work = work or Path(tempfile.mkdtemp(prefix="rag-bench-million-"))
    work.mkdir(parents=True, exist_ok=True)
    share, home = work / "share", work / "home"
    model = build_random_dense_model(work / "random-dense-model")
    print(f"dense model: {LABEL} -- NOT the default model; its vectors mean nothing")
    mix = ", ".join(
        f"{share:.0%} {kind} ({low}-{high} words)" for share, low, high, _, kind in SIZE_MIX
    )
    print(f"documents: {mix}; work folder {work}", flush=True)
    done: list[Step] = []
    previous, first_per_100k = 0, None
    for size in steps_to(documents, steps):
        buckets = math.ceil(size / bucket_documents)
        env = model | {"RAG_PIPELINE_DAGSTER__DOCUMENT_BUCKETS": str(buckets)}
        print(f"step: {size:,} documents ({buckets:,} Dagster buckets)", flush=True)
        step = Step(size)
        per_100k = measure_step(step, previous, share, home, work, env, first_per_100k)
        first_per_100k = first_per_100k or per_100k
        done.append(step)
        previous = size
        if size < documents and not room_to_grow(work, size, documents):
            break
    print_table(done)
    if not keep:
        shutil.rmtree(work, ignore_errors=True)


def print_table(steps: list[Step]) -> None:
    print("\n| figure | " + " | ".join(f"{s.documents:,} documents" for s in steps) + " |")
    print("| --- |" + " --- |" * len(steps))
    for name in steps[0].figures:
        print(f"| {name} | " + " | ".join(s.figures.get(name, "") for s in steps) + " |")
