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
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rag_pipeline.parsing import heartbeat, ocr
from rag_pipeline.parsing.elements import (
    BBox,
    Element,
    ElementKind,
    ParsedDocument,
    ParsedImage,
    ParseError,
    ParseOptions,
    TextBox,
    enclosing,
)
from rag_pipeline.parsing.images import open_picture, pdf_pictures, placement_on_page
from rag_pipeline.parsing.lines import join_lines
from rag_pipeline.parsing.pdf_tables import Table, find_tables, page_cells

if TYPE_CHECKING:
    from PIL.Image import Image

PARSER_VERSION = "pdf-5"

_MARGIN = 0.09  # share of the page height where running headers and footers live
_EDGE = 0.25  # where they may be when they are the first or last text on the page
_WHERE = ("top", "bottom", "top edge", "bottom edge")
_HEADING_SIZE_RATIO = 1.15
_MAX_HEADING_LEVELS = 4
_PAGE_NUMBER = re.compile(
    r"^(page|seite|p\.|第)?\s*[#ivxlc]+\s*((of|/|von|页)\s*[#ivxlc]+)?\s*(页)?$", re.IGNORECASE
)


@dataclass(slots=True)
class _Line:
    text: str
    bbox: BBox
    size: float
    bold: bool


@dataclass(slots=True)
class _Block:
    page: int
    lines: list[_Line]
    bbox: BBox
    size: float  # dominant font size, by characters
    bold: bool
    text: str = ""
    boxes: tuple[TextBox, ...] = ()
    is_table: bool = False

    @property
    def width(self) -> float:
        return self.bbox[2] - self.bbox[0]

    @property
    def height(self) -> float:
        return self.bbox[3] - self.bbox[1]


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
        pages: list[list[_Block]] = []
        last_table: Table | None = None  # of the previous page: a table may continue
        with _ScanReader(options) as scans:
            for page in doc:
                page_sizes.append((page.rect.width, page.rect.height))
                blocks, tables = _read_blocks(page, last_table)
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
            pages[picture.page - 1].extend(_picture_blocks(picture, picture_languages))
            heartbeat.beat()
    if not options.images:
        pictures = []

    _drop_running_headers_and_footers(pages, page_sizes)
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
        for block in _reading_order(blocks, width)
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


class _ScanReader:
    """OCR of a PDF's scanned pages, several at once (tesseract runs as a subprocess, so threads
    suffice), each page rendered in this thread (MuPDF is not thread-safe) just before it is
    needed: at most two pages per thread wait in memory."""

    def __init__(self, options: ParseOptions) -> None:
        self.languages = options.ocr_languages or ""
        self.dpi = options.ocr_dpi
        self.pages: set[int] = set()  # page numbers read by OCR
        self._threads = len(os.sched_getaffinity(0))
        self._executor = ThreadPoolExecutor(self._threads, thread_name_prefix="ocr")
        self._pending: dict[Future[list[_Block]], int] = {}
        self._done: list[tuple[int, list[_Block]]] = []

    def __enter__(self) -> _ScanReader:
        return self

    def __exit__(self, *exception: object) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def submit(self, page: object) -> None:
        from PIL import Image

        while len(self._pending) >= 2 * self._threads:
            self._collect(wait(self._pending, return_when=FIRST_COMPLETED).done)
        pixmap = page.get_pixmap(dpi=self.dpi)  # type: ignore[attr-defined]
        picture = Image.frombytes("RGB", (pixmap.width, pixmap.height), pixmap.samples)
        number = page.number + 1  # type: ignore[attr-defined]
        size = page.rect  # type: ignore[attr-defined]
        place = placement_on_page(picture, (0.0, 0.0, size.width, size.height))
        future = self._executor.submit(_blocks_read_in, picture, self.languages, number, place)
        self._pending[future] = number
        self.pages.add(number)

    def results(self) -> list[tuple[int, list[_Block]]]:
        """(page number, its blocks) for every page submitted, once all are read."""
        self._collect(as_completed(list(self._pending)))
        return self._done

    def _collect(self, finished: Iterable[Future[list[_Block]]]) -> None:
        for future in finished:
            self._done.append((self._pending.pop(future), future.result()))
            heartbeat.beat()  # OCR takes seconds a page: the time limit restarts here


def _picture_blocks(picture: ParsedImage, languages: str) -> list[_Block]:
    """The words in a picture on a page, read by OCR, placed where the picture is shown."""
    assert picture.page is not None and picture.bbox is not None
    image = open_picture(picture.data)
    return _blocks_read_in(image, languages, picture.page, placement_on_page(image, picture.bbox))


