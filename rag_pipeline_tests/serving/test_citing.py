"""A passage that runs over two pages is cited, listed and shown at the page of the sentences
the answer quotes from it."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pymupdf
import pytest
from PIL import Image

from rag_pipeline.cli import main
from rag_pipeline.config import Settings, load_settings
from rag_pipeline_tests.conftest import IndexedPlaces
from rag_pipeline_tests.serving.conftest import serving
from serving.assistant import Assistant, Source, cited_sources
from serving.citing import quoted_pages
from serving.page.chat import _previewed
from serving.page.render import cited_passage, evidence_html, linked
from serving.preview import PreviewError, preview

OWNER = "local"
TWO_PAGES = (
    ["Chapter 1: The Orchard", "The Velmora orchard was planted in 1873 by Ilse Brandt."],
    ["Chapter 2: The Lighthouse", "The Quillon lighthouse stands 38 metres tall."],
)


def index_two_page_guide(root: Path) -> None:
    folder = root / "docs"
    folder.mkdir()
    document = pymupdf.open()
    for lines in TWO_PAGES:  # short pages: the chunker packs both into one passage
        page = document.new_page(width=420, height=300)
        for number, line in enumerate(lines):
            page.insert_text((40, 40 + 20 * number), line, fontsize=11)
    document.save(folder / "guide.pdf")
    assert main(["index", "--home", str(root / "home"), "--source", str(folder)]) == 0


@pytest.fixture(scope="module")
def guide(indexed_places: IndexedPlaces) -> Settings:
    return load_settings(indexed_places.fresh("two-pages", index_two_page_guide) / "home")


@pytest.fixture(scope="module")
def assistant(guide: Settings) -> Iterator[Assistant]:
    yield from serving(guide)


def test_a_sentence_quoted_from_a_passages_second_page_is_cited_and_shown_there(
    assistant: Assistant,
) -> None:
    question = "How tall is the Quillon lighthouse?"
    _, final = list(assistant.ask(question, owner=OWNER))[-1]
    cited = final.passages[0].payload
    assert (cited["page"], cited["page_end"]) == (1, 2)  # one passage over both pages
    [source] = cited_sources(final)
    assert (source["page"], source["pages"]) == (2, [2])
    evidence = evidence_html([source], None)
    assert "<span class='where'>p. 2</span>" in evidence
    # The file's "↗" opens its original at the cited page, not at its first.
    [original] = re.findall(r"<a href='([^']*)' target='_blank'>↗</a>", evidence)
    assert original.startswith("/api/file/") and original.endswith("#page=2")
    target = unquote(linked(final).split("(#cite:")[1].split(")")[0])
    assert cited_passage(target) == (cited["chunk_id"], 2)
    shown = preview(assistant.settings, assistant.catalog, cited["chunk_id"], page=2, dpi=72)
    image = Image.open(io.BytesIO(shown.png or b"")).convert("RGB")
    box = next(b for b in cited["bboxes"] if b["page"] == 2)
    red, _, blue = image.getpixel((int(box["x1"]) + 1, int(box["y0"]) - 1))  # by its text
    assert shown.page == 2 and red > 230 and blue < 230  # blank paper tinted amber
    # The page draws it from the preview route, at that page.
    drawn, _ = _previewed(assistant, None, cited["chunk_id"], 2, may_govern=False)
    assert "/api/preview?chunk_id=" in drawn.value and "&amp;page=2" in drawn.value


def test_a_passage_quoted_on_both_its_pages_is_cited_over_both(assistant: Assistant) -> None:
    question = "When was the orchard planted, and how tall is the Quillon lighthouse?"
    _, final = list(assistant.ask(question, owner=OWNER))[-1]
    [source] = cited_sources(final)
    assert source["pages"] == [1, 2]
    assert "<span class='where'>pp. 1–2</span>" in evidence_html([source], None)


def test_the_evidence_line_starts_at_the_sentence_quoted_when_it_lies_past_the_snippet(
    assistant: Assistant,
) -> None:
    passage = assistant.search("Quillon lighthouse", owner=OWNER).passages[0]
    lead = "The harbour office keeps the keys of the old tower. " * 8  # 416 characters
    passage.payload = dict(passage.payload, text=f"{lead}{passage.payload['text']}", bboxes=[])
    answer = "From the documents: The Quillon lighthouse stands 38 metres tall. [1]"
    quoting = Source.of(1, passage, answer)
    assert quoting.snippet.startswith("… The Quillon lighthouse stands 38 metres tall.")
    as_found = Source.of(1, passage)  # nothing quoted: from its start
    assert as_found.snippet.startswith("The harbour office") and as_found.snippet.endswith("…")


def test_a_page_the_passage_does_not_lie_on_is_refused(assistant: Assistant) -> None:
    chunk = assistant.search("lighthouse", owner=OWNER).passages[0].payload["chunk_id"]
    with pytest.raises(PreviewError, match="does not lie on page 3"):
        preview(assistant.settings, assistant.catalog, chunk, page=3)


def test_a_passage_whose_lines_outnumber_its_boxes_is_not_placed_on_pages() -> None:
    # No line names its document; the second piece is two lines (a table's rows) on page 2:
    # its lines cannot be told apart from its boxes, so no page is guessed for a quote.
    payload = {
        "text": "Revenue rose by a tenth.\nCosts fell by a fifth.\nProfit doubled in a year.",
        "bboxes": [{"page": 1}, {"page": 2}],
        "file_path": "/docs/7.pdf",
        "title": None,
        "section": "",
    }
    assert quoted_pages(payload, '- "Costs fell by a fifth." [1]') == []
