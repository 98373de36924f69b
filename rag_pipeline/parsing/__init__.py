"""File → :class:`ParsedDocument`, choosing the parser by what the file holds, not only its name."""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from rag_pipeline.files import extension_of
from rag_pipeline.parsing import images, markdown, office, pdf, text
from rag_pipeline.parsing.elements import (
    MAX_ELEMENT_CHARS,
    BBox,
    Element,
    ElementKind,
    ParsedDocument,
    ParsedImage,
    ParseError,
    ParseOptions,
    TextBox,
    bounded,
)

__all__ = [
    "EMPTY_FILE",
    "MAX_ELEMENT_CHARS",
    "PARSER_VERSIONS",
    "PICTURE_FORMATS",
    "BBox",
    "Element",
    "ElementKind",
    "ParseError",
    "ParseOptions",
    "ParsedDocument",
    "ParsedImage",
    "TextBox",
    "detect_format",
    "format_of",
    "parse_document",
    "read_document",
]

# Why a file of 0 bytes is not a document (said at upload as well as by a run).
EMPTY_FILE = "the file is empty (0 bytes)"

# Extension → format. Files with other extensions are not documents for the manifest.
EXTENSIONS: dict[str, str] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
    ".log": "text",
    ".json": "text",
    ".jsonl": "text",
    ".csv": "table",
    ".tsv": "table",
    ".eml": "eml",
    ".epub": "epub",
    ".odt": "odt",
    ".rtf": "rtf",
    **dict.fromkeys(images.EXTENSIONS, "image"),
}

# Bumping a parser's version re-indexes the documents of its formats, and only those.
PARSER_VERSIONS: dict[str, str] = {
    "pdf": pdf.PARSER_VERSION,
    "markdown": markdown.PARSER_VERSION,
    "text": text.PARSER_VERSION,
    "table": text.PARSER_VERSION,
    "image": images.PARSER_VERSION,
    **{file_format: office.PARSER_VERSION for file_format in office.PARTITIONERS},
}

_ZIP_MEMBERS = {
    "word/document.xml": "docx",
    "ppt/presentation.xml": "pptx",
    "xl/workbook.xml": "xlsx",
}
_ZIP_MIMETYPES = {
    "application/epub+zip": "epub",
    "application/vnd.oasis.opendocument.text": "odt",
}
_ZIP_FORMATS = {"docx", "pptx", "xlsx", "epub", "odt"}


def format_of(path: str | Path) -> str | None:
    """The format a file's extension promises, or None when it is not a document we index."""
    return EXTENSIONS.get(extension_of(path))


def detect_format(path: Path) -> str:
    """The format a file actually holds: its first bytes win over its extension."""
    claimed = format_of(path) or "text"
    with path.open("rb") as handle:
        head = handle.read(2048)
    if b"%PDF-" in head[:1024]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return _zip_format(path) or claimed
    if head.lstrip().startswith(b"{\\rtf"):
        return "rtf"
    if claimed in _ZIP_FORMATS or claimed == "pdf":
        lowered = head.lstrip().lower()
        if lowered.startswith((b"<!doctype html", b"<html")):
            return "html"
        raise ParseError(
            f"not a {claimed.upper()} file: its content does not start like one "
            f"(wrong extension, damaged or truncated file?)"
        )
    return claimed


def _zip_format(path: Path) -> str | None:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            if "mimetype" in names:
                mimetype = archive.read("mimetype").decode("ascii", "replace").strip()
                if mimetype in _ZIP_MIMETYPES:
                    return _ZIP_MIMETYPES[mimetype]
    except (zipfile.BadZipFile, OSError) as error:
        raise ParseError(f"damaged ZIP container ({error})") from error
    return next((fmt for member, fmt in _ZIP_MEMBERS.items() if member in names), None)


# Formats whose documents can hold pictures (and so depend on the image settings).
PICTURE_FORMATS = frozenset({"pdf", "docx", "pptx", "image"})


def parse_document(path: Path, options: ParseOptions | None = None) -> ParsedDocument:
    """Parse one file. Raises ParseError with a reason a user can act on.

    The elements may be a generator (text read a block at a time): consuming them can raise
    ParseError too, at the end for a document that turns out to hold no text.
    """
    options = options or ParseOptions()
    if not path.is_file():
        raise ParseError("the file disappeared before it could be read")
    if path.stat().st_size == 0:
        raise ParseError(EMPTY_FILE)
    file_format = detect_format(path)
    if file_format == "pdf":
        parsed = pdf.parse_pdf(path, options)
    elif file_format == "image":
        parsed = images.parse_image(path, options)
    elif file_format == "markdown":
        parsed = markdown.parse_markdown(path)
    elif file_format == "text":
        parsed = text.parse_text(path)
    elif file_format == "table":
        parsed = text.parse_table_file(path)
    else:
        parsed = office.parse_office(path, file_format, options)
    parsed.elements = _with_text(bounded(parsed.elements), has_pictures=bool(parsed.images))
    return parsed


def read_document(path: Path, options: ParseOptions | None = None) -> ParsedDocument:
    """:func:`parse_document` with its elements read into a list (for small documents)."""
    parsed = parse_document(path, options)
    parsed.elements = list(parsed.elements)
    return parsed


def _with_text(elements: Iterable[Element], *, has_pictures: bool) -> Iterator[Element]:
    """``elements``, raising ParseError at their end if none held text (and no picture)."""
    found = has_pictures
    for element in elements:
        found = found or bool(element.text.strip())
        yield element
    if not found:
        raise ParseError("no text found in the document")
