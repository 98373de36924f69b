"""Live folders at rest: the CPU `rag-pipeline watch` uses over a large tree while nothing changes.

A tree of ``--files`` files in folders of 100 is watched. Their extension (``.bin``) is not
indexed, so the first pass indexes nothing and the figure is the watcher's own: waiting on
file-system events over the tree, plus the full pass it makes every
``indexing.watch_rescan_seconds`` (600 by default) to catch what no event told of. That pass is
timed on its own (an unchanged `rag-pipeline index` over the same tree, in the same run) and
spread over the rescan interval. A tree of indexed documents adds the catalog comparison to
each rescan, which this does not count.

    python bench/watch_idle.py [--files 100000] [--seconds 120]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rag_pipeline.config import load_settings

CLI = [sys.executable, "-m", "rag_pipeline.cli"]


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=120.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        home, tree = Path(scratch) / "home", Path(scratch) / "tree"
        for number in range(args.files):
            folder = tree / f"folder-{number // 100:04d}"
            if number % 100 == 0:
                folder.mkdir(parents=True)
            (folder / f"file-{number:06d}.bin").write_bytes(b"x")
        subprocess.run(
            [*CLI, "index", "--home", str(home), "--source", str(tree)],
            check=True,
            capture_output=True,
        )
        interval = load_settings(home).indexing.watch_rescan_seconds
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([*CLI, "index", "--home", str(home)], check=True, capture_output=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        full_pass = after.ru_utime - children.ru_utime + after.ru_stime - children.ru_stime
        watcher = subprocess.Popen(
            [*CLI, "watch", "--home", str(home)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert watcher.stdout is not None
            watcher.stdout.readline()  # "watching …"
            time.sleep(30)  # the first pass, and the watches set up over the tree
            before, started = cpu_seconds(watcher.pid), time.monotonic()
            time.sleep(args.seconds)
            idle = (cpu_seconds(watcher.pid) - before) / (time.monotonic() - started)
        finally:
            watcher.terminate()
            watcher.wait(timeout=60)
    spread = full_pass / interval
    print(
        f"watch over {args.files:,} files at rest: {100 * idle:.2f} % of a core waiting on "
        f"events ({args.seconds:g} s); one full pass {full_pass:.2f} s CPU (a fresh "
        f"`index` process, start-up included), every {interval:g} s: {100 * spread:.2f} %; "
        f"together {100 * (idle + spread):.2f} % (goal ≤ 1 %)"
    )


if __name__ == "__main__":
    main()
