"""Per-document overhead at 1k / 10k / 100k documents, and one against two concurrent runs.

The models are kept out of it: a home first indexes 100 distinct short notes (the baseline,
which fills the embedding cache), then N copies of them in other folders, under the same file
names (a chunk names its document's file), so every chunk is in the cache. The copies' run costs
what the pipeline adds per document (manifest, Dagster's partitions and events, parsing,
chunking, the catalog, the store): printed as milliseconds per document beside the baseline's,
with a no-op re-run of the N + 100 files (goal at 100k: ≤ 20 ms per document, no-op ≤ 5 s).
Each N is indexed in each mode, in a fresh home: ``documents`` (a Dagster partition per
document, the default), ``buckets`` (``dagster.document_buckets``: one bucket per
``--bucket-documents`` documents), ``no-dagster`` (the same stages without Dagster, as a small
change is indexed: what Dagster's share is). Then the copies of the smallest N indexed again
into fresh homes (cache warmed the same way) by ``index --parallel 1`` and ``--parallel 2``,
runs of N / 4 documents: what going parallel costs or gains on this machine.

    python bench/scale.py [--sizes 1000,10000,100000] [--modes documents,buckets,no-dagster]
                          [--bucket-documents 100] [--skip-parallel]

With ``--documents N``, instead: one home grown to N distinct documents, measured at 10k, 100k
and 1M on the way (``million.py``).

    python bench/scale.py --documents 1000000 [--steps 10000,100000] [--bucket-documents 100]
                          [--work DIR] [--keep] [--postgres URL] [--parallel N]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import million
from _harness import Measured, run_cli, write_short_markdown

DISTINCT = 100
MODES = ("documents", "buckets", "no-dagster")


def copies(notes: list[Path], folder: Path, count: int) -> Path:
    """``count`` files, each a copy of one of ``notes`` in turn, a folder per round."""
    for number in range(count):
        note = notes[number % len(notes)]
        target = folder / f"{number // len(notes):05d}" / note.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(note.read_bytes())
    return folder


def mode_settings(mode: str, documents: int, bucket_documents: int) -> dict[str, str]:
    """The environment that puts ``rag-pipeline index`` in ``mode`` for ``documents``."""
    if mode == "buckets":
        buckets = max(1, -(-documents // bucket_documents))
        return {"RAG_PIPELINE_DAGSTER__DOCUMENT_BUCKETS": str(buckets)}
    if mode == "no-dagster":
        return {"RAG_PIPELINE_INDEXING__DIRECT_DOCUMENTS": str(documents)}
    return {}


def warmed_home(
    work: Path, name: str, notes: Path, env: dict[str, str] | None = None
) -> tuple[Path, Measured]:
    home = work / name
    return home, run_cli("index", "--home", home, "--source", notes, env=env)


def per_document_ms(run: Measured, documents: int) -> float:
    return run.seconds / documents * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated N")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {MODES}")
    parser.add_argument("--bucket-documents", type=int, default=100)
    parser.add_argument("--skip-parallel", action="store_true")
    parser.add_argument("--documents", type=int, help="grow one home to N documents instead")
    parser.add_argument("--steps", help="with --documents: comma-separated sizes to measure at")
    parser.add_argument("--work", type=Path, help="with --documents: the folder to work in")
    parser.add_argument("--keep", action="store_true", help="with --documents: keep --work")
    parser.add_argument(
        "--postgres", help="with --documents: a PostgreSQL URL for the catalog and Dagster"
    )
    parser.add_argument("--parallel", type=int, help="with --documents: index --parallel N")
    args = parser.parse_args()
    if args.documents:
        steps = [int(size) for size in args.steps.split(",")] if args.steps else None
        storage = million.Storage(args.postgres)
        million.run(
            args.documents,
            steps,
            args.bucket_documents,
            args.work,
            args.keep,
            storage,
            args.parallel,
        )
        return
    sizes = [int(size) for size in args.sizes.split(",")]
    modes = args.modes.split(",")
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown modes {sorted(unknown)}")
    work = Path(tempfile.mkdtemp(prefix="rag-bench-scale-"))
    try:
        notes = work / "notes"
        distinct = write_short_markdown(notes, DISTINCT)
        for size in sizes:
            folder = copies(distinct, work / f"copies-{size}", size)
            for mode in modes:
                env = mode_settings(mode, size + DISTINCT, args.bucket_documents)
                label = f"N={size}, {mode} {' '.join(env.values())}".rstrip()
                home, baseline = warmed_home(work, f"home-{size}-{mode}", notes, env)
                print(
                    f"{label}: baseline, {DISTINCT} distinct notes embedded: "
                    f"{baseline.seconds:.1f} s ({per_document_ms(baseline, DISTINCT):.0f} ms/doc)"
                    f" | {baseline.summary}"
                )
                added = run_cli("index", "--home", home, "--source", folder, env=env)
                print(
                    f"{label}: {size} copies, every chunk cached: {added.seconds:.1f} s, "
                    f"{per_document_ms(added, size):.1f} ms/doc, {added.cpu_seconds:.1f} s CPU, "
                    f"peak RSS {added.peak_rss_mb:.0f} MB | {added.summary}"
                )
                no_op = run_cli("index", "--home", home, env=env)
                print(f"{label}: no-op re-run of {size + DISTINCT} files: {no_op.seconds:.2f} s")
                shutil.rmtree(home)
        if not args.skip_parallel:
            size = min(sizes)
            folder = work / f"copies-{size}"
            for parallel in (1, 2):
                home, _ = warmed_home(work, f"parallel-{parallel}", notes)
                run = run_cli(
                    "index",
                    "--home",
                    home,
                    "--source",
                    folder,
                    "--parallel",
                    str(parallel),
                    env={"RAG_PIPELINE_INDEXING__RUN_DOCUMENTS": str(max(size // 4, 1))},
                )
                print(
                    f"--parallel {parallel}, {size} copies in runs of {max(size // 4, 1)}: "
                    f"{run.seconds:.1f} s, {run.cpu_seconds:.1f} s CPU | {run.summary}"
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