def _blocks_read_in(
    picture: Image, languages: str, page_number: int, place: Callable[[BBox], BBox]
) -> list[_Block]:
    """OCR lines of ``picture`` as blocks (one per paragraph), ``place`` mapping its pixels to
    PDF points."""
    blocks: list[_Block] = []
    for paragraph in ocr.read_paragraphs(picture, languages):
        lines: list[_Line] = []
        for line in paragraph:
            box = place(line.bbox)
            # A line's box is about its font size high: what heading detection compares.
            size = round((box[3] - box[1]) * 2) / 2
            lines.append(_Line(text=line.text, bbox=box, size=size, bold=False))
        blocks.append(_block(page_number, lines))
    return blocks


def _read_blocks(page: object, continued: Table | None) -> tuple[list[_Block], list[Table]]:
    """The page's blocks, its tables among them (``continued``: see ``find_tables``)."""
    import pymupdf

    # Ligatures expanded ("ﬁ" → "fi"); embedded images are not needed for text.
    flags = pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP
    data = page.get_text("dict", flags=flags)  # type: ignore[attr-defined]
    width = page.rect.width  # type: ignore[attr-defined]
    page_number = page.number + 1  # type: ignore[attr-defined]
    tables = find_tables(page_cells(data), continued)
    blocks: list[_Block] = [_table_block(page_number, table) for table in tables]
    for raw in data["blocks"]:
        lines: list[_Line] = []
        for line in raw.get("lines", ()):
            spans = line["spans"]
            if not any(span["text"].strip() for span in spans):
                continue
            if any(_inside(line["bbox"], table.bbox) for table in tables):
                continue
            horizontal = abs(line["dir"][1]) < 0.1
            in_side_margin = line["bbox"][2] < 0.08 * width or line["bbox"][0] > 0.92 * width
            if not horizontal and in_side_margin:  # e.g. arXiv's vertical stamp
                continue
            text = "".join(span["text"] for span in spans)
            chars = Counter[tuple[float, bool]]()
            for span in spans:
                bold = bool(span["flags"] & 16) or "bold" in span["font"].lower()
                chars[(round(span["size"] * 2) / 2, bold)] += len(span["text"].strip())
            (size, bold), _ = chars.most_common(1)[0]
            lines.append(_Line(text=text, bbox=tuple(line["bbox"]), size=size, bold=bold))
        blocks.extend(_blocks_split_by_style(page_number, lines))
    return blocks, tables


def _inside(box: BBox, table: BBox) -> bool:
    """Whether a line's middle lies within a table's box: the table holds its text."""
    x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return table[0] - 1 <= x <= table[2] + 1 and table[1] - 1 <= y <= table[3] + 1


def _table_block(page: int, table: Table) -> _Block:
    return _Block(
        page=page,
        lines=[],
        bbox=table.bbox,
        size=0.0,
        bold=False,
        text=table.text,
        boxes=table.boxes,
        is_table=True,
    )


def _blocks_split_by_style(page: int, lines: list[_Line]) -> list[_Block]:
    """PyMuPDF often puts a heading and its first paragraph in one block: split at style changes."""
    groups: list[list[_Line]] = []
    for line in lines:
        if groups:
            previous = groups[-1][-1]
            same_style = (
                abs(line.size - previous.size) <= 0.1 * max(line.size, previous.size)
                and line.bold == previous.bold
            )
            if same_style:
                groups[-1].append(line)
                continue
        groups.append([line])
    return [_block(page, group) for group in groups]


def _block(page: int, lines: list[_Line]) -> _Block:
    weights = Counter[tuple[float, bool]]()
    for line in lines:
        weights[(line.size, line.bold)] += len(line.text)
    (size, bold), _ = weights.most_common(1)[0]
    bbox = enclosing(line.bbox for line in lines)
    assert bbox is not None  # a block has lines
    text, boxes = join_lines((line.text, line.bbox) for line in lines)
    return _Block(page=page, lines=lines, bbox=bbox, size=size, bold=bold, text=text, boxes=boxes)


def _margin_key(block: _Block, page_height: float, edge: bool) -> tuple[str, str] | None:
    """What a running header or footer would repeat: the text of a block in the top or bottom
    margin, digits ignored (page numbers); of the first or last block on its page, near the
    margin, the exact text (a company name over every page); None for other blocks."""
    if block.is_table:
        return None
    text = " ".join(block.text.lower().split())
    top, bottom = block.bbox[3] / page_height, block.bbox[1] / page_height
    if top <= _MARGIN or bottom >= 1 - _MARGIN:
        return ("top" if top <= _MARGIN else "bottom"), re.sub(r"\d+", "#", text)  # page numbers
    if edge and (top <= _EDGE or bottom >= 1 - _EDGE):
        return ("top edge" if top <= _EDGE else "bottom edge"), text
    return None


