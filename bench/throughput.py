"""End-to-end indexing throughput against a plain loop of the bare embedding model.

For each corpus: a fresh process indexes it into a fresh home (``rag-pipeline index``), then the
same chunk texts, in document order, go through the bare fastembed model in batches of 32 — what
an indexer that only embeds would cost. Ratio > 1: the pipeline indexes faster than the loop
embeds. Corpora: ``../shared/corpus`` and 1,000 generated short Markdown files.

    python bench/throughput.py [--only corpus|short]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import on_both_corpora, run_cli

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import load_settings
from rag_pipeline.embedding.models import load_dense_model


def plain_loop_seconds(texts: list[str], home: Path) -> float:
    # The bare model as fastembed loads it: one copy on every core.
    embedding = load_settings(home).embedding.model_copy(update={"parallel": 1})
    model = load_dense_model(embedding, home)
    list(model.embed(["warm up"]))
    started = time.perf_counter()
    for start in range(0, len(texts), 32):
        list(model.embed(texts[start : start + 32], batch_size=32))
    return time.perf_counter() - started


def chunk_texts(home: Path) -> tuple[int, list[str]]:
    """(documents, the text of every chunk) of the live collection."""
    with Catalog(load_settings(home)) as catalog:
        live = catalog.live_collection()
        assert live is not None
        return len(catalog.documents(live.name)), [
            row["text"] for row in catalog.chunk_rows(live.name)
        ]


def measure(name: str, source: Path, work: Path) -> None:
    home = work / f"home-{name}"
    run = run_cli("index", "--home", home, "--source", source)
    documents, texts = chunk_texts(home)
    loop = plain_loop_seconds(texts, home)
    print(
        f"{name}: {documents} documents, {len(texts)} chunks | pipeline {run.seconds:.1f} s "
        f"(whole command, fresh process) | plain embedding loop {loop:.1f} s | "
        f"throughput ratio pipeline/loop {loop / run.seconds:.2f} | "
        f"peak RSS {run.peak_rss_mb:.0f} MB"
    )
    print("   " + run.summary)


if __name__ == "__main__":
    on_both_corpora(measure)
