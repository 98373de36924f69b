"""Peak memory while indexing the largest documents of ``../shared/corpus``.

Each document is indexed alone into a fresh home by the CLI in a fresh process; the peak RSS of
that process and its children (the parser workers) is summed. Baseline, measured in the same
run: a fresh process that loads the dense model and embeds one batch of 32 chunk-sized texts,
the least any indexer with this model needs.

    python bench/memory.py
"""

from __future__ import annotations

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


def main() -> None:
    require_shared()
    work = Path(tempfile.mkdtemp(prefix="rag-bench-memory-"))
    try:
        baseline = bare_model_peak_mb(work / "bare")
        print(f"baseline: the bare dense model embedding one batch, peak RSS {baseline:.0f} MB")
        for relative in DOCUMENTS:
            folder = work / f"source-{len(relative)}-{time.monotonic_ns()}"
            folder.mkdir()
            shutil.copy(SHARED / "corpus" / relative, folder / Path(relative).name)
            run = run_cli("index", "--home", work / f"home-{folder.name}", "--source", folder)
            print(
                f"{relative}: peak RSS {run.peak_rss_mb:.0f} MB "
                f"({run.peak_rss_mb / baseline:.1f} x the bare model), {run.seconds:.1f} s | "
                + run.summary
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