def _drop_running_headers_and_footers(
    pages: list[list[_Block]], page_sizes: list[tuple[float, float]]
) -> None:
    """Drop what repeats in the same place on many pages (a company name above every page,
    wherever the margin is), and bare page numbers."""
    keys_per_page: list[dict[int, tuple[str, str] | None]] = []
    for blocks, (_, height) in zip(pages, page_sizes, strict=True):
        edges = (
            {id(min(blocks, key=lambda b: b.bbox[1])), id(max(blocks, key=lambda b: b.bbox[3]))}
            if len(blocks) >= 4  # on a page of a few blocks, the first and last are its text
            else set()
        )
        keys_per_page.append(
            {id(block): _margin_key(block, height, id(block) in edges) for block in blocks}
        )
    counts = Counter(key for keys in keys_per_page for key in set(keys.values()) if key)
    share = int(0.4 * len(pages))
    # Outside the margin, more pages must agree: a statement's title repeated over its three
    # pages is a title.
    repeated = {where: max(5 if "edge" in where else 3, share) for where in _WHERE}
    for blocks, keys in zip(pages, keys_per_page, strict=True):
        blocks[:] = [
            block
            for block in blocks
            if not (key := keys[id(block)])
            or (counts[key] < repeated[key[0]] and not _is_page_number(key[1]))
        ]


def _is_page_number(text: str) -> bool:
    """ "12", "Page 3 of 10", "xiv", "第 5 页"."""
    return bool(_PAGE_NUMBER.match(re.sub(r"\d+", "#", text.strip().lower())))


def _reading_order(blocks: list[_Block], page_width: float) -> list[_Block]:
    """Columns left to right inside bands cut by blocks that cross a gutter."""
    by_position = sorted(blocks, key=lambda b: (round(b.bbox[1]), b.bbox[0]))
    columns = _columns(blocks, page_width)
    if len(columns) < 2:
        return by_position

    def column_of(block: _Block) -> int | None:
        for index, (left, right) in enumerate(columns):
            if block.bbox[0] >= left - 3 and block.bbox[2] <= right + 3:
                return index
        return None

    spanning = [block for block in by_position if column_of(block) is None]
    ordered: list[_Block] = []
    for band in range(len(spanning) + 1):
        top = spanning[band - 1].bbox[1] if band else float("-inf")
        bottom = spanning[band].bbox[1] if band < len(spanning) else float("inf")
        in_band = [
            block
            for block in by_position
            if column_of(block) is not None and top <= (block.bbox[1] + block.bbox[3]) / 2 < bottom
        ]
        in_band.sort(key=lambda b: (column_of(b), b.bbox[1], b.bbox[0]))
        ordered.extend(in_band)
        if band < len(spanning):
            ordered.append(spanning[band])
    return ordered


def _columns(blocks: list[_Block], page_width: float) -> list[tuple[float, float]]:
    """x-ranges of the text columns: separated by gutters that narrow blocks leave empty."""
    if len(blocks) < 3:
        return []
    left = min(block.bbox[0] for block in blocks)
    right = max(block.bbox[2] for block in blocks)
    narrow = [block for block in blocks if block.width < 0.55 * (right - left)]
    if len(narrow) < 2:
        return []
    coverage = np.zeros(int(page_width) + 2)
    for block in narrow:
        coverage[max(int(block.bbox[0]), 0) : int(block.bbox[2]) + 1] += block.height
    dense = coverage > 0.05 * coverage.max()
    gutters: list[tuple[int, int]] = []
    x = int(left) + 10
    while x < int(right) - 10:
        if dense[x]:
            x += 1
            continue
        start = x
        while x < int(right) - 10 and not dense[x]:
            x += 1
        if x - start >= 6 and dense[:start].any() and dense[x:].any():
            gutters.append((start, x))
    if not gutters:
        return []
    edges = [left, *[edge for gutter in gutters for edge in gutter], right]
    columns = [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2)]
    # A "column" holding one short block is a side note or a stray label, not a column.
    top = min(block.bbox[1] for block in blocks)
    bottom = max(block.bbox[3] for block in blocks)
    for a, b in columns:
        inside = [block for block in narrow if block.bbox[0] >= a - 3 and block.bbox[2] <= b + 3]
        if len(inside) < 2 and sum(block.height for block in inside) < 0.25 * (bottom - top):
            return []
    return columns


def _heading_levels(blocks: list[_Block]) -> dict[int, int]:
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


def _title_like(block: _Block) -> bool:
    text = block.text.strip()
    short = len(block.lines) <= 3 and len(text) <= 160 and len(text.split()) <= 20
    if block.is_table or not short or not any(ch.isalpha() for ch in text):
        return False
    if _is_page_number(text) or (text.startswith("(") and text.endswith(")")):
        return False
    return not text.endswith((".", ",", ";", ":")) or bool(re.match(r"^[\dIVX.]+\s", text))


def _table_captions(blocks: list[_Block]) -> Iterable[int]:
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


def _elements_with_sections(blocks: list[_Block]) -> list[Element]:
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
