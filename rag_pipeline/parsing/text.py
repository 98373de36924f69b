"""Plain text, CSV/TSV, JSON, logs: decoded with encoding detection, then paragraphs or tables."""

from __future__ import annotations

import codecs
import csv
import itertools
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from rag_pipeline.language import is_unspaced
from rag_pipeline.parsing.elements import MAX_ELEMENT_CHARS, Element, ParsedDocument, ParseError

PARSER_VERSION = "text-2"

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_SENTENCE_END = re.compile(r"[.!?。！？；…:：]['\"”’)）]*$")
_BLANK_LINE = re.compile(r"\n\s*\n")
_BLOCK_BYTES = 1 << 20  # read and decoded at a time
_PRETTY_JSON_BYTES = 16 << 20  # larger JSON is indexed as the text it is, not re-indented
_MOST_WRAPPED_LINES = 200  # a longer block without blank lines is a log or a dump, not prose


def decode_text(data: bytes) -> str:
    """Bytes → text: BOMs first, then UTF-16 without BOM, UTF-8, GB18030, and Latin-1 last.

    Raises ParseError for binary data (NUL bytes or many control characters in what is not UTF-16).
    """
    return "".join(decoded_pieces([data]))


def decoded_pieces(blocks: Iterable[bytes]) -> Iterator[str]:
    """``blocks`` of a file's bytes as text, a piece per block, newlines made ``\n``.

    The encoding is chosen on the first block (see :func:`decode_text`); later blocks are decoded
    with it, a character split between two blocks included. A text with a BOM must decode
    strictly; other encodings, chosen from a sample, replace what does not decode.
    """
    blocks = iter(blocks)
    first = next(blocks, b"")
    encoding, strict = _encoding(first)
    decoder = codecs.getincrementaldecoder(encoding)("strict" if strict else "replace")
    newlines = _Newlines()
    try:
        for block in itertools.chain([first], blocks):
            yield newlines.normalise(decoder.decode(block))
        yield newlines.normalise(decoder.decode(b"", final=True), final=True)
    except UnicodeDecodeError as error:
        raise ParseError(f"undecodable {encoding} text: {error}") from error


def _encoding(sample: bytes) -> tuple[str, bool]:
    """(codec, decode strictly) for a text starting with ``sample``."""
    for bom, encoding in _BOMS:
        if sample.startswith(bom):
            return encoding, True
    head = sample[:4096]
    if head and _looks_like_utf16(head):
        for encoding in ("utf-16-le", "utf-16-be"):
            text = _decoded(head, encoding)
            if text is not None and not _CONTROL.search(text[:2048]):
                return encoding, False
    if b"\x00" in head:
        raise ParseError("binary data, not text (NUL bytes)")
    encoding = "utf-8" if _decoded(sample, "utf-8") is not None else _legacy_encoding(sample)
    text = _decoded(head, encoding) or ""
    if len(_CONTROL.findall(text)) > 0.01 * max(len(text), 1):
        raise ParseError("binary data, not text (control characters)")
    return encoding, False


def _decoded(data: bytes, encoding: str) -> str | None:
    """``data`` decoded, a character cut off at its end allowed; None when it does not decode."""
    try:
        return codecs.getincrementaldecoder(encoding)().decode(data)
    except UnicodeDecodeError:
        return None


class _Newlines:
    """\r\n and \r as \n, across pieces (a \r may end one and its \n start the next)."""

    def __init__(self) -> None:
        self._held_cr = False

    def normalise(self, text: str, final: bool = False) -> str:
        if self._held_cr:
            text = "\r" + text
        self._held_cr = text.endswith("\r") and not final
        if self._held_cr:
            text = text[:-1]
        return text.replace("\r\n", "\n").replace("\r", "\n")


