"""Pictures on this machine's cores: CLIP pictures per second, OCR pages per second, and the
share of indexing time pictures and OCR take on ``../shared/corpus``.

- CLIP: every picture parsing keeps from the corpus (image files, and pictures in its PDF, DOCX
  and PPTX files) through the pipeline's path (``ensure_picture_vectors``: stored PNG decoded,
  batches of ``images.batch_size``), against a plain loop of the bare OpenCLIP model called
  one picture at a time, in the same run. ViT-B-32 with random weights: no trained weights can
  be downloaded here, and the same architecture costs the same either way.
- OCR: corpus pages turned into scans (rendered, re-embedded as pictures with no text layer),
  English and Chinese, parsed by the pipeline's parser workers (``parsing.workers``), which
  render each page at ``images.ocr_dpi`` and read it with tesseract.
- Share: ``rag-pipeline index`` over the corpus in two fresh homes, pictures and OCR off and on
  (OCR + CLIP); the difference is what pictures cost.

    pip install -e ".[bench,image]"
    python bench/images.py [--skip-share]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import SHARED, require_shared, run_cli

from rag_pipeline.config import ImageSettings
from rag_pipeline.embedding.cache import SqliteEmbeddingCache
from rag_pipeline.embedding.image import ClipEncoder, ensure_picture_vectors
from rag_pipeline.parsing import ParseOptions, parse_document
from rag_pipeline.parsing.pool import parse_in_workers

CORPUS = SHARED / "corpus"
CLIP = ImageSettings(clip_model="ViT-B-32", clip_pretrained=None)
SCANNED_PAGES = {  # (file, pages) turned into scans
    "pdf/unstruct__multi-column.pdf": 6,
    "pdf/pdfplumb__federal-register-2020-17221.pdf": 6,
    "pdf-zh/pdfplumb__issue-67-example.pdf": 6,
}


def corpus_pictures(folder: Path) -> dict[str, Path]:
    """sha256 → stored PNG of every picture parsing keeps from the corpus."""
    options = ParseOptions(images=True)
    pictures: dict[str, Path] = {}
    for path in sorted(CORPUS.rglob("*")):
        if path.suffix.lower() not in {".pdf", ".docx", ".pptx", ".png", ".jpg", ".jpeg"}:
            continue
        try:
            parsed = parse_document(path, options)
        except Exception:  # a document without text or pictures: nothing to embed
            continue
        for picture in parsed.images:
            stored = folder / f"{picture.sha256}.png"
            stored.write_bytes(picture.data)
            pictures[picture.sha256] = stored
    return pictures


def measure_clip(work: Path) -> None:
    from PIL import Image

    pictures = corpus_pictures(work / "pictures")
    encoder = ClipEncoder(CLIP)
    encoder.embed_query("warm up")  # the model loaded before either is timed
    model, preprocess, _ = encoder._loaded
    import torch

    started = time.perf_counter()
    for path in pictures.values():
        with Image.open(path) as opened, torch.inference_mode():
            model.encode_image(preprocess(opened.convert("RGB")).unsqueeze(0), normalize=True)
    plain = time.perf_counter() - started

    cache = SqliteEmbeddingCache(work / "cache.sqlite")
    started = time.perf_counter()
    ensure_picture_vectors(encoder, pictures, cache)
    ours = time.perf_counter() - started
    cache.close()
    count = len(pictures)
    print(f"CLIP ViT-B-32, {count} corpus pictures on {torch.get_num_threads()} threads:")
    print(f"  pipeline: {count / ours:.1f} pictures/s ({ours:.1f} s)")
    print(f"  plain loop, one picture per call: {count / plain:.1f} pictures/s ({plain:.1f} s)")
    print(f"  ratio pipeline / plain loop: {plain / ours:.2f}")


def scanned_copy(source: Path, pages: int, target: Path) -> int:
    """``source``'s first ``pages`` pages as a scan: each page a picture, no text layer."""
    import pymupdf

    with pymupdf.open(source) as document, pymupdf.open() as scan:
        for page in document.pages(0, min(pages, document.page_count)):
            picture = page.get_pixmap(dpi=150)
            new = scan.new_page(width=page.rect.width, height=page.rect.height)
            new.insert_image(new.rect, stream=picture.tobytes("png"))
        scan.save(target)
        return scan.page_count


def measure_ocr(work: Path) -> None:
    scans = work / "scans"
    scans.mkdir()
    pages = 0
    jobs = []
    for name, count in SCANNED_PAGES.items():
        target = scans / Path(name).name
        pages += scanned_copy(CORPUS / name, count, target)
        jobs.append((name, target))
    options = ParseOptions(ocr_languages="eng+chi_sim", ocr_dpi=ImageSettings().ocr_dpi)
    for workers in (1, 2):
        started = time.perf_counter()
        outcomes = list(
            parse_in_workers(jobs, workers=workers, timeout_seconds=600, options=options)
        )
        seconds = time.perf_counter() - started
        failed = [outcome.key for outcome in outcomes if outcome.error]
        print(
            f"OCR ({options.ocr_languages}, {options.ocr_dpi} dpi), {pages} scanned pages, "
            f"{workers} parser worker(s): {pages / seconds:.2f} pages/s ({seconds:.1f} s)"
            + (f"; failed: {failed}" if failed else "")
        )


def measure_share(work: Path) -> None:
    off = {"images": {"ocr_languages": None}}
    on = {"images": {"clip_model": "ViT-B-32", "clip_pretrained": None}}
    seconds = {}
    for name, settings in (("off", off), ("on", on)):
        home = work / f"home-{name}"
        home.mkdir()
        (home / "settings.json").write_text(json.dumps(settings))
        run = run_cli("index", "--home", home, "--source", CORPUS)
        seconds[name] = run.seconds
        print(
            f"  index ../shared/corpus, pictures and OCR {name}: {run.seconds:.0f} s; {run.summary}"
        )
    share = (seconds["on"] - seconds["off"]) / seconds["on"]
    print(f"  share of indexing time taken by pictures and OCR: {share:.0%}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-share", action="store_true", help="skip the two corpus indexes")
    args = parser.parse_args()
    require_shared()
    with tempfile.TemporaryDirectory(prefix="rag-bench-images-") as folder:
        work = Path(folder)
        (work / "pictures").mkdir()
        measure_clip(work)
        measure_ocr(work)
        if not args.skip_share:
            measure_share(work)


if __name__ == "__main__":
    main()
