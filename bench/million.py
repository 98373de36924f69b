"""One home grown to a million documents, measured at each step on the way (10k, 100k, 1M).

Run through ``python bench/scale.py --documents 1000000``. Generated documents (``_corpus.py``:
distinct texts, mostly short notes and pages, some long files, about 2.2 chunks each, in nested
folders) are added to one watched folder and indexed by ``rag-pipeline index`` in a fresh
process, with Dagster: 10,000 documents, then 90,000 more, then 900,000 more. The dense model
is a random-weight BERT with no transformer layer and the real vector size, loaded through the
real ONNX path (``_random_dense.py``): the model's cost is linear and measured elsewhere, so
this measures the rest (manifest, parsing, chunking, sparse vectors, the commit, catalog,
Dagster, the store).
Partitions are in buckets of about ``--bucket-documents`` documents, as docs/scaling.md tells a
user past 100,000 documents (the count is set for each step's total: at most one rearrangement
per step, inside that step's build). After each build: an unchanged re-run twice (the first
compares every file with its row and records that nothing changed), one file changed
and indexed (then found by a query in a new process), one deleted, ``serve`` (until its page
and a first search answer, then searches through its API, and its memory), ``status``,
``check`` (counted and ``--full``), ``export``, and the home's disk use and Dagster event
log. Each row is printed as its step ends, then the whole table; ratios are against the first
step, of the same run.

What the run has done is kept in ``--work``'s ``progress.json``: started again with the same
``--work`` after its process was stopped (a session's end), the bench goes on where it was,
a stopped ``index`` run counted to its last heartbeat (every 15 s) and then run again (what it
did is kept: the index resumes), its figure saying so.

    python bench/scale.py --documents 1000000 [--steps 10000,100000] [--bucket-documents 100]
                          [--work DIR] [--keep] [--postgres URL] [--parallel N]

``--postgres URL`` (a database on a server whose user may create databases) puts the catalog
and Dagster's runs and events in two databases made afresh there; ``--parallel N`` builds with
``index --parallel N`` (Dagster's run queue, a daemon, N runs at a time).
"""

from __future__ import annotations

import json
import math
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import SIZE_MIX, document_path, write_documents
from _harness import WORDS, Measured, run_cli, served
from _progress import Build, Progress, Step
from _random_dense import LABEL, LAYERS, build_random_dense_model
from _storage import Storage, disk_bytes, mb

STEPS = (10_000, 100_000, 1_000_000)
HOME_PARTS = ("catalog", "dagster", "qdrant", "stages", "cache")


def steps_to(documents: int, steps: list[int] | None) -> list[int]:
    chosen = steps or [size for size in STEPS if size < documents]
    return sorted({size for size in chosen if size < documents} | {documents})


def measured(run: Measured) -> str:
    return (
        f"{run.seconds:,.2f} s (CPU {run.cpu_seconds:,.1f} s, peak RSS {run.peak_rss_mb:,.0f} MB, "
        f"{run.peak_anonymous_mb:,.0f} MB anonymous)"
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
    progress: Progress,
    storage: Storage,
    parallel: int | None,
) -> None:
    """Grow the share from ``previous`` to ``step.documents`` and measure."""
    if progress.written >= step.documents:
        step.put("documents written", "before the bench was resumed")
    else:
        started = time.perf_counter()
        write_documents(share, previous, step.documents)
        progress.written = step.documents
        progress.save()
        step.put(
            "documents written",
            f"{step.documents - previous:,} in {time.perf_counter() - started:,.0f} s",
        )
    build = progress.builds.setdefault(step.documents, Build())
    if not build.finished:
        build.runs += 1
        progress.save()
        spread = ["--parallel", str(parallel)] if parallel else []
        last = run_cli(
            "index", "--home", home, "--source", share, *spread, env=env, heartbeat=progress.beat
        )
        build.finish(last)
        progress.save()
    added = step.documents - previous
    step.put("build", build.figure(), build.summary)
    step.per_100k = build.seconds / added * 100_000
    first = progress.steps[0].per_100k if progress.steps else None
    baseline = f" ({step.per_100k / first:.2f} x the first step)" if first else ""
    step.put("build per 100k documents", f"{step.per_100k:,.0f} s{baseline}")
    step.put("index peak RSS", f"{build.peak_mb:,.0f} MB")
    chunks = storage.chunks(home)
    step.put("chunks in the catalog", f"{chunks:,} ({chunks / step.documents:.2f} a document)")
    # The first pass after a build compares every file with its row; it leaves the record
    # that lets the next unchanged pass (a cron job's, the sensor's) skip that comparison.
    for figure in ("unchanged re-run", "unchanged re-run again"):
        unchanged = run_cli("index", "--home", home, env=env)
        assert "added 0, changed 0" in unchanged.stdout, unchanged.stdout
        step.put(figure, measured(unchanged))
    marker = f"zq{step.documents}x"
    change_one(share, previous, marker)
    changed = run_cli("index", "--home", home, env=env)
    assert "changed 1" in changed.stdout, changed.stdout
    found = run_cli("query", marker, "--home", home, "--json", env=env)
    hits = json.loads(found.stdout)
    assert hits and marker in hits[0]["text"], hits[:1]
    step.put("one file changed: index", measured(changed), changed.summary)
    step.put("then found by a query (new process)", f"{found.seconds:,.2f} s")
    # The first of the step's documents still there (a step measured again after its session
    # ended deleted one already).
    next(
        path
        for number in range(previous + 1, step.documents)
        if (path := share / document_path(number)).exists()
    ).unlink()
    deleted = run_cli("index", "--home", home, env=env)
    assert "deleted 1" in deleted.stdout, deleted.stdout
    step.put("one file deleted: index", measured(deleted), deleted.summary)
    measure_serving(step, home, env)
    step.put("status", measured(run_cli("status", "--home", home, env=env)))
    step.put("check", measured(run_cli("check", "--home", home, env=env)))
    step.put("check --full", measured(run_cli("check", "--full", "--home", home, env=env)))
    exported = work / "export"
    export = run_cli("export", "--home", home, "--to", exported, env=env)
    step.put("export", f"{measured(export)}, {mb(disk_bytes(exported))} of Parquet")
    shutil.rmtree(exported)
    parts = {part: disk_bytes(home / part) for part in HOME_PARTS}
    whole = disk_bytes(home)
    parts["other"] = whole - sum(parts.values())
    step.put("home on disk", f"{mb(whole)}: " + ", ".join(f"{k} {mb(v)}" for k, v in parts.items()))
    if databases := storage.databases():
        step.put("PostgreSQL", databases)
    step.put("Dagster event log", storage.event_log(home))
    step.put("share on disk", mb(disk_bytes(share)))


