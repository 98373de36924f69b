"""Peak memory while indexing the largest documents of ``../shared/corpus``, and a log file of
``--log-mb`` (200 by default), the kind of file that has no natural end to its paragraphs.

Each document is indexed alone into a fresh home by the CLI in a fresh process; the peak RSS of
that process and its children (the parser workers) is summed. Baseline, measured in the same
run: a fresh process that loads the dense model and embeds one batch of 32 chunk-sized texts,
the least any indexer with this model needs.

The log is one 2 MB block of distinct log lines repeated, each copy after a blank line: every
chunk goes through chunking, the store and the catalog, while the embedding cache spares the
model the copies (embedding 400,000 distinct chunks would take hours on two cores, and
measures the model, not the pipeline).

After each, a query of that index in a fresh process (``rag-pipeline query``): its peak RSS
shows what opening the store costs.

    python bench/memory.py [--log-mb 200] [--only-log]
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import SHARED, peak_rss_of, require_shared, run_cli

DOCUMENTS = [
    "pdf/unstruct__DA-619p.pdf",
    "pdf/PyMuPDF__mupdf_explored.pdf",
    "office/unstruct__handbook-872p.docx",
]

BARE_MODEL = """
from pathlib import Path
from rag_pipeline.config import load_settings
from rag_pipeline.embedding.models import load_dense_model
model = load_dense_model(load_settings(Path({home!r})).embedding, Path({home!r}))
list(model.embed(["retrieval augmented generation " * 40] * 32, batch_size=32))
"""


def bare_model_peak_mb(home: Path) -> float:
    process = subprocess.Popen([sys.executable, "-c", BARE_MODEL.format(home=str(home))])
    peak = peak_rss_of(process.pid)
    if process.wait() != 0:
        raise RuntimeError("loading the bare model failed")
    return peak.result() / 2**20


def write_log(path: Path, megabytes: int) -> None:
    rng = random.Random(5)
    levels, routes = ["INFO", "WARN", "ERROR", "DEBUG"], ["/api/search", "/api/file", "/health"]
    lines = []
    size = 0
    while size < 2 * 2**20:
        line = (
            f"2026-11-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} "
            f"{rng.choice(levels)} worker-{rng.randint(1, 8)} request {rng.getrandbits(40):x} "
            f"{rng.choice(routes)} took {rng.randint(1, 900)} ms user u{rng.randint(1, 5000)}\n"
        )
        lines.append(line)
        size += len(line)
    block = "".join(lines)
    with path.open("w", encoding="utf-8") as handle:
        for _ in range(max(1, megabytes // 2)):
            handle.write(block + "\n")


def measure(label: str, document: Path, work: Path, baseline: float) -> None:
    folder = work / f"source-{time.monotonic_ns()}"
    folder.mkdir()
    shutil.move(document, folder / document.name)
    home = work / f"home-{folder.name}"
    run = run_cli("index", "--home", home, "--source", folder)
    print(
        f"{label}: peak RSS {run.peak_rss_mb:.0f} MB "
        f"({run.peak_rss_mb / baseline:.1f} x the bare model), {run.seconds:.1f} s | " + run.summary
    )
    query = run_cli("query", "--home", home, "request took ms")
    print(
        f"  then a query of its index in a fresh process: peak RSS {query.peak_rss_mb:.0f} MB "
        f"({query.peak_rss_mb / baseline:.1f} x the bare model), {query.seconds:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log-mb", type=int, default=200)
    parser.add_argument("--only-log", action="store_true", help="skip the corpus documents")
    args = parser.parse_args()
    require_shared()
    work = Path(tempfile.mkdtemp(prefix="rag-bench-memory-"))
    try:
        baseline = bare_model_peak_mb(work / "bare")
        print(f"baseline: the bare dense model embedding one batch, peak RSS {baseline:.0f} MB")
        for relative in [] if args.only_log else DOCUMENTS:
            copy = work / Path(relative).name
            shutil.copy(SHARED / "corpus" / relative, copy)
            measure(relative, copy, work, baseline)
        log = work / "service.log"
        write_log(log, args.log_mb)
        measure(f"a {args.log_mb} MB log", log, work, baseline)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
