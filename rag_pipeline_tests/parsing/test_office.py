from collections.abc import Callable
from pathlib import Path

import pytest

from rag_pipeline.parsing import ParseError, detect_format, read_document
from rag_pipeline_tests.documents import docx_file, two_column_pdf


def test_docx_headings_become_section_paths(tmp_path: Path) -> None:
    path = docx_file(
        tmp_path / "handbook.docx",
        {"Vacation policy": ["Employees receive twenty days of paid leave each year."]},
        table=[["Grade", "Days"], ["A", "20"]],
    )
    elements = read_document(path).elements
    body = next(e for e in elements if "twenty days" in e.text)
    assert body.section == ("Vacation policy",)
    assert any(e.kind == "table" and "Grade" in e.text for e in elements)


def test_a_pdf_named_docx_is_parsed_as_a_pdf(tmp_path: Path) -> None:
    misnamed = tmp_path / "report.docx"
    misnamed.write_bytes(two_column_pdf(tmp_path / "real.pdf").read_bytes())
    assert detect_format(misnamed) == "pdf"
    assert read_document(misnamed).page_count == 3


def test_text_named_pdf_fails_with_a_clear_reason(tmp_path: Path) -> None:
    path = tmp_path / "fake.pdf"
    path.write_text("just some notes, not a PDF at all", encoding="utf-8")
    with pytest.raises(ParseError, match="not a PDF file"):
        read_document(path)


def test_a_truncated_docx_fails_with_a_clear_reason(tmp_path: Path) -> None:
    whole = docx_file(tmp_path / "whole.docx", {"Title": ["Body text."]}).read_bytes()
    path = tmp_path / "truncated.docx"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ParseError):
        read_document(path)


def test_html_is_parsed_offline(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(
        "<html><body><h1>Solar power</h1><p>Panels convert sunlight into electricity "
        "every day of the year.</p></body></html>",
        encoding="utf-8",
    )
    elements = read_document(path).elements
    assert elements[0].kind == "title" and elements[0].text == "Solar power"
    assert elements[1].section == ("Solar power",)


SALES = [["Region", "2023", "2022"], ["North", "1,200", "1,100"], ["South", "900", "950"]]
SALES_ROWS = ["Region | 2023 | 2022", "North | 2023: 1,200 | 2022: 1,100"]


def _docx_table(path: Path) -> Path:
    return docx_file(path, {"Quarterly results": ["Sales by region."]}, table=SALES)


def _xlsx_table(path: Path) -> Path:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "Sales"
    for row in SALES:
        sheet.append(row)
    book.save(path)
    return path


def _pptx_table(path: Path) -> Path:
    from pptx import Presentation
    from pptx.util import Pt

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Quarterly results"
    table = slide.shapes.add_table(3, 3, Pt(50), Pt(150), Pt(400), Pt(120)).table
    for i, row in enumerate(SALES):
        for j, value in enumerate(row):
            table.cell(i, j).text = value
    deck.save(path)
    return path


def _html_table(path: Path) -> Path:
    rows = "".join(
        "<tr>" + "".join(f"<td>{value}</td>" for value in row) + "</tr>" for row in SALES
    )
    path.write_text(
        f"<html><body><h1>Quarterly results</h1><table>{rows}</table></body></html>",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    ("name", "write"),
    [
        ("sales.docx", _docx_table),
        ("sales.xlsx", _xlsx_table),
        ("sales.pptx", _pptx_table),
        ("sales.html", _html_table),
    ],
)
def test_office_table_rows_keep_their_label_with_their_values_and_headers(
    tmp_path: Path, name: str, write: Callable[[Path], Path]
) -> None:
    elements = read_document(write(tmp_path / name)).elements
    (table,) = [e for e in elements if e.kind == "table"]
    assert table.text.splitlines()[:2] == SALES_ROWS


def test_an_html_table_keeps_merged_headers_line_breaks_and_empty_cells_in_place() -> None:
    from rag_pipeline.parsing.tables import html_table_text

    html = (
        "<table><tr><td>Item</td><td colspan='2'>Fiscal years ended</td></tr>"
        "<tr><td>Net<br/>sales</td><td></td><td>300</td></tr></table>"
    )
    assert html_table_text(html) == (
        "Item | Fiscal years ended | Fiscal years ended\nNet sales |  | 300"
    )
