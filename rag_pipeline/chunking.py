"""Elements → chunks: structure first, then size in tokens of the dense model's own tokenizer.

1. Every element becomes one or more pieces that fit the budget: a long paragraph is split at
   sentence ends (English and Chinese), a long sentence at token boundaries, both with overlap;
   a long table or list is split between rows, a table repeating its header row.
2. Consecutive pieces are packed into chunks while they fit; a heading starts a new chunk, and a
   new section does too unless the chunk so far is short, so headings stay with their text.

Sizes are counted with the model's tokenizer because the model silently drops whatever lies
beyond its sequence length: a chunk that does not fit is a chunk that is partly not searchable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_pipeline import ids
from rag_pipeline.batching import batched
from rag_pipeline.language import detect_language, line_spans, sentence_spans

# Bump when chunks come out differently for the same elements and settings: it re-indexes.
CHUNKER_VERSION = "chunks-6"

if TYPE_CHECKING:
    from rag_pipeline.embedding.dense import TokenCounter
    from rag_pipeline.parsing import Element

_LETTER = re.compile(r"[^\W\d_]")
_WORD = re.compile(r"[^\W\d_]{4,}")  # four letters or more


@dataclass(frozen=True, slots=True)
class ChunkBox:
    page: int
    x0: float
    y0: float
    x1: float
    y1: float


@dataclass(slots=True)
class Chunk:
    chunk_id: str
    doc_id: str
    version: str
    index: int
    text: str
    page_start: int | None
    page_end: int | None
    bboxes: list[ChunkBox]
    section: tuple[str, ...]
    token_count: int
    lang: str
    kinds: tuple[str, ...] = ()
    modality: str = "text"
    image_sha256: str | None = None
    image_file: str | None = None
    phash: str | None = None

    @property
    def text_hash(self) -> str:
        return ids.text_hash(self.text)


@dataclass(slots=True)
class _Piece:
    element: Element
    start: int
    end: int
    tokens: int
    text: str = field(default="")


def document_name(relative_path: str, title: str | None) -> str | None:
    """What a document's chunks say they come from: its file name, which users choose to say
    what it is ("ACME_2023_10K", "3M_2018_10K"), unless that is a number or a code ("4983",
    "DEV_0"); then its title."""
    stem = Path(relative_path).stem.replace("_", " ")
    lettered = [part for part in re.split(r"[\s.-]+", stem) if _LETTER.search(part)]
    return stem if _WORD.search(stem) or len(lettered) >= 2 else title


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


class _Headers:
    """The line giving a chunk's context, put first: the document's name and the chunk's
    section (a chunk that starts at a heading has that heading as its first line already).

    A chunk cut from the middle of a section otherwise loses what it is about (the report, the
    statement, the chapter, the sheet), which both the dense model and keyword search need.
    """

    def __init__(self, counter: TokenCounter, most_tokens: int, document: str | None) -> None:
        self._counter = counter
        self._most = most_tokens
        self._document = " ".join(document.split()) if document else ""
        self._lines: dict[tuple[tuple[str, ...], str], tuple[str, int]] = {}

    def _of(self, element: Element) -> tuple[str, int]:
        section = tuple(" ".join(part.split()) for part in element.section)
        document = self._document
        # A document whose outermost heading is its name (a paper's title) is named once, as
        # the heading spells it.
        if section and document and section[0].casefold() == document.casefold():
            document, section = section[0], section[1:]
            if element.kind == "title" and not section:  # the heading is that name
                return "", 0
        if element.kind == "title":  # a chunk that starts at a heading holds it already
            section = ()
        key = (section, document)
        if key not in self._lines:
            self._lines[key] = self._fitted(section, document)
        return self._lines[key]

    def _fitted(self, section: tuple[str, ...], document: str) -> tuple[str, int]:
        """(line, its tokens): sections below the document's name dropped from the outside
        until it is short enough, then the name too; the innermost cut after its last whole
        word that fits when even it is too long (a long paper title: its first words still say
        what the chunk is about)."""
        names = list(section)
        named = [document] if document else []
        shortened = [named + names[start:] for start in range(len(names))]
        for parts in [*shortened, names[-1:]] if names else [named]:
            if not parts:
                continue
            candidate = " › ".join(parts)
            tokens = self._counter.count([candidate])[0] + 1  # and its newline
            if tokens <= self._most:
                return candidate + "\n", tokens
        if not (names or named) or self._most < 2:
            return "", 0
        innermost = (names or named)[-1]
        end = self._counter.offsets(innermost)[self._most - 2][1]  # keeps most - 1 tokens
        cut = innermost[:end]
        if not innermost[end].isspace() and " " in cut:  # not in the middle of a word
            cut = cut.rsplit(" ", 1)[0]
        return cut + "\n", self._counter.count([cut])[0] + 1

    def line(self, element: Element) -> str:
        return self._of(element)[0]

    def cost(self, element: Element) -> int:
        return self._of(element)[1]


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


def picture_chunks(
    pictures: list[dict[str, Any]],
    captions: dict[str, str],
    *,
    doc_id: str,
    version: str,
    first_index: int,
    counter: TokenCounter,
) -> list[Chunk]:
    """One chunk per picture (a parsed-stage picture record), its caption as its text."""
    texts = [captions.get(picture["sha256"], "") for picture in pictures]
    counts = counter.count(texts) if any(texts) else [0] * len(texts)
    chunks = []
    for offset, (picture, text, tokens) in enumerate(zip(pictures, texts, counts, strict=True)):
        page, bbox = picture["page"], picture["bbox"]
        chunks.append(
            Chunk(
                chunk_id=ids.chunk_id(doc_id, version, first_index + offset),
                doc_id=doc_id,
                version=version,
                index=first_index + offset,
                text=text,
                page_start=page,
                page_end=page,
                bboxes=[ChunkBox(page, *bbox)] if page is not None and bbox else [],
                section=(),
                token_count=tokens if text else 0,
                lang=detect_language(text),
                kinds=("image",),
                modality="image",
                image_sha256=picture["sha256"],
                image_file=picture["file"],
                phash=picture["phash"],
            )
        )
    return chunks


def chunk_as_record(chunk: Chunk) -> dict[str, Any]:
    """A chunk as one row of the catalog's chunk table."""
    return {
        "chunk_id": chunk.chunk_id,
        "doc_id": chunk.doc_id,
        "version": chunk.version,
        "chunk_index": chunk.index,
        "text": chunk.text,
        "text_hash": chunk.text_hash,
        "page_start": chunk.page_start,
        "page_end": chunk.page_end,
        "bboxes": [
            {"page": b.page, "x0": b.x0, "y0": b.y0, "x1": b.x1, "y1": b.y1} for b in chunk.bboxes
        ],
        "section": list(chunk.section),
        "token_count": chunk.token_count,
        "lang": chunk.lang,
        "kinds": list(chunk.kinds),
        "modality": chunk.modality,
        "image_sha256": chunk.image_sha256,
        "image_file": chunk.image_file,
        "phash": chunk.phash,
    }
