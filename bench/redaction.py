"""Redaction's cost: ``../shared/corpus`` indexed with redaction off, then on, each by a fresh
``rag-pipeline index`` process into a fresh home, in the same run (goal: on / off ≤ 1.1), and
what it replaced, counted by kind from the redacted index's chunks. Also the redactor alone over
the same chunk texts, in characters per second.

    python bench/redaction.py [--source PATH]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import SHARED, Measured, require_shared, run_cli

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import RedactionSettings, load_settings
from rag_pipeline.redaction import MASK, Redactor


def index(source: Path, home: Path, *, redaction: bool) -> Measured:
    home.mkdir(parents=True)
    (home / "settings.json").write_text(json.dumps({"redaction": {"enabled": redaction}}))
    run = run_cli("index", "--home", home, "--source", source)
    print(
        f"  redaction {'on ' if redaction else 'off'}: {run.seconds:.1f} s wall, "
        f"{run.cpu_seconds:.1f} s CPU | {run.summary}"
    )
    return run


def chunk_texts(home: Path) -> list[str]:
    with Catalog(load_settings(home)) as catalog:
        live = catalog.live_collection()
        assert live is not None
        return [row["text"] for row in catalog.chunk_rows(live.name)]


def _masks(home: Path) -> Counter[str]:
    return Counter(
        match.group().strip("[]").split(":")[0]
        for text in chunk_texts(home)
        for match in MASK.finditer(text)
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", type=Path, default=SHARED / "corpus")
    args = parser.parse_args()
    if args.source == SHARED / "corpus":
        require_shared()
    work = Path(tempfile.mkdtemp(prefix="rag-bench-redaction-"))
    try:
        print(f"indexing {args.source}")
        off = index(args.source, work / "off", redaction=False)
        on = index(args.source, work / "on", redaction=True)
        print(
            f"  on / off: {on.seconds / off.seconds:.3f} wall, "
            f"{on.cpu_seconds / off.cpu_seconds:.3f} CPU (goal ≤ 1.1)"
        )
        # What reads like a mask in the redacted index, less what already did in the other.
        masks = _masks(work / "on")
        masks.subtract(_masks(work / "off"))
        print(f"  values replaced, by kind: {dict(+masks)}")
        texts = chunk_texts(work / "off")
        redactor = Redactor(RedactionSettings(enabled=True))
        started = time.perf_counter()
        for text in texts:
            redactor.text(text)
        seconds = time.perf_counter() - started
        characters = sum(map(len, texts))
        print(
            f"  the redactor alone over the {len(texts)} chunks ({characters / 1e6:.1f} M chars): "
            f"{seconds:.2f} s, {characters / seconds / 1e6:.1f} M chars/s"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
