"""PDF → elements with PyMuPDF: text blocks in reading order, with page, box and heading path.

Heuristics, all on PyMuPDF's text blocks:
- reading order: columns are found from the horizontal coverage of narrow blocks on the page;
  blocks that cross a gutter (titles, wide figures, abstracts) cut the page into bands, read top
  to bottom, each band column by column;
- running headers and footers: blocks in the top or bottom margin whose text (digits ignored)
  repeats on many pages, the first or last block of a page whose exact text does (a company
  name over every page, below the margin), and bare page numbers, are dropped;
- headings: short blocks set larger than the body text, or bold at body size; their font sizes
  rank them into levels that build the section path;
- hyphenation: a line ending in ``letter-`` followed by a lower-case letter is joined.

The parts: a page's text blocks (``pdf_blocks``), its tables (``pdf_tables``), the words OCR reads
in scans and pictures (``pdf_ocr``), running headers and reading order (``pdf_layout``); here,
the document: headings ranked into sections, and its title.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from rag_pipeline.parsing import heartbeat
from rag_pipeline.parsing.elements import (
    Element,
    ElementKind,
    ParsedDocument,
    ParseError,
    ParseOptions,
)
from rag_pipeline.parsing.images import pdf_pictures
from rag_pipeline.parsing.pdf_blocks import Block, read_blocks
from rag_pipeline.parsing.pdf_layout import (
    drop_running_headers_and_footers,
    is_page_number,
    reading_order,
)
from rag_pipeline.parsing.pdf_ocr import ScanReader, picture_blocks
from rag_pipeline.parsing.pdf_tables import Table

PARSER_VERSION = "pdf-5"

_HEADING_SIZE_RATIO = 1.15
_MAX_HEADING_LEVELS = 4


def parse_pdf(path: Path, options: ParseOptions) -> ParsedDocument:
    """Text blocks of every page; pages with no text layer (scans) read by OCR when enabled."""
    import pymupdf

    try:
        doc = pymupdf.open(path, filetype="pdf")
    except Exception as error:  # PyMuPDF raises several types for damaged files
        raise ParseError(f"not a readable PDF ({error})") from error
    with doc:
        if doc.needs_pass and not doc.authenticate(""):
            raise ParseError("encrypted PDF: it needs a password to open")
        if doc.page_count == 0:
            raise ParseError("the PDF has no pages")
        page_sizes: list[tuple[float, float]] = []
        pages: list[list[Block]] = []
        last_table: Table | None = None  # of the previous page: a table may continue
        with ScanReader(options) as scans:
            for page in doc:
                page_sizes.append((page.rect.width, page.rect.height))
                blocks, tables = read_blocks(page, last_table)
                last_table = tables[-1] if tables else None
                if not blocks and options.ocr_languages and page.get_images():
                    scans.submit(page)
                pages.append(blocks)
            for number, blocks in scans.results():
                pages[number - 1] = blocks
        scanned = scans.pages
        metadata_title = (doc.metadata or {}).get("title") or None
        picture_languages = options.picture_languages
        # A scanned page is one picture of the page: its words are what it holds.
        pictures = (
            [p for p in pdf_pictures(doc, options.min_image_side) if p.page not in scanned]
            if options.images or picture_languages
            else []
        )
    if picture_languages:
        for picture in pictures:
            assert picture.page is not None
            pages[picture.page - 1].extend(picture_blocks(picture, picture_languages))
            heartbeat.beat()
    if not options.images:
        pictures = []

    drop_running_headers_and_footers(pages, page_sizes)
    all_blocks = [block for blocks in pages for block in blocks]
    if not any(block.text.strip() for block in all_blocks) and not pictures:
        raise ParseError(
            "no text found: the PDF holds no text layer"
            + (
                " and OCR read no words in it"
                if options.ocr_languages
                else " (a scan?) and OCR is off (images.ocr_languages)"
            )
        )
    ordered = [
        block
        for blocks, (width, _) in zip(pages, page_sizes, strict=True)
        for block in reading_order(blocks, width)
    ]
    elements = _elements_with_sections(ordered)
    title = _document_title(metadata_title, elements)
    return ParsedDocument(
        elements=elements,
        title=title,
        page_count=len(page_sizes),
        page_sizes=page_sizes,
        images=pictures,
    )


def _heading_levels(blocks: list[Block]) -> dict[int, int]:
    """Heading level per block index: larger type ranks higher; bold at body size, and a
    table's caption, rank last; a table's caption that opens its page ranks first."""
    sizes = Counter[float]()
    for block in blocks:
        if not block.is_table:
            sizes[block.size] += len(block.text)
    if not sizes:
        return {}
    body = sizes.most_common(1)[0][0]
    candidates: dict[int, float] = {}
    for index, block in enumerate(blocks):
        if not _title_like(block):
            continue
        if block.size >= body * _HEADING_SIZE_RATIO:
            candidates[index] = block.size
        elif block.bold and block.size >= body * 0.95 and len(block.lines) <= 2:
            candidates[index] = body  # ranks below every larger size
    for index in _table_captions(blocks):
        page_title = index == 0 or blocks[index - 1].page != blocks[index].page
        # A statement's title heading its page starts a section of its own, at the top level.
        candidates[index] = math.inf if page_title else candidates.get(index, body)
    ranked = sorted(set(candidates.values()), reverse=True)[:_MAX_HEADING_LEVELS]
    return {
        index: ranked.index(size) + 1 if size in ranked else len(ranked)
        for index, size in candidates.items()
    }


def _title_like(block: Block) -> bool:
    text = block.text.strip()
    short = len(block.lines) <= 3 and len(text) <= 160 and len(text.split()) <= 20
    if block.is_table or not short or not any(ch.isalpha() for ch in text):
        return False
    if is_page_number(text) or (text.startswith("(") and text.endswith(")")):
        return False
    return not text.endswith((".", ",", ";", ":")) or bool(re.match(r"^[\dIVX.]+\s", text))


def _table_captions(blocks: list[Block]) -> Iterable[int]:
    """For each table, the nearest title-like block above it on its page ("Consolidated
    Statements of Cash Flows"), over notes such as "($ in millions)": the table's heading."""
    for index, block in enumerate(blocks):
        if not block.is_table:
            continue
        for above in range(index - 1, max(index - 4, -1), -1):
            candidate = blocks[above]
            if candidate.page != block.page or candidate.is_table:
                break
            if candidate.text.lstrip().startswith(("(", "$", "[")):  # "($ in millions)"
                continue
            if _title_like(candidate):
                yield above
            break


def _elements_with_sections(blocks: list[Block]) -> list[Element]:
    levels = _heading_levels(blocks)
    path: list[tuple[int, str]] = []
    elements: list[Element] = []
    for index, block in enumerate(blocks):
        text = block.text.strip()
        if not text:
            continue
        level = levels.get(index)
        if level is not None:
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, text))
        kind: ElementKind = "title" if level is not None else "paragraph"
        elements.append(
            Element(
                text=block.text,
                kind="table" if block.is_table else kind,
                page=block.page,
                bbox=block.bbox,
                section=tuple(title for _, title in path),
                boxes=block.boxes,
            )
        )
    return elements


def _document_title(metadata_title: str | None, elements: list[Element]) -> str | None:
    """The metadata's title when it is one (not a filing number, not the converter's
    "Microsoft Word - draft.docx"), else the first heading of page 1."""
    title = (metadata_title or "").strip()
    letters = sum(ch.isalpha() for ch in title)
    if title.startswith("Microsoft Word - ") or letters < 3 or "untitled" in title.lower():
        first_page_titles = [e for e in elements if e.kind == "title" and e.page == 1]
        return first_page_titles[0].text if first_page_titles else None
    return title