def _looks_like_utf16(sample: bytes) -> bool:
    even, odd = sample[0::2], sample[1::2]
    half = max(len(sample) // 2, 1)
    return max(even.count(0), odd.count(0)) > 0.3 * half and min(even.count(0), odd.count(0)) == 0


def _legacy_encoding(sample: bytes) -> str:
    """GB18030 or BOM-less UTF-16 when either reads as Chinese, else Windows-1252 (Latin-1)."""
    for encoding in ("gb18030", "utf-16-le", "utf-16-be"):
        text = _decoded(sample, encoding)
        if text is not None and _mostly_chinese(text):
            return encoding
    return "cp1252" if _decoded(sample, "cp1252") is not None else "latin-1"


def _mostly_chinese(text: str) -> bool:
    """Whether the non-ASCII characters are nearly all Chinese (random bytes seldom are)."""
    non_ascii = [ch for ch in text[:4096] if ord(ch) > 127]
    chinese = sum(is_unspaced(ch) for ch in non_ascii)
    return bool(non_ascii) and chinese >= 0.9 * len(non_ascii)


def text_pieces(path: Path) -> Iterator[str]:
    """A text file's decoded text, a block at a time. Raises ParseError for an empty file."""
    with path.open("rb") as handle:
        blocks = iter(lambda: handle.read(_BLOCK_BYTES), b"")
        seen_text = False
        for piece in decoded_pieces(blocks):
            seen_text = seen_text or bool(piece.strip())
            yield piece
    if not seen_text:
        raise ParseError("the file is empty (no text)")


def read_text(path: Path) -> str:
    return "".join(text_pieces(path))


def parse_text(path: Path) -> ParsedDocument:
    """Paragraphs split at blank lines; hard-wrapped prose is re-joined, other lines are kept.

    Read and split a block at a time, so a file of any size is never in memory whole.
    """
    if path.suffix.lower() == ".json" and path.stat().st_size <= _PRETTY_JSON_BYTES:
        pieces: Iterable[str] = [_pretty_json(read_text(path))]
    else:
        pieces = text_pieces(path)
    return ParsedDocument(
        elements=(Element(text=paragraph, kind="paragraph") for paragraph in paragraphs(pieces))
    )


def paragraphs(pieces: Iterable[str]) -> Iterator[str]:
    """Blocks between blank lines, as they complete; a block with no blank line for a long
    stretch (a log, a dump) is cut at a line end every ``MAX_ELEMENT_CHARS`` characters."""
    carry = ""
    for piece in pieces:
        blocks = _BLANK_LINE.split(carry + piece)
        carry = blocks.pop()
        for block in blocks:
            if block.strip():
                yield _unwrap(block)
        while len(carry) > MAX_ELEMENT_CHARS:
            cut = carry.rfind("\n", 0, MAX_ELEMENT_CHARS)
            cut = cut if cut > 0 else MAX_ELEMENT_CHARS
            if carry[:cut].strip():
                yield _unwrap(carry[:cut])
            carry = carry[cut:].lstrip("\n")
    if carry.strip():
        yield _unwrap(carry)


def _unwrap(block: str) -> str:
    lines = [line.rstrip() for line in block.strip("\n").split("\n")]
    wrapped_prose = 1 < len(lines) <= _MOST_WRAPPED_LINES and all(
        len(line) >= 30 and not _SENTENCE_END.search(line) for line in lines[:-1]
    )
    if not wrapped_prose:
        return "\n".join(lines).strip()
    joined = lines[0].strip()
    for line in lines[1:]:
        piece = line.strip()
        if joined.endswith("-") and joined[-2:-1].isalpha() and piece[:1].islower():
            joined = joined[:-1] + piece
        elif joined and piece and is_unspaced(joined[-1]) and is_unspaced(piece[0]):
            joined += piece
        else:
            joined += " " + piece
    return joined


def _pretty_json(text: str) -> str:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text  # JSON Lines or damaged JSON: index it as the text it is
    return json.dumps(value, indent=2, ensure_ascii=False)


def parse_table_file(path: Path) -> ParsedDocument:
    """CSV/TSV → table elements, header first and one row per line (``a | b | c``); a long
    table in elements of at most ``MAX_ELEMENT_CHARS`` characters, each under the header."""
    pieces = text_pieces(path)
    head = ""
    for piece in pieces:  # enough of the start to sniff the delimiter from
        head += piece
        if len(head) >= 8192:
            break
    delimiter = "\t" if path.suffix.lower() == ".tsv" else None
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(head[:8192], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    lines = _lines(itertools.chain([head], pieces))
    rows = (
        " | ".join(cell.strip() for cell in row)
        for row in csv.reader(lines, delimiter=delimiter)
        if any(cell.strip() for cell in row)
    )
    return ParsedDocument(elements=_table_elements(rows))


def _table_elements(rows: Iterator[str]) -> Iterator[Element]:
    header = next(rows, None)
    if header is None:
        raise ParseError("the table file has no rows")
    body: list[str] = []
    size = len(header)
    for row in rows:
        if body and size + len(row) > MAX_ELEMENT_CHARS:
            yield Element(text="\n".join([header, *body]), kind="table")
            body, size = [], len(header)
        body.append(row)
        size += len(row) + 1
    yield Element(text="\n".join([header, *body]), kind="table")


def _lines(pieces: Iterable[str]) -> Iterator[str]:
    """Text pieces as lines, each with its newline (what ``csv.reader`` reads)."""
    carry = ""
    for piece in pieces:
        lines = (carry + piece).split("\n")
        carry = lines.pop()
        yield from (line + "\n" for line in lines)
    if carry:
        yield carry
