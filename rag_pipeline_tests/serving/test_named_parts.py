"""A question naming a page, a figure, a table or a section of a document finds that part: the
names read off questions in English and Chinese, and, through the real pipeline, a report whose
pages all say much the same, where only the named part tells the page apart."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pymupdf
import pytest

from rag_pipeline.cli import main
from rag_pipeline.config import load_settings
from rag_pipeline.store import payload_pages
from rag_pipeline_tests.conftest import IndexedPlaces
from serving.retrieval import Retriever, live_index
from serving.retrieval.named_parts import NamedParts, named_parts


@pytest.mark.parametrize(
    ("question", "pages", "labels"),
    [
        ("In figure 5, what colour is the line?", set(), {("figure", "5")}),
        ("What is on the top of page 5 and in Fig. 2?", {5}, {("figure", "2")}),
        ("How many signatures are on pages 15 and 16?", {15, 16}, set()),
        ("How many websites are on the cover page?", {1}, set()),
        ("What are the items compared in Table1-1?", set(), {("table", "1-1")}),
        (
            "Does Section 3.3 cite more papers than Section 3.1?",
            set(),
            {("section", "3.3"), ("section", "3.1")},
        ),
        (
            "How many quizzes are in units 4, 5, and 6?",
            set(),
            {("unit", "4"), ("unit", "5"), ("unit", "6")},
        ),
        ("What does the first figure show?", set(), {("figure", "1")}),
        ("What is in Appendix B?", set(), {("appendix", "B")}),
        ("第5页的图3说明了什么？", {5}, {("figure", "3")}),
        ("表2和第3章讲了什么", set(), {("table", "2"), ("chapter", "3")}),
        ("How do I figure out the table of contents in 2 minutes?", set(), set()),
        ("Which part a reviewer plays in section a of the form?", set(), set()),
    ],
)
def test_the_parts_a_question_names_are_read_off_it(
    question: str, pages: set[int], labels: set[tuple[str, str]]
) -> None:
    assert named_parts(question) == NamedParts(frozenset(pages), frozenset(labels))


def test_a_caption_or_heading_holds_its_part_and_not_a_longer_number() -> None:
    figure = NamedParts(labels=frozenset({("figure", "3")}))
    assert figure.holds({"text": "Results\nFigure 3: Pressure by month"})
    assert figure.holds({"text": "图3 各月压力"})
    assert not figure.holds({"text": "Figure 30: Pressure by month"})
    assert not figure.holds({"text": "Figure 3.2: Pressure by week"})
    assert not figure.holds({"text": "as Figure 3 shows, pressure fell"})
    section = NamedParts(labels=frozenset({("section", "3.4")}))
    assert section.holds({"text": "", "section": "3 Methods > 3.4 Sampling"})
    assert not section.holds({"text": "3.4 million samples", "section": "3 Methods"})
    assert NamedParts(pages=frozenset({2})).holds({"text": "", "page": 1, "page_end": 2})


# Eight pages that all say much the same; all but the sixth point to figure 3, whose caption
# is on the sixth; the fourth opens section 2.2 (a heading set larger).
READINGS = (
    "The pump station readings of the northern district were taken every morning. "
    "Pressure, flow and temperature readings were logged by the station staff. "
) * 5


def _report(root: Path) -> None:
    folder = root / "docs"
    folder.mkdir()
    pdf = pymupdf.open()
    for number in range(1, 9):
        page = pdf.new_page()
        if number == 4:
            page.insert_text((72, 60), "2.2 Night shift", fontsize=18)
        text = (
            "Figure 3: Monthly averages\n" + READINGS
            if number == 6
            else READINGS + "The readings are drawn in figure 3, section 2.2 has the night's."
        )
        page.insert_textbox(pymupdf.Rect(72, 80, 523, 800), text, fontsize=11)
    pdf.save(folder / "station-report.pdf")
    assert main(["index", "--home", str(root / "home"), "--source", str(folder)]) == 0


@pytest.mark.parametrize(
    ("question", "page"),
    [
        ("What does Figure 3 show about the pump station readings?", 6),
        ("What do the pump station readings on page 7 say?", 7),
        ("What pump station readings does section 2.2 give?", 4),
    ],
)
def test_the_first_passage_lies_on_the_part_the_question_names(
    indexed_places: IndexedPlaces, question: str, page: int
) -> None:
    home = indexed_places.fresh("named-parts", _report) / "home"
    with live_index(load_settings(home)) as (settings, store):
        retriever = Retriever(settings, store)
        nearest = retriever.search(question, limit=settings.retrieval.prefetch)
        named, _ = retriever.rank(question, nearest, keep=3)
        unnamed, _ = retriever.rank(question, replace(nearest, named=[]), keep=3)
    assert page in payload_pages(named[0].payload)
    # the pages say the same: without the part's name, the search alone does not find it first
    assert page not in payload_pages(unnamed[0].payload)
