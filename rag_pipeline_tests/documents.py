"""Documents the tests write themselves: PDFs with PyMuPDF, DOCX with python-docx."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pymupdf

# Lines as set, the second ending in a hyphenated word.
LEFT_COLUMN_LINES = [
    "Retrieval augmented generation grounds a",
    "language model in documents it can cite. The em-",
    "bedding model sees passages small enough for it,",
    "and each vector keeps its page and its box.",
]
LEFT_COLUMN_MORE = (
    "Chunks follow the structure of the document: headings, paragraphs and tables come first, "
    "token counts second."
)
RIGHT_COLUMN = [
    "Hybrid search combines dense vectors with sparse keyword vectors so that rare terms "
    "such as product codes like XJ-4471 are still found when semantic similarity fails.",
]


def _paragraph(
    page: pymupdf.Page, x: float, y: float, width: float, text: str, size: float = 10
) -> float:
    """Write ``text`` as lines within ``width`` points from (x, y); return the next y."""
    words, line, leading = text.split(), "", size * 1.25
    for word in words:
        candidate = f"{line} {word}".strip()
        if pymupdf.get_text_length(candidate, fontsize=size) > width and line:
            page.insert_text((x, y), line, fontsize=size)
            y += leading
            line = word
        else:
            line = candidate
    if line:
        page.insert_text((x, y), line, fontsize=size)
        y += leading
    return y + leading


def two_column_pdf(path: Path, pages: int = 3) -> Path:
    """A report: a heading across the top, two columns, a running header and a page-number footer.

    One left-column line ends in ``em-`` (``embedding`` hyphenated), and reading order runs
    down the left column before the right one.
    """
    doc = pymupdf.open()
    for number in range(1, pages + 1):
        page = doc.new_page(width=595, height=842)
        page.insert_text((72, 40), "ACME Quarterly Report — Confidential", fontsize=8)
        page.insert_text(
            (72, 100), f"Section {number}: Retrieval Methods", fontsize=16, fontname="hebo"
        )
        for line_number, line in enumerate(LEFT_COLUMN_LINES):
            page.insert_text((72, 140 + 12.5 * line_number), line, fontsize=10)
        _paragraph(page, 72, 215, 210, LEFT_COLUMN_MORE)
        y = 140
        for paragraph in RIGHT_COLUMN:
            y = _paragraph(page, 320, y, 210, paragraph)
        page.insert_text((290, 810), f"Page {number} of {pages}", fontsize=8)
    doc.save(path)
    return path


def text_pdf(path: Path, paragraphs: list[str], *, fontname: str = "helv") -> Path:
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    y = 72
    for paragraph in paragraphs:
        if y > 760:
            page = doc.new_page(width=595, height=842)
            y = 72
        box = pymupdf.Rect(72, y, 523, y + 200)
        page.insert_textbox(box, paragraph, fontsize=10, fontname=fontname)
        y += 14 * (1 + len(paragraph) // 80) + 20
    doc.save(path)
    return path


def encrypted_pdf(path: Path) -> Path:
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "secret text", fontsize=12)
    doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner", user_pw="user")
    return path


def zero_page_pdf(path: Path) -> Path:
    """A syntactically valid PDF whose page tree is empty (PyMuPDF refuses to write one)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [] /Count 0 >>",
    ]
    body, offsets = b"%PDF-1.7\n", []
    for number, content in enumerate(objects, 1):
        offsets.append(len(body))
        body += f"{number} 0 obj\n".encode() + content + b"\nendobj\n"
    xref = len(body)
    body += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    body += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    body += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    path.write_bytes(body)
    return path


def image_only_pdf(path: Path) -> Path:
    """A scanned page: an image and no text layer."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (200, 100), (200, 30, 30)).save(buffer, format="PNG")
    doc = pymupdf.open()
    doc.new_page().insert_image(pymupdf.Rect(72, 72, 272, 172), stream=buffer.getvalue())
    doc.save(path)
    return path


def docx_file(
    path: Path, sections: dict[str, list[str]], *, table: list[list[str]] | None = None
) -> Path:
    import docx

    document = docx.Document()
    for heading, paragraphs in sections.items():
        document.add_heading(heading, level=1)
        for paragraph in paragraphs:
            document.add_paragraph(paragraph)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for row, values in zip(grid.rows, table, strict=True):
            for cell, value in zip(row.cells, values, strict=True):
                cell.text = value
    document.save(path)
    return path


def long_pdf(path: Path, pages: int) -> Path:
    """Many copies of the two-column page, made by doubling (fast to write, slow to parse)."""
    doc = pymupdf.open(two_column_pdf(path.with_suffix(".page.pdf"), pages=1))
    while doc.page_count < pages:
        copy = pymupdf.open("pdf", doc.tobytes())
        doc.insert_pdf(copy, to_page=min(copy.page_count, pages - doc.page_count) - 1)
    doc.save(path)
    return path


def text_picture(path: Path, lines: list[str], *, fontname: str = "helv", dpi: int = 150) -> Path:
    """An image of typed text (a photo of a notice, a screenshot): PNG, JPEG… by its suffix."""
    doc = pymupdf.open()
    page = doc.new_page(width=420, height=40 + 26 * len(lines))
    for number, line in enumerate(lines):
        page.insert_text((24, 34 + 26 * number), line, fontsize=16, fontname=fontname)
    pixmap = page.get_pixmap(dpi=dpi)
    from PIL import Image

    Image.frombytes("RGB", (pixmap.width, pixmap.height), pixmap.samples).save(path)
    return path


def scanned_pdf(path: Path, lines: list[str], *, fontname: str = "helv", pages: int = 1) -> Path:
    """A scan: each page one picture of typed text, no text layer."""
    picture = text_picture(path.with_suffix(".scan.png"), lines, fontname=fontname, dpi=200)
    doc = pymupdf.open()
    for _ in range(pages):
        page = doc.new_page(width=595, height=842)
        page.insert_image(
            pymupdf.Rect(40, 60, 555, 60 + 515 * (40 + 26 * len(lines)) / 420), filename=picture
        )
    doc.save(path)
    picture.unlink()
    return path


def photo(seed: int, size: tuple[int, int] = (320, 240)) -> bytes:
    """A picture with structure at every scale (distinct seeds give unrelated pictures): PNG."""
    from PIL import Image

    generator = np.random.default_rng(seed)
    coarse = generator.integers(0, 256, (6, 8, 3), dtype=np.uint8)
    picture = Image.fromarray(coarse).resize(size, Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return buffer.getvalue()


def pdf_with_figures(path: Path, *, pages: int = 3) -> Path:
    """Text pages, each with its own figure, a logo on every page, and a tiny icon on page 1."""
    logo, icon = photo(1000, (120, 60)), photo(1001, (24, 24))
    doc = pymupdf.open()
    for number in range(1, pages + 1):
        page = doc.new_page(width=595, height=842)
        page.insert_text((72, 72), f"Chapter {number}: field observations", fontsize=14)
        page.insert_text((72, 100), f"Figure {number} shows the site as surveyed.", fontsize=10)
        page.insert_image(pymupdf.Rect(100, 200, 420, 440), stream=photo(number))
        page.insert_image(pymupdf.Rect(480, 20, 570, 65), stream=logo)
        if number == 1:
            page.insert_image(pymupdf.Rect(72, 120, 84, 132), stream=icon)
    doc.save(path)
    return path
