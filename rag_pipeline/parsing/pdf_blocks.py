"""A PDF page's text as blocks: PyMuPDF's text blocks, the lines inside a table left to the
table's block, each block split where its lines change size or weight (a heading over its first
paragraph), lines joined (hyphenation: a line ending in ``letter-`` followed by a lower-case
letter is joined)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from rag_pipeline.parsing.elements import BBox, TextBox, enclosing
from rag_pipeline.parsing.lines import join_lines
from rag_pipeline.parsing.pdf_tables import Table, find_tables, page_cells


@dataclass(slots=True)
class Line:
    text: str
    bbox: BBox
    size: float
    bold: bool


@dataclass(slots=True)
class Block:
    page: int
    lines: list[Line]
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


def read_blocks(page: object, continued: Table | None) -> tuple[list[Block], list[Table]]:
    """The page's blocks, its tables among them (``continued``: see ``find_tables``)."""
    import pymupdf

    # Ligatures expanded ("ﬁ" → "fi"); embedded images are not needed for text.
    flags = pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP
    data = page.get_text("dict", flags=flags)  # type: ignore[attr-defined]
    width = page.rect.width  # type: ignore[attr-defined]
    page_number = page.number + 1  # type: ignore[attr-defined]
    tables = find_tables(page_cells(data), continued)
    blocks: list[Block] = [_table_block(page_number, table) for table in tables]
    for raw in data["blocks"]:
        lines: list[Line] = []
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
            lines.append(Line(text=text, bbox=tuple(line["bbox"]), size=size, bold=bold))
        blocks.extend(_blocks_split_by_style(page_number, lines))
    return blocks, tables


def _inside(box: BBox, table: BBox) -> bool:
    """Whether a line's middle lies within a table's box: the table holds its text."""
    x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return table[0] - 1 <= x <= table[2] + 1 and table[1] - 1 <= y <= table[3] + 1


def _table_block(page: int, table: Table) -> Block:
    return Block(
        page=page,
        lines=[],
        bbox=table.bbox,
        size=0.0,
        bold=False,
        text=table.text,
        boxes=table.boxes,
        is_table=True,
    )


def _blocks_split_by_style(page: int, lines: list[Line]) -> list[Block]:
    """PyMuPDF often puts a heading and its first paragraph in one block: split at style changes."""
    groups: list[list[Line]] = []
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
    return [block_of_lines(page, group) for group in groups]


def block_of_lines(page: int, lines: list[Line]) -> Block:
    weights = Counter[tuple[float, bool]]()
    for line in lines:
        weights[(line.size, line.bold)] += len(line.text)
    (size, bold), _ = weights.most_common(1)[0]
    bbox = enclosing(line.bbox for line in lines)
    assert bbox is not None  # a block has lines
    text, boxes = join_lines((line.text, line.bbox) for line in lines)
    return Block(page=page, lines=lines, bbox=bbox, size=size, bold=bold, text=text, boxes=boxes)
