from pathlib import Path

import pytest

from rag_pipeline.parsing import ParseError, read_document
from rag_pipeline_tests.documents import (
    encrypted_pdf,
    image_only_pdf,
    text_pdf,
    two_column_pdf,
    zero_page_pdf,
)


@pytest.fixture
def report(tmp_path: Path) -> Path:
    return two_column_pdf(tmp_path / "report.pdf")


def test_two_columns_are_read_left_column_first(report: Path) -> None:
    page_one = [e.text for e in read_document(report).elements if e.page == 1]
    assert page_one[0] == "Section 1: Retrieval Methods"
    assert page_one[1].startswith("Retrieval augmented generation")
    assert page_one[2].startswith("Chunks follow the structure")
    assert page_one[3].startswith("Hybrid search combines")


def test_running_header_and_page_numbers_are_removed(report: Path) -> None:
    text = " ".join(e.text for e in read_document(report).elements)
    assert "Confidential" not in text
    assert "Page 1 of 3" not in text


def test_hyphenated_line_ends_are_joined(report: Path) -> None:
    text = read_document(report).elements[1].text
    assert "The embedding model" in text


def test_headings_make_the_section_path_with_page_and_box(report: Path) -> None:
    parsed = read_document(report)
    assert parsed.page_count == 3 and parsed.page_sizes[0] == (595, 842)
    heading, body = parsed.elements[0], parsed.elements[1]
    assert heading.kind == "title"
    assert body.section == ("Section 1: Retrieval Methods",)
    x0, y0, x1, y1 = body.bbox
    assert 60 < x0 < x1 < 300 and 120 < y0 < y1 < 200
    assert len(body.boxes) == 4  # one per line, for highlighting part of the block


def test_chinese_text_is_extracted(tmp_path: Path) -> None:
    pdf = text_pdf(
        tmp_path / "zh.pdf",
        ["北京大学位于北京市海淀区，是中国著名的高等学府。"],
        fontname="china-s",
    )
    assert "北京大学位于北京市海淀区" in read_document(pdf).elements[0].text


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (encrypted_pdf, "password"),
        (zero_page_pdf, "no pages"),
        (image_only_pdf, "no text layer"),
    ],
)
def test_unusable_pdfs_fail_with_a_reason(tmp_path: Path, make, reason: str) -> None:  # noqa: ANN001
    path = make(tmp_path / "bad.pdf")
    with pytest.raises(ParseError, match=reason):
        read_document(path)


def test_a_damaged_pdf_fails_with_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "damaged.pdf"
    path.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage garbage")
    with pytest.raises(ParseError):
        read_document(path)
