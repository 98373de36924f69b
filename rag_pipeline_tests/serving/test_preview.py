"""A cited passage shown on its page, and no file outside the watched folders readable."""

import io
import os

import pytest
from PIL import Image

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import Settings
from rag_pipeline_tests.index_state import live_chunks
from serving.preview import HIGHLIGHT, PreviewError, preview, source_file


def _chunk(settings: Settings, doc_id: str) -> dict:
    return live_chunks(settings.home, doc_id)[0]


def test_a_pdf_passage_is_shown_on_its_page_with_its_box_highlighted(
    indexed: Settings, catalog: Catalog
) -> None:
    chunk = _chunk(indexed, "docs/report.pdf")
    shown = preview(indexed, catalog, chunk["chunk_id"], dpi=72)
    assert shown.page == chunk["page_start"] and shown.png is not None
    image = Image.open(io.BytesIO(shown.png)).convert("RGB")
    assert image.size == (595, 842)  # A4 at 72 dpi: one pixel per point
    box = next(b for b in chunk["bboxes"] if b["page"] == shown.page)
    # Blank paper inside the box is tinted amber: red and green high, blue clearly lower.
    tinted = [
        image.getpixel((x, y))
        for x in range(int(box["x0"]), int(box["x1"]), 7)
        for y in range(int(box["y0"]), int(box["y1"]), 3)
    ]
    expected_blue = 255 * (1 - 0.3 * (1 - HIGHLIGHT[2]))
    assert any(abs(b - expected_blue) < 25 and r > 240 and g > 200 for r, g, b in tinted)
    assert image.getpixel((5, 5)) == (255, 255, 255)  # outside: untouched


def test_other_formats_show_the_passage_marked_in_its_text(
    indexed: Settings, catalog: Catalog
) -> None:
    shown = preview(indexed, catalog, _chunk(indexed, "docs/rivers.txt")["chunk_id"])
    assert shown.png is None and "<mark>" in shown.html and "三峡大坝" in shown.html


def test_passages_are_shown_without_the_line_naming_their_document_for_search(
    indexed: Settings, catalog: Catalog
) -> None:
    rivers = _chunk(indexed, "docs/rivers.txt")
    assert rivers["text"].startswith("rivers\n长江")
    assert "<mark>长江是中国最长的河流" in preview(indexed, catalog, rivers["chunk_id"]).html
    middle = live_chunks(indexed.home, "docs/report.pdf")[1]
    assert middle["text"].startswith("report\nSection 2")
    shown = preview(indexed, catalog, middle["chunk_id"], dpi=36).html
    assert "<mark>Section 2: Retrieval Methods<br>" in shown
    assert "'context'>…Section 1: Retrieval Methods<br>" in shown  # the chunk before, whole
    assert "'context'>Section 3: Retrieval Methods<br>" in shown  # the chunk after
    assert "report<br>" not in shown


@pytest.mark.parametrize(
    "doc_id",
    ["../../etc/passwd", "/etc/passwd", "docs/../../../etc/passwd", "docs/missing.md"],
)
def test_paths_that_are_not_indexed_documents_are_refused(
    indexed: Settings, catalog: Catalog, doc_id: str
) -> None:
    with pytest.raises(PreviewError):
        source_file(indexed, catalog, doc_id)


def test_a_symbolic_link_out_of_the_watched_folder_is_refused(
    indexed: Settings, catalog: Catalog
) -> None:
    _, path = source_file(indexed, catalog, "docs/guide.md")
    outside = indexed.home / "secret.md"
    outside.write_text("secret")
    backup = path.with_suffix(".bak")
    os.rename(path, backup)
    try:
        path.symlink_to(outside)
        with pytest.raises(PreviewError, match="outside the watched folders"):
            source_file(indexed, catalog, "docs/guide.md")
    finally:
        path.unlink()
        os.rename(backup, path)


def test_an_unknown_or_malformed_chunk_id_is_refused(indexed: Settings, catalog: Catalog) -> None:
    with pytest.raises(PreviewError):
        preview(indexed, catalog, "docs/guide.md@nope#0")
    with pytest.raises(PreviewError):
        preview(indexed, catalog, "not a chunk id")
