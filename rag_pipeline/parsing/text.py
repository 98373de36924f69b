"""Plain text, CSV/TSV, JSON, logs: decoded with encoding detection, then paragraphs or tables."""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from pathlib import Path

from rag_pipeline.language import is_unspaced
from rag_pipeline.parsing.elements import Element, ParsedDocument, ParseError

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


def decode_text(data: bytes) -> str:
    """Bytes → text: BOMs first, then UTF-16 without BOM, UTF-8, GB18030, and Latin-1 last.

    Raises ParseError for binary data (NUL bytes or many control characters in what is not UTF-16).
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return _strict(data, encoding)
    sample = data[:4096]
    if sample and _looks_like_utf16(sample):
        for encoding in ("utf-16-le", "utf-16-be"):
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError:
                continue
            if not _CONTROL.search(text[:2048]):
                return text
    if b"\x00" in sample:
        raise ParseError("binary data, not text (NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = _decode_legacy(data)
    if len(_CONTROL.findall(text[:4096])) > 0.01 * max(len(text[:4096]), 1):
        raise ParseError("binary data, not text (control characters)")
    return text


def _strict(data: bytes, encoding: str) -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        raise ParseError(f"undecodable {encoding} text: {error}") from error


def _looks_like_utf16(sample: bytes) -> bool:
    even, odd = sample[0::2], sample[1::2]
    half = max(len(sample) // 2, 1)
    return max(even.count(0), odd.count(0)) > 0.3 * half and min(even.count(0), odd.count(0)) == 0


def _decode_legacy(data: bytes) -> str:
    """GB18030 or BOM-less UTF-16 when either reads as Chinese, else Latin-1 (as Windows-1252)."""
    for encoding in ("gb18030", "utf-16-le", "utf-16-be"):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if _mostly_chinese(text):
            return text
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _mostly_chinese(text: str) -> bool:
    """Whether the non-ASCII characters are nearly all Chinese (random bytes seldom are)."""
    non_ascii = [ch for ch in text[:4096] if ord(ch) > 127]
    chinese = sum(is_unspaced(ch) for ch in non_ascii)
    return bool(non_ascii) and chinese >= 0.9 * len(non_ascii)


def read_text(path: Path) -> str:
    text = decode_text(path.read_bytes())
    if not text.strip():
        raise ParseError("the file is empty (no text)")
    return text


def parse_text(path: Path) -> ParsedDocument:
    """Paragraphs split at blank lines; hard-wrapped prose is re-joined, other lines are kept."""
    text = read_text(path)
    if path.suffix.lower() == ".json":
        text = _pretty_json(text)
    elements = [
        Element(text=paragraph, kind="paragraph") for paragraph in paragraphs(text) if paragraph
    ]
    return ParsedDocument(elements=elements)


def paragraphs(text: str) -> list[str]:
    blocks = re.split(r"\n\s*\n", text.replace("\r\n", "\n").replace("\r", "\n"))
    return [_unwrap(block) for block in blocks if block.strip()]


def _unwrap(block: str) -> str:
    lines = [line.rstrip() for line in block.strip("\n").split("\n")]
    wrapped_prose = len(lines) > 1 and all(
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
    """CSV/TSV → one table element, header first and one row per line (``a | b | c``)."""
    text = read_text(path)
    delimiter = "\t" if path.suffix.lower() == ".tsv" else None
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    rows = [
        " | ".join(cell.strip() for cell in row)
        for row in csv.reader(io.StringIO(text), delimiter=delimiter)
        if any(cell.strip() for cell in row)
    ]
    if not rows:
        raise ParseError("the table file has no rows")
    return ParsedDocument(elements=[Element(text="\n".join(rows), kind="table")])
