"""Tables in PDFs written here as annual reports print them: borderless statements (labels on
the left, right-aligned number columns, years above), ruled ones, one running over a page."""

from pathlib import Path

import pymupdf
import pytest

from rag_pipeline.parsing import Element, read_document
from rag_pipeline_tests.test_chunking import chunk

COLUMNS = (380, 460, 540)  # right edges of the three year columns
YEARS = ("2023", "2022", "2021")
RUNNING_HEADER = "ACME INDUSTRIAL HOLDINGS"
CASH_FLOWS = [
    ("Operating activities", None),
    ("Net earnings", ("1,419", "2,454", "1,798")),
    ("Depreciation and amortization", ("918", "869", "839")),
    ("Total cash provided by operating activities", ("1,824", "3,252", "4,927")),
    ("Investing activities", None),
    ("Purchases of property, plant and equipment (PP&E)", ("(1,577)", "(1,373)", "(1,420)")),
    ("Proceeds from sale of PP&E and other assets", ("262", "49", "1")),
    ("Total cash used in investing activities", ("(1,315)", "(1,324)", "(1,419)")),
]


def _right_aligned(page: pymupdf.Page, right: float, y: float, text: str) -> None:
    page.insert_text((right - pymupdf.get_text_length(text, fontsize=9), y), text, fontsize=9)


def _years(page: pymupdf.Page, y: float) -> None:
    """The years over the three number columns."""
    for right, year in zip(COLUMNS, YEARS, strict=True):
        _right_aligned(page, right, y, year)


def _page(doc: pymupdf.Document, number: int) -> pymupdf.Page:
    """A page with a company name above its text (below the margin) and a page number."""
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 110), RUNNING_HEADER, fontsize=9)
    page.insert_text((290, 820), str(number), fontsize=9)
    return page


def _rows(page: pymupdf.Page, rows: list, top: float, *, ruled: bool = False) -> float:
    y = top
    for label, values in rows:
        page.insert_text((72 if values is None else 80, y), label, fontsize=9)
        for right, value in zip(COLUMNS, values or (), strict=False):
            _right_aligned(page, right, y, value)
        if ruled:
            page.draw_line((70, y + 4), (545, y + 4))
        y += 14
    return y


def statement_pdf(path: Path, *, ruled: bool = False) -> Path:
    """Page 1: prose under a heading; page 2: the cash-flow statement, its title above it, a
    note on units, the years over the number columns; pages 3 to 5: notes."""
    doc = pymupdf.open()
    page = _page(doc, 1)
    page.insert_text((72, 150), "Internal control over financial reporting", fontsize=14)
    page.insert_text((72, 180), "Management assessed the controls and found them effective.")
    page.insert_text((72, 200), "The auditor agreed with the assessment in every respect.")
    page = _page(doc, 2)
    page.insert_text((72, 150), "Consolidated Statements of Cash Flows", fontsize=11)
    page.insert_text((72, 165), "($ in millions)", fontsize=8)
    _years(page, 185)
    _rows(page, CASH_FLOWS, 200, ruled=ruled)
    page.insert_text((72, 400), "See the notes to the consolidated financial statements.")
    for number in (3, 4, 5):
        page = _page(doc, number)
        page.insert_text((72, 150), f"Note {number - 2}", fontsize=14)
        page.insert_text((72, 180), "Amounts are rounded to the nearest million dollars.")
        page.insert_text((72, 200), "Fiscal years end on the Saturday nearest to January 31.")
    doc.save(path)
    return path


def continued_table_pdf(path: Path) -> Path:
    """A balance sheet whose rows run on over the next page, the years printed once."""
    doc = pymupdf.open()
    page = _page(doc, 1)
    page.insert_text((72, 150), "Consolidated Balance Sheets", fontsize=11)
    _years(page, 170)
    first = [(f"Asset line {n}", (f"{n},100", f"{n},200", f"{n},300")) for n in range(1, 40)]
    _rows(page, first, 185)
    page = _page(doc, 2)
    second = [(f"Liability line {n}", (f"{n},400", f"{n},500", f"{n},600")) for n in range(1, 6)]
    _rows(page, second, 150)
    page.insert_text((72, 260), "The accompanying notes are part of these statements.")
    doc.save(path)
    return path


def _table(elements: list[Element], page: int) -> Element:
    (table,) = [e for e in elements if e.kind == "table" and e.page == page]
    return table


