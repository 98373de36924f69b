"""A document's elements → its text chunks: each element cut into pieces that fit
(``pieces.py``), consecutive pieces packed into chunks, each chunk headed by its context
(``headers.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from rag_pipeline import ids
from rag_pipeline.batching import batched
from rag_pipeline.chunking.chunks import Chunk, ChunkBox
from rag_pipeline.chunking.headers import _Headers
from rag_pipeline.chunking.pieces import _Piece, _split
from rag_pipeline.language import detect_language

if TYPE_CHECKING:
    from rag_pipeline.embedding.dense import TokenCounter
    from rag_pipeline.parsing import Element


def chunk_document(
    elements: Iterable[Element],
    *,
    doc_id: str,
    version: str,
    counter: TokenCounter,
    max_tokens: int,
    overlap_tokens: int,
    document: str | None = None,
) -> Iterator[Chunk]:
    """Chunks of at most ``max_tokens`` model tokens, special tokens included, as they close.

    Every chunk starts with its context: ``document`` (the document's name) and its section.

    Elements are read a batch at a time, so a document of any length is chunked in bounded
    memory.
    """
    budget = min(max_tokens, counter.max_length) - counter.special_tokens
    overlap = min(overlap_tokens, budget // 4)
    headers = _Headers(counter, budget // 8, document)
    packer = _Packer(budget, headers)
    closed: list[list[_Piece]] = []
    index = 0

    def emit(groups: list[list[_Piece]]) -> Iterator[Chunk]:
        nonlocal index
        texts = [
            headers.line(group[0].element) + "\n".join(piece.text.strip() for piece in group)
            for group in groups
        ]
        for text, group, tokens in zip(texts, groups, counter.count(texts), strict=True):
            yield _chunk(doc_id, version, index, text, group, tokens)
            index += 1

    with_text = (element for element in elements if element.text.strip())
    for batch in batched(with_text, _CHARACTERS_PER_BATCH, weight=lambda e: len(e.text)):
        counts = counter.count([element.text for element in batch])
        for element, count in zip(batch, counts, strict=True):
            room = budget - headers.cost(element)
            if count <= room:
                pieces = [_Piece(element, 0, len(element.text), count, element.text)]
            else:
                pieces = _split(element, counter, room, overlap)
            for piece in pieces:
                closed.extend(packer.add(piece))
        if len(closed) >= _GROUPS_PER_COUNT:
            yield from emit(closed)
            closed = []
    closed.extend(packer.finish())
    yield from emit(closed)


# Text whose tokens are counted in one call: the tokenizer's memory grows with it.
_CHARACTERS_PER_BATCH = 200_000
_GROUPS_PER_COUNT = 256  # chunks whose tokens are counted in one call


class _Packer:
    """Consecutive pieces packed into chunks while they fit (see :func:`_joins`)."""

    def __init__(self, budget: int, headers: _Headers) -> None:
        self._budget = budget
        self._headers = headers
        self._group: list[_Piece] = []
        self._tokens = 0

    def add(self, piece: _Piece) -> list[list[_Piece]]:
        """Take ``piece``; return the chunk it closed, if it starts another."""
        if self._group and _joins(self._group, self._tokens, piece, self._budget):
            self._group.append(piece)
            self._tokens += piece.tokens
            return []
        closed = self.finish()
        self._group = [piece]
        self._tokens = self._headers.cost(piece.element) + piece.tokens
        return closed

    def finish(self) -> list[list[_Piece]]:
        closed, self._group = ([self._group] if self._group else []), []
        return closed


def _joins(group: list[_Piece], tokens: int, piece: _Piece, budget: int) -> bool:
    """Whether ``piece`` continues the chunk ``group`` (of ``tokens`` tokens so far)."""
    last = group[-1].element
    if tokens + piece.tokens > budget or piece.element is last:  # too big, or an overlapping split
        return False
    section = piece.element.section
    starts_section = piece.element.kind == "title" or section[: len(last.section)] != last.section
    has_content = any(p.element.kind != "title" for p in group)
    # A new section starts a new chunk, unless the chunk so far is short: headings stay with
    # their first text, and runs of tiny sections are not scattered over tiny chunks.
    return not (starts_section and has_content and tokens >= budget // 4)


def _chunk(
    doc_id: str, version: str, index: int, text: str, group: list[_Piece], tokens: int
) -> Chunk:
    boxes: list[ChunkBox] = []
    for piece in group:
        boxes.extend(_piece_boxes(piece))
    pages = [piece.element.page for piece in group if piece.element.page is not None]
    content = next((p for p in group if p.element.kind != "title"), group[0])
    return Chunk(
        chunk_id=ids.chunk_id(doc_id, version, index),
        doc_id=doc_id,
        version=version,
        index=index,
        text=text,
        page_start=min(pages) if pages else None,
        page_end=max(pages) if pages else None,
        bboxes=boxes,
        section=content.element.section,
        token_count=tokens,
        lang=detect_language(text),
        kinds=tuple(dict.fromkeys(piece.element.kind for piece in group)),
    )


def _piece_boxes(piece: _Piece) -> list[ChunkBox]:
    """The piece's lines on its page, merged into one rectangle (or the element's box)."""
    element = piece.element
    if element.page is None:
        return []
    lines = [box.bbox for box in element.boxes if box.start < piece.end and box.end > piece.start]
    if not lines:
        return [ChunkBox(element.page, *element.bbox)] if element.bbox else []
    return [
        ChunkBox(
            element.page,
            min(b[0] for b in lines),
            min(b[1] for b in lines),
            max(b[2] for b in lines),
            max(b[3] for b in lines),
        )
    ]
