"""What the multilingual vector costs to index: each corpus indexed into two fresh homes in the
same run, with ``embedding.multilingual_model`` off (the baseline: every text embedded by the
English model) and on (the default: text the English model does not understand embedded by
multilingual-e5-small instead). Printed: each run's time, their ratio, and how many chunks each
model embedded. Corpora: ``../shared/corpus`` (PDFs, Chinese PDFs, Office files, images) and
1,000 generated short English notes.

    python bench/languages.py [--only corpus|short]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Measured, on_both_corpora, run_cli

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import load_settings
from rag_pipeline.embedding import is_foreign


def indexed(home: Path, source: Path, multilingual: bool) -> Measured:
    home.mkdir(parents=True)
    if not multilingual:
        stored = {"embedding": {"multilingual_model": None}}
        (home / "settings.json").write_text(json.dumps(stored), encoding="utf-8")
    return run_cli("index", "--home", home, "--source", source)


def chunks_by_model(home: Path) -> tuple[int, int]:
    """(chunks with the dense model's vector, chunks with the multilingual model's)."""
    settings = load_settings(home)
    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        assert live is not None
        langs = [row["lang"] for row in catalog.chunk_rows(live.name) if row["text"]]
    foreign = sum(is_foreign(settings.embedding, lang) for lang in langs)
    return len(langs) - foreign, foreign


def measure(name: str, source: Path, work: Path) -> None:
    baseline = indexed(work / f"{source.name}-off", source, multilingual=False)
    default = indexed(work / f"{source.name}-on", source, multilingual=True)
    dense, foreign = chunks_by_model(work / f"{source.name}-on")
    print(
        f"{name}: multilingual off (baseline) {baseline.seconds:.1f} s, on (the default) "
        f"{default.seconds:.1f} s: {default.seconds / baseline.seconds:.2f} x; "
        f"{dense} chunks by the English model, {foreign} by the multilingual one; "
        f"peak RSS {baseline.peak_rss_mb:.0f} / {default.peak_rss_mb:.0f} MB"
    )


if __name__ == "__main__":
    on_both_corpora(measure)