@pytest.mark.parametrize("ruled", [False, True], ids=["borderless", "ruled"])
def test_a_statement_row_keeps_its_label_with_its_values_and_their_years(
    tmp_path: Path, ruled: bool
) -> None:
    parsed = read_document(statement_pdf(tmp_path / "report.pdf", ruled=ruled))
    table = _table(parsed.elements, page=2)
    lines = table.text.splitlines()
    assert lines[0] == " | 2023 | 2022 | 2021"
    assert (
        "Purchases of property, plant and equipment (PP&E) | 2023: (1,577) | 2022: (1,373) | "
        "2021: (1,420)"
    ) in lines
    assert "Investing activities" in lines  # a label row stays in its place among the rows
    assert table.section[-1] == "Consolidated Statements of Cash Flows"


def test_each_table_row_has_the_box_of_its_line_on_the_page(tmp_path: Path) -> None:
    parsed = read_document(statement_pdf(tmp_path / "report.pdf"))
    table = _table(parsed.elements, page=2)
    rows = {table.text[box.start : box.end].split(" |")[0]: box.bbox for box in table.boxes}
    net_earnings = rows["Net earnings"]
    assert net_earnings[1] < 214 < net_earnings[3]  # the row printed at y = 214 (its baseline)
    assert net_earnings[0] == pytest.approx(80, abs=1) and net_earnings[2] > 530


def test_every_chunk_of_statement_rows_is_headed_by_the_document_statement_and_years(
    tmp_path: Path,
) -> None:
    parsed = read_document(statement_pdf(tmp_path / "report.pdf"))
    # max_tokens=128: the table is split over several chunks
    chunks = chunk(parsed.elements, max_tokens=128, document="ACME 2023 10K")
    with_rows = [c.text for c in chunks if "2023: " in c.text]
    assert len(with_rows) > 1
    for text in with_rows[1:]:
        assert text.startswith(
            "ACME 2023 10K › Consolidated Statements of Cash Flows\n| 2023 | 2022 | 2021\n"
        ), text
    assert with_rows[0].startswith("ACME 2023 10K\nConsolidated Statements of Cash Flows\n")


def test_a_table_continued_on_the_next_page_repeats_its_header(tmp_path: Path) -> None:
    parsed = read_document(continued_table_pdf(tmp_path / "balance.pdf"))
    continued = _table(parsed.elements, page=2)
    lines = continued.text.splitlines()
    assert lines[0] == " | 2023 | 2022 | 2021"
    assert lines[1] == "Liability line 1 | 2023: 1,400 | 2022: 1,500 | 2021: 1,600"


def test_a_name_above_every_page_is_neither_text_nor_section(tmp_path: Path) -> None:
    parsed = read_document(statement_pdf(tmp_path / "report.pdf"))
    assert not any(RUNNING_HEADER in e.text for e in parsed.elements)
    assert not any(RUNNING_HEADER in part for e in parsed.elements for part in e.section)
    table = _table(parsed.elements, page=2)
    assert "Internal control over financial reporting" not in table.section


def test_a_row_of_years_inside_a_table_is_a_row_and_the_years_above_are_its_header(
    tmp_path: Path,
) -> None:
    doc = pymupdf.open()
    page = _page(doc, 1)
    page.insert_text((72, 150), "Store openings", fontsize=11)
    _years(page, 170)
    rows = [
        ("Stores opened", ("12", "9", "7")),
        ("Year the oldest store opened", ("1987", "1987", "1987")),
        ("Stores closed", ("3", "n/a", "1")),
        ("Stores at year end", ("140", "131", "123")),
    ]
    _rows(page, rows, 185)
    doc.save(tmp_path / "stores.pdf")
    table = _table(read_document(tmp_path / "stores.pdf").elements, page=1)
    assert table.text.splitlines() == [
        " | 2023 | 2022 | 2021",
        "Stores opened | 2023: 12 | 2022: 9 | 2021: 7",
        "Year the oldest store opened | 2023: 1987 | 2022: 1987 | 2021: 1987",
        "Stores closed | 2023: 3 | 2022: n/a | 2021: 1",
        "Stores at year end | 2023: 140 | 2022: 131 | 2021: 123",
    ]


def test_a_line_of_currency_signs_alone_does_not_break_the_page(tmp_path: Path) -> None:
    doc = pymupdf.open()
    page = _page(doc, 1)
    page.insert_text((72, 150), "Cash position", fontsize=11)
    _years(page, 170)
    for right in COLUMNS:
        _right_aligned(page, right - 40, 185, "$")
    _rows(page, CASH_FLOWS[1:4], 200)
    doc.save(tmp_path / "signs.pdf")
    table = _table(read_document(tmp_path / "signs.pdf").elements, page=1)
    assert "Net earnings | 1,419 | 2,454 | 1,798" in table.text.splitlines()
