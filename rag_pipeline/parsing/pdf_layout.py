"""A PDF page's blocks as a reader sees them: running headers, footers and page numbers
dropped, the rest in reading order (columns inside bands cut by blocks that cross a gutter)."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from rag_pipeline.parsing.pdf_blocks import Block

_MARGIN = 0.09  # share of the page height where running headers and footers live
_EDGE = 0.25  # where they may be when they are the first or last text on the page
_WHERE = ("top", "bottom", "top edge", "bottom edge")
_PAGE_NUMBER = re.compile(
    r"^(page|seite|p\.|第)?\s*[#ivxlc]+\s*((of|/|von|页)\s*[#ivxlc]+)?\s*(页)?$", re.IGNORECASE
)


def _margin_key(block: Block, page_height: float, edge: bool) -> tuple[str, str] | None:
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


def drop_running_headers_and_footers(
    pages: list[list[Block]], page_sizes: list[tuple[float, float]]
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
            or (counts[key] < repeated[key[0]] and not is_page_number(key[1]))
        ]


def is_page_number(text: str) -> bool:
    """ "12", "Page 3 of 10", "xiv", "第 5 页"."""
    return bool(_PAGE_NUMBER.match(re.sub(r"\d+", "#", text.strip().lower())))


def reading_order(blocks: list[Block], page_width: float) -> list[Block]:
    """Columns left to right inside bands cut by blocks that cross a gutter."""
    by_position = sorted(blocks, key=lambda b: (round(b.bbox[1]), b.bbox[0]))
    columns = _columns(blocks, page_width)
    if len(columns) < 2:
        return by_position

    def column_of(block: Block) -> int | None:
        for index, (left, right) in enumerate(columns):
            if block.bbox[0] >= left - 3 and block.bbox[2] <= right + 3:
                return index
        return None

    spanning = [block for block in by_position if column_of(block) is None]
    ordered: list[Block] = []
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


def _columns(blocks: list[Block], page_width: float) -> list[tuple[float, float]]:
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