def measure_serving(step: Step, home: Path, env: dict[str, str], queries: int = 100) -> None:
    """``serve``: how long until the page answers HTTP and a first search (the page's own
    replica of the index is built or brought up to date before it), then searches one after
    another through the search API, and the server's peak memory. The questions are pairs of
    the corpus's words; the query model is the stand-in, so the real model's few milliseconds
    a question are not in these figures."""
    rng = random.Random(step.documents)
    started = time.perf_counter()
    with served(home, env, timeout=7200) as (url, memory), httpx.Client(timeout=600) as client:
        up = time.perf_counter() - started

        def search() -> float:
            begun = time.perf_counter()
            answer = client.get(url + "/api/search", params={"q": " ".join(rng.sample(WORDS, 2))})
            answer.raise_for_status()
            return (time.perf_counter() - begun) * 1000

        search()
        first = time.perf_counter() - started
        times = sorted(search() for _ in range(queries))
        peak, anonymous = memory.peak, memory.peak_anonymous
    step.put("serve: page up / first search answered", f"{up:,.1f} s / {first:,.1f} s")
    step.put(
        "search API, one at a time",
        f"p50 {times[len(times) // 2]:,.0f} ms, p95 {times[int(0.95 * (len(times) - 1))]:,.0f} ms "
        f"({queries} searches)",
    )
    step.put(
        "serve peak RSS",
        f"{peak / 2**20:,.0f} MB ({anonymous / 2**20:,.0f} MB anonymous: without mapped files, "
        "such as the store's vectors)",
    )


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
    documents: int,
    steps: list[int] | None,
    bucket_documents: int,
    work: Path | None,
    keep: bool,
    storage: Storage,
    parallel: int | None,
) -> None:
    work = work or Path(tempfile.mkdtemp(prefix="rag-bench-million-"))
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "progress.json").exists():
        storage.make_afresh()
    share, home = work / "share", work / "home"
    model = build_random_dense_model(work / f"random-dense-model-{LAYERS}-layers")
    print(f"dense model: {LABEL} -- NOT the default model; its vectors mean nothing")
    mix = ", ".join(
        f"{share:.0%} {kind} ({low}-{high} words)" for share, low, high, _, kind in SIZE_MIX
    )
    print(f"documents: {mix}; work folder {work}", flush=True)
    where = f"PostgreSQL at {storage.postgres}" if storage.postgres else "SQLite in the home"
    print(f"catalog and Dagster: {where}; builds: index --parallel {parallel or 'off'}")
    progress = Progress.of(work)
    previous = 0
    for size in steps_to(documents, steps):
        buckets = math.ceil(size / bucket_documents)
        env = model | storage.settings | {"RAG_PIPELINE_DAGSTER__DOCUMENT_BUCKETS": str(buckets)}
        print(f"step: {size:,} documents ({buckets:,} Dagster buckets)", flush=True)
        done = next((step for step in progress.steps if step.documents == size), None)
        if done:
            print("  measured before the bench was resumed:")
            for name, value in done.figures.items():
                print(f"  {name}: {value}")
        else:
            step = Step(size)
            measure_step(step, previous, share, home, work, env, progress, storage, parallel)
            progress.steps.append(step)
            progress.save()
        previous = size
        # Checked before the next step writes its documents; once written (a resumed bench),
        # the work folder no longer tells the bytes a document of this step.
        grown_further = progress.written > size or any(s.documents > size for s in progress.steps)
        if size < documents and not grown_further and not room_to_grow(work, size, documents):
            break
    print_table(progress.steps)
    if not keep:
        shutil.rmtree(work, ignore_errors=True)


def print_table(steps: list[Step]) -> None:
    print("\n| figure | " + " | ".join(f"{s.documents:,} documents" for s in steps) + " |")
    print("| --- |" + " --- |" * len(steps))
    names = dict.fromkeys(name for step in steps for name in step.figures)  # a later step may add
    for name in names:
        print(f"| {name} | " + " | ".join(s.figures.get(name, "") for s in steps) + " |")
