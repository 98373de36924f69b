"""The section a cited passage is shown under, in the evidence and the preview: the headings
over its first line, a table's caption over its table only; what is indexed keeps the parser's
section (the chunks after a statement's title are found by it). Through the real pipeline on a
filing-like PDF."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_pipeline.cli import main
from rag_pipeline.config import Settings, load_settings
from rag_pipeline_tests.conftest import IndexedPlaces
from rag_pipeline_tests.parsing.test_pdf_tables import statement_pdf
from rag_pipeline_tests.serving.conftest import serving
from serving.assistant import Assistant, cited_sources
from serving.preview import preview


def _index(root: Path) -> None:
    folder = root / "docs"
    folder.mkdir()
    statement_pdf(folder / "report.pdf")  # page 2: a statement under its title; 3-5: notes
    assert main(["index", "--home", str(root / "home"), "--source", str(folder)]) == 0


@pytest.fixture(scope="module")
def assistant(indexed_places: IndexedPlaces) -> Iterator[Assistant]:
    settings: Settings = load_settings(indexed_places.fresh("shown-sections", _index) / "home")
    yield from serving(settings)


def test_a_note_after_a_statement_is_shown_under_its_own_heading_and_indexed_as_before(
    assistant: Assistant,
) -> None:
    _, final = list(assistant.ask("When do fiscal years end?", owner="local"))[-1]
    [note, *_] = cited_sources(final)
    assert note["section"] == "Note 1"  # not "Consolidated Statements of Cash Flows > Note 1"
    shown = preview(assistant.settings, assistant.catalog, note["chunk_id"], drawn=False)
    assert shown.html.startswith("<p class='where'>Note 1</p>")
    # Indexed unchanged: the statement's title still heads the note for search.
    cited = next(p for p in final.passages if p.payload["chunk_id"] == note["chunk_id"])
    assert cited.payload["section"] == "Consolidated Statements of Cash Flows > Note 1"
