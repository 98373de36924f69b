"""Pictures and OCR: image files as documents, pictures inside PDF/PPTX/DOCX, scans read by
tesseract (English and Chinese), icons and logos skipped."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from rag_pipeline.parsing import ParseError, ParseOptions, read_document
from rag_pipeline.parsing.images import hash_distance, open_picture, perceptual_hash
from rag_pipeline_tests.conftest import needs_tesseract
from rag_pipeline_tests.documents import pdf_with_figures, photo, scanned_pdf, text_picture

READ_ALL = ParseOptions(ocr_languages="eng+chi_sim", images=True)


@needs_tesseract
def test_a_scanned_pdf_page_is_read_by_ocr_with_line_boxes_in_page_points(tmp_path: Path) -> None:
    path = scanned_pdf(
        tmp_path / "scan.pdf", ["Quarterly maintenance report", "Pump station seven was inspected"]
    )
    parsed = read_document(path, READ_ALL)
    text = " ".join(element.text for element in parsed.elements)
    assert "maintenance report" in text and "Pump station seven" in text
    element = parsed.elements[0]
    assert element.page == 1 and len(element.boxes) == 2  # one box per line
    x0, y0, x1, y1 = element.bbox  # type: ignore[misc]
    assert 40 <= x0 < x1 <= 555 and 60 <= y0 < y1 <= 200  # where the scan lies on the page
    assert parsed.images == []  # the scan is the page, not a figure on it


def test_a_scan_without_ocr_fails_with_a_reason(tmp_path: Path) -> None:
    path = scanned_pdf(tmp_path / "scan.pdf", ["Quarterly maintenance report"])
    with pytest.raises(ParseError, match="OCR is off"):
        read_document(path, ParseOptions(ocr_languages=None))


@needs_tesseract
def test_chinese_text_in_an_image_is_read_without_spaces_between_characters(
    tmp_path: Path,
) -> None:
    path = text_picture(tmp_path / "notice.png", ["北京大学图书馆周一闭馆"], fontname="china-s")
    parsed = read_document(path, READ_ALL)
    assert "北京大学图书馆" in parsed.elements[0].text
    assert parsed.page_sizes == [open_picture(path.read_bytes()).size]
    (picture,) = parsed.images
    assert picture.page == 1 and picture.bbox == (0.0, 0.0, *parsed.page_sizes[0])


def test_pdf_figures_keep_page_and_box_while_icons_and_repeated_logos_are_skipped(
    tmp_path: Path,
) -> None:
    parsed = read_document(pdf_with_figures(tmp_path / "figures.pdf", pages=3), READ_ALL)
    assert [(picture.page, picture.bbox) for picture in parsed.images] == [
        (page, (100.0, 200.0, 420.0, 440.0)) for page in (1, 2, 3)
    ]
    assert len({picture.sha256 for picture in parsed.images}) == 3


def test_pictures_are_not_kept_when_nothing_would_search_them(tmp_path: Path) -> None:
    parsed = read_document(pdf_with_figures(tmp_path / "figures.pdf"), ParseOptions())
    assert parsed.images == [] and parsed.elements


def test_pptx_pictures_carry_their_slide_and_box(tmp_path: Path) -> None:
    from pptx import Presentation
    from pptx.util import Pt

    deck = Presentation()
    for number in (1, 2):
        slide = deck.slides.add_slide(deck.slide_layouts[5])
        slide.shapes.title.text = f"Site visit {number}"
        slide.shapes.add_picture(io.BytesIO(photo(number)), Pt(100), Pt(150), Pt(320), Pt(240))
    deck.save(tmp_path / "visit.pptx")
    parsed = read_document(tmp_path / "visit.pptx", READ_ALL)
    assert [(p.page, p.bbox) for p in parsed.images] == [
        (number, pytest.approx((100, 150, 420, 390))) for number in (1, 2)
    ]


def test_pptx_pictures_in_moved_and_scaled_groups_carry_their_box_on_the_slide(
    tmp_path: Path,
) -> None:
    from pptx import Presentation
    from pptx.util import Pt

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    outer = slide.shapes.add_group_shape()
    inner = outer.shapes.add_group_shape()
    inner.shapes.add_picture(io.BytesIO(photo(4)), Pt(100), Pt(100), Pt(160), Pt(120))
    # Both groups start at the picture's box, (100, 100) sized 160 x 120. Moving a group moves
    # its members; sizing it scales them (the members keep their own coordinates, only the
    # group's box changes): the inner group moves 50 right, inside the outer group, which
    # then moves to (200, 200) and doubles, so that 50 becomes 100.
    inner.left = Pt(150)
    outer.left, outer.top = Pt(200), Pt(200)
    outer.width, outer.height = outer.width * 2, outer.height * 2
    deck.save(tmp_path / "grouped.pptx")
    (picture,) = read_document(tmp_path / "grouped.pptx", READ_ALL).images
    assert picture.page == 1
    assert picture.bbox == pytest.approx((300, 200, 620, 440))


def test_docx_pictures_are_extracted(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_paragraph("The site as surveyed:")
    document.add_picture(io.BytesIO(photo(7)))
    document.save(tmp_path / "survey.docx")
    (picture,) = read_document(tmp_path / "survey.docx", READ_ALL).images
    assert picture.page is None and (picture.width, picture.height) == (320, 240)


def test_a_damaged_image_fails_with_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "photo.jpg"
    path.write_bytes(b"\xff\xd8\xff\xe0 this is not really a JPEG")
    with pytest.raises(ParseError, match="not a readable image"):
        read_document(path, READ_ALL)


@needs_tesseract
def test_an_image_without_words_needs_image_search(tmp_path: Path) -> None:
    path = tmp_path / "photo.png"
    path.write_bytes(photo(3))
    with pytest.raises(ParseError, match=r"images\.clip_model"):
        read_document(path, ParseOptions(ocr_languages="eng"))
    assert read_document(path, READ_ALL).images


def test_the_perceptual_hash_matches_a_resized_copy_and_not_another_picture() -> None:
    original = open_picture(photo(5))
    smaller = original.resize((160, 120))
    other = open_picture(photo(6))
    assert hash_distance(perceptual_hash(original), perceptual_hash(smaller)) <= 4
    assert hash_distance(perceptual_hash(original), perceptual_hash(other)) > 12


@needs_tesseract
def test_words_in_a_pdf_picture_are_read_where_the_picture_is_shown(tmp_path: Path) -> None:
    import pymupdf

    notice = text_picture(tmp_path / "notice.png", ["Pump station seven", "closed for repairs"])
    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    page.insert_text((72, 72), "Site report with a photographed notice.", fontsize=12)
    page.insert_image(pymupdf.Rect(100, 300, 520, 392), filename=notice)
    document.save(tmp_path / "report.pdf")
    options = ParseOptions(ocr_languages="eng", ocr_pictures=True)
    parsed = read_document(tmp_path / "report.pdf", options)
    (read,) = [e for e in parsed.elements if "Pump station seven" in e.text]
    x0, y0, x1, y1 = read.bbox  # type: ignore[misc]
    assert read.page == 1 and 100 <= x0 < x1 <= 520 and 300 <= y0 < y1 <= 392
    assert parsed.images == []  # read for its words; kept as a picture only for image search
    plain = read_document(tmp_path / "report.pdf", ParseOptions(ocr_languages="eng"))
    assert not any("Pump station" in e.text for e in plain.elements)


@needs_tesseract
def test_words_in_office_pictures_are_read_on_their_slide_where_the_picture_is_shown(
    tmp_path: Path,
) -> None:
    import docx
    from pptx import Presentation
    from pptx.util import Pt

    notice = text_picture(tmp_path / "notice.png", ["Pump station seven", "closed for repairs"])
    deck = Presentation()
    for number in (1, 2):
        slide = deck.slides.add_slide(deck.slide_layouts[5])
        slide.shapes.title.text = f"Site visit {number}"
    deck.slides[0].shapes.add_picture(str(notice), Pt(100), Pt(150), Pt(420), Pt(92))
    deck.save(tmp_path / "visit.pptx")
    options = ParseOptions(ocr_languages="eng", ocr_pictures=True)
    elements = read_document(tmp_path / "visit.pptx", options).elements
    texts = [e.text for e in elements]
    (read,) = [e for e in elements if "Pump station seven" in e.text]
    assert texts.index(read.text) < texts.index("Site visit 2")
    assert read.page == 1 and read.section == ("Site visit 1",)
    x0, y0, x1, y1 = read.bbox  # type: ignore[misc]
    assert 100 <= x0 < x1 <= 520 and 150 <= y0 < y1 <= 242

    document = docx.Document()
    document.add_paragraph("The notice at the gate:")
    document.add_picture(str(notice))
    document.save(tmp_path / "survey.docx")
    (read,) = [
        e for e in read_document(tmp_path / "survey.docx", options).elements if "Pump" in e.text
    ]
    assert read.page is None and read.bbox is None
    plain = read_document(tmp_path / "visit.pptx", ParseOptions(ocr_languages="eng"))
    assert not any("Pump station" in e.text for e in plain.elements)
