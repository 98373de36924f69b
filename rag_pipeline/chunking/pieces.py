"""An element cut into pieces that fit a chunk: a paragraph at sentence ends, a sentence at
token boundaries, a table or list between rows, with overlap."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rag_pipeline.language import line_spans, sentence_spans

if TYPE_CHECKING:
    from rag_pipeline.embedding.dense import TokenCounter
    from rag_pipeline.parsing import Element


@dataclass(slots=True)
class _Piece:
    element: Element
    start: int
    end: int
    tokens: int
    text: str = field(default="")


def _split(element: Element, counter: TokenCounter, budget: int, overlap: int) -> list[_Piece]:
    text = element.text
    if element.kind in ("table", "list"):
        return _split_rows(element, counter, budget, overlap, repeat_header=element.kind == "table")
    spans = sentence_spans(text)
    counts = counter.count([text[a:b] for a, b in spans])
    pieces: list[_Piece] = []
    index = 0
    while index < len(spans):
        if counts[index] > budget:  # one sentence longer than a chunk: cut it at token boundaries
            start, end = spans[index]
            pieces.extend(_split_tokens(element, start, end, counter, budget, overlap))
            index += 1
            continue
        # Pieces of even size: a 300-token paragraph becomes two of about 175 (with the
        # overlap), not one of 254 and a stub of 50 that says little on its own.
        target = _even_share(sum(counts[index:]), budget, overlap)
        first, total = index, 0
        while (
            index < len(spans)
            and total + counts[index] <= budget
            # take the sentence if that ends nearer the target than stopping before it
            and (total == 0 or total + counts[index] - target < target - total)
        ):
            total += counts[index]
            index += 1
        start, end = spans[first][0], spans[index - 1][1]
        pieces.append(_Piece(element, start, end, total, text[start:end]))
        if index < len(spans):
            # Step back over whole sentences worth about `overlap` tokens for the next piece.
            back, carried = index, 0
            while back - 1 > first and carried + counts[back - 1] <= overlap:
                back -= 1
                carried += counts[back]
            index = back
    return pieces


def _even_share(remaining: int, budget: int, overlap: int) -> int:
    """Tokens per piece that split ``remaining`` into the fewest pieces of even size."""
    if remaining <= budget:
        return budget
    pieces = -(-(remaining - overlap) // (budget - overlap))  # ceiling division
    return -(-(remaining + (pieces - 1) * overlap) // pieces)


def _split_tokens(
    element: Element, start: int, end: int, counter: TokenCounter, budget: int, overlap: int
) -> list[_Piece]:
    offsets = [(a + start, b + start) for a, b in counter.offsets(element.text[start:end])]
    pieces: list[_Piece] = []
    first = 0
    while first < len(offsets):
        last = min(first + budget, len(offsets))
        piece_start, piece_end = offsets[first][0], offsets[last - 1][1]
        pieces.append(
            _Piece(
                element, piece_start, piece_end, last - first, element.text[piece_start:piece_end]
            )
        )
        if last == len(offsets):
            break
        first = max(last - overlap, first + 1)
    return pieces


def _split_rows(
    element: Element, counter: TokenCounter, budget: int, overlap: int, repeat_header: bool
) -> list[_Piece]:
    lines = line_spans(element.text, 0, len(element.text))
    counts = counter.count([element.text[a:b] for a, b in lines])
    header = lines[0] if repeat_header and counts[0] < budget // 2 else None
    header_tokens = counts[0] if header else 0
    pieces: list[_Piece] = []
    index = 1 if header else 0
    while index < len(lines):
        if counts[index] + header_tokens > budget:  # one row longer than a chunk
            pieces.extend(_split_tokens(element, *lines[index], counter, budget, overlap))
            index += 1
            continue
        first, total = index, header_tokens
        while index < len(lines) and total + counts[index] <= budget:
            total += counts[index]
            index += 1
        start, end = lines[first][0], lines[index - 1][1]
        body = element.text[start:end]
        text = f"{element.text[header[0] : header[1]]}\n{body}" if header else body
        pieces.append(_Piece(element, start, end, total, text))
    return pieces
