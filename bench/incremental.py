"""What a re-run costs: no change at all, one modified file, one deleted file.

Each step is the CLI in a fresh process, as a user runs it. Baseline, measured in the same run:
the fixed cost of starting the CLI at all (``rag-pipeline status`` on an empty home: Python,
imports, settings), so ``no-op / start-up`` says how much a re-run costs beyond starting up.

1,000 short Markdown files are indexed, then re-run unchanged; one file is modified and another
deleted, then re-indexed, and a query in a new process must find the modified text and no longer
the deleted file. 5,000 files are 1,000 distinct texts in five folders (copies embed nothing:
their chunks are in the embedding cache), which makes a 5,000-document index quick to build.

    python bench/incremental.py [--files 1000] [--copies 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Measured, run_cli, write_short_markdown

CHANGE = "Cormorants dry their wings on the harbour wall after every dive."


def no_op(home: Path, label: str, startup: Measured) -> None:
    run = run_cli("index", "--home", home)
    assert "added 0, changed 0" in run.stdout and "deleted 0" in run.stdout, run.stdout
    print(
        f"no-op re-run, {label}: {run.seconds:.2f} s, {run.seconds / startup.seconds:.2f} x "
        f"start-up, peak RSS {run.peak_rss_mb:.0f} MB | {run.summary}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--copies", type=int, default=5, help="folders for the larger no-op")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rag-bench-"))
    try:
        startup = run_cli("status", "--home", work / "empty")
        print(f"baseline: CLI start-up (status on an empty home) {startup.seconds:.2f} s")

        notes = work / "notes"
        files = write_short_markdown(notes, args.files)
        home = work / "home"
        full = run_cli("index", "--home", home, "--source", notes)
        print(
            f"full index, {args.files} files: {full.seconds:.1f} s, peak RSS "
            f"{full.peak_rss_mb:.0f} MB | {full.summary}"
        )
        no_op(home, f"{args.files} files", startup)

        modified, deleted = files[len(files) // 2], files[len(files) // 3]
        modified.write_text(modified.read_text() + f"\n{CHANGE}\n", encoding="utf-8")
        deleted.unlink()
        change = run_cli("index", "--home", home)
        assert "changed 1" in change.stdout and "deleted 1" in change.stdout, change.stdout
        query = run_cli("query", "cormorants dry their wings", "--home", home, "--json")
        hits = json.loads(query.stdout)
        assert hits and CHANGE in hits[0]["text"], hits[:1]
        status = json.loads(run_cli("status", "--home", home, "--json").stdout)
        assert not any(row["file_path"].endswith(deleted.name) for row in status), "not deleted"
        print(
            f"one modified + one deleted of {args.files}: index {change.seconds:.2f} s "
            f"({change.seconds / full.seconds:.3f} x the full index), searchable from a new "
            f"process after {change.seconds + query.seconds:.2f} s (index + query) | "
            f"{change.summary}"
        )

        big = work / "many"
        for copy in range(args.copies):
            shutil.copytree(notes, big / f"folder-{copy}")
        big_home = work / "home-many"
        total = len(files) * args.copies - args.copies
        built = run_cli("index", "--home", big_home, "--source", big)
        print(f"full index, {total} files (copies): {built.seconds:.1f} s | {built.summary}")
        no_op(big_home, f"{total} files", startup)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
