"""Random-kill soak: indexing runs SIGKILLed at random moments, over a changing corpus.

1,000 short Markdown files are indexed; then, for each round, some files are edited, some
added and some deleted, ``rag-pipeline index`` is started and killed (SIGKILL) at a random
moment of its run (the moment drawn over the length of an unkilled run of the same changes),
a query is run against the half-done index, and a fresh ``index`` runs to the end. After it
``rag-pipeline check``'s audit must find nothing, every file on disk must be in the catalog and
no deleted one. Printed: kills that landed inside a run, invariant violations (goal 0: answers
holding two versions of a document, audit problems, files missing or left over), and the time
the fresh run took to converge.

    python bench/soak.py [--files 1000] [--kills 50] [--seed 11]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import CLI, WORDS, run_cli, write_short_markdown

from rag_pipeline import ids
from rag_pipeline.catalog import Catalog
from rag_pipeline.config import load_settings
from rag_pipeline.indexing.checks import audit


def mutate(notes: Path, rng: random.Random, serial: int) -> None:
    """Edit five files, add two and delete two."""
    files = sorted(notes.glob("*.md"))
    for path in rng.sample(files, 5):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 60)))
        path.write_text(path.read_text() + f"\nEdit {serial}: {words}.\n", encoding="utf-8")
    for extra in range(2):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 200)))
        (notes / f"added-{serial}-{extra}.md").write_text(f"# Added\n\n{words}.\n")
    for path in rng.sample(sorted(set(files) - set(notes.glob("added-*"))), 2):
        path.unlink()


def doubled_versions(home: Path) -> int:
    """Documents that one answer returned in two versions (each answer checked alone)."""
    query = subprocess.run(
        [*CLI, "query", "retrieval index document", "--home", str(home), "--json", "--top-k", "50"],
        capture_output=True,
        text=True,
    )
    if query.returncode != 0:
        return 0  # nothing indexed yet, or the store busy: no answer to check
    versions: dict[str, set[str]] = {}
    for hit in json.loads(query.stdout):
        doc_id, version, _ = ids.parse_chunk_id(hit["chunk_id"])
        versions.setdefault(doc_id, set()).add(version)
    return sum(1 for found in versions.values() if len(found) > 1)


def disk_mismatches(home: Path, notes: Path) -> list[str]:
    on_disk = {f"{notes.name}/{path.name}" for path in notes.glob("*.md")}
    with Catalog(load_settings(home)) as catalog:
        catalogued = set(catalog.live_documents())
    return [f"{d}: not indexed" for d in on_disk - catalogued] + [
        f"{d}: deleted but catalogued" for d in catalogued - on_disk
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="rag-bench-soak-"))
    try:
        notes = work / "notes"
        write_short_markdown(notes, args.files)
        home = work / "home"
        full = run_cli("index", "--home", home, "--source", notes)
        print(f"corpus: {args.files} files indexed in {full.seconds:.1f} s")
        # How long a run over one round's changes takes, to draw the kill moments from.
        mutate(notes, rng, 0)
        typical = run_cli("index", "--home", home).seconds
        print(f"an unkilled run over one round's changes: {typical:.1f} s")
        landed = doubled = 0
        problems: list[str] = []
        converge: list[float] = []
        for serial in range(1, args.kills + 1):
            mutate(notes, rng, serial)
            run = subprocess.Popen(
                [*CLI, "index", "--home", str(home)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(rng.uniform(0.0, typical))
            if run.poll() is None:
                run.send_signal(signal.SIGKILL)
                landed += 1
            run.wait()
            doubled += doubled_versions(home)
            fresh = run_cli("index", "--home", home)
            converge.append(fresh.seconds)
            found = audit(load_settings(home)).problems + disk_mismatches(home, notes)
            problems += [f"round {serial}: {problem}" for problem in found]
        print(
            f"{args.kills} rounds, {landed} kills inside a run; violations: {doubled} answers "
            f"with two versions of a document, {len(problems)} audit or disk problems"
        )
        for problem in problems[:20]:
            print("  " + problem)
        print(
            f"time to converge (the next run, from a fresh process): median "
            f"{statistics.median(converge):.1f} s, max {max(converge):.1f} s"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
