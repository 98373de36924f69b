"""Page keywords: a passage gains how well the whole page it starts on matches the question's
keywords, so that a page answering only as a whole (its subject in a heading on top, the figure
asked for in a table below, no one passage holding both) comes first."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from rag_pipeline.cli import main
from rag_pipeline.config import load_settings
from rag_pipeline.store.schema import Hit, NearestHits
from rag_pipeline_tests.conftest import IndexedPlaces
from serving.retrieval import Retriever, live_index

FILLER = (
    "The port authority keeps its quays, berths and yards in working order through the year, "
    "with inspections by the technical department and reports to the board. "
) * 3
TOPICS = (
    "Passenger ferry timetables",
    "Berth allocation rules",
    "Customs clearance desks",
    "Pilotage services",
    "Dredging of the channel",
    "Yard lighting",
    "Staff training",
    "Environmental monitoring",
)
QUESTION = "What did harbour crane maintenance cost in Q3 2023?"


def _port_report(root: Path) -> None:
    """Page 2 answers as a whole: its heading names the cranes' maintenance, its table the
    quarter's cost. Page 1's one passage says more about the cranes than either of page 2's;
    page 3's table has the quarter's cost of something else."""
    heading = ("Harbour crane maintenance", 18)
    table = "Quarter    Cost\nQ1 2023    {}\nQ2 2023    {}\nQ3 2023    {}"
    pages = [
        [heading, (FILLER + "The cranes are reviewed.", 11)],
        [
            heading,
            (FILLER, 11),
            ("Quarterly figures", 16),
            (table.format("38,900 euros", "40,100 euros", "41,200 euros"), 11),
        ],
        [
            ("Tugboat fuel", 18),
            (FILLER, 11),
            ("Quarterly figures", 16),
            (table.format("12,000 euros", "12,800 euros", "13,500 euros"), 11),
        ],
        *(
            [(topic, 18), (f"{topic} are described here for the year. " + FILLER, 11)]
            for topic in TOPICS
        ),
    ]
    folder = root / "docs"
    folder.mkdir()
    pdf = pymupdf.open()
    for blocks in pages:
        page, top = pdf.new_page(), 60.0
        for text, size in blocks:
            left = page.insert_textbox(pymupdf.Rect(72, top, 523, 800), text, fontsize=size)
            top = 800 - left + 14
    pdf.save(folder / "port-report.pdf")
    assert main(["index", "--home", str(root / "home"), "--source", str(folder)]) == 0


def test_a_page_answering_only_as_a_whole_comes_first(indexed_places: IndexedPlaces) -> None:
    home = indexed_places.fresh("page-keywords", _port_report) / "home"
    with live_index(load_settings(home)) as (settings, store):
        retriever = Retriever(settings, store)
        nearest = retriever.search(QUESTION, limit=settings.retrieval.prefetch)
        with_pages, _ = retriever.rank(QUESTION, nearest, keep=3)
        without = settings.retrieval.model_copy(update={"page_keyword_weight": 0.0})
        passages_alone, _ = retriever.rank(QUESTION, nearest, keep=3, fusion=without)
    assert nearest.pages[0].payload["page"] == 2  # the page holding every word of the question
    assert with_pages[0].payload["page"] == 2
    assert "41,200" in with_pages[0].text
    # Ranked by their passages alone, page 1's fuller passage about the cranes comes first.
    assert passages_alone[0].payload["page"] == 1


def _on_page(point_id: str, score: float, page: int | None) -> Hit:
    return Hit(point_id, score, {"text": point_id, "doc_id": "report.pdf", "page": page})


def test_a_passage_gains_its_pages_keyword_score_as_a_share_of_the_best_pages(
    tmp_path: Path,
) -> None:
    nearest = NearestHits(
        dense=[_on_page("lone", 0.9, 1), _on_page("table", 0.8, 2), _on_page("notes", 0.7, None)],
        sparse=[],
        # the candidates, each scored by its whole page
        pages=[_on_page("title", 8.0, 2), _on_page("table", 8.0, 2), _on_page("lone", 2.0, 1)],
    )
    settings = load_settings(
        tmp_path,
        retrieval={
            "fusion": "rrf",
            "page_weight": 0,
            "page_passages": None,
            "page_keyword_weight": 0.3,
        },
    )
    ranked, _ = Retriever(settings, store=None).rank("q", nearest, keep=3)  # type: ignore[arg-type]
    scores = {candidate.point_id: candidate.page_keyword_score for candidate in ranked}
    assert scores == {
        "table": pytest.approx(0.3),
        "lone": pytest.approx(0.3 * 2 / 8),
        "notes": None,
    }
    assert [candidate.point_id for candidate in ranked] == ["table", "lone", "notes"]
    # a page ranking the store did not give (a collection without page vectors) moves nothing
    unpaged, _ = Retriever(settings, store=None).rank(  # type: ignore[arg-type]
        "q", NearestHits(dense=nearest.dense, sparse=[]), keep=3
    )
    assert [candidate.point_id for candidate in unpaged] == ["lone", "table", "notes"]
