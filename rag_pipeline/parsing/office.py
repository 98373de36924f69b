"""Office documents, HTML, e-mail and e-books → elements through ``unstructured``.

unstructured gives no coordinates for these formats, so elements carry a page only where the
format has one (slide number, sheet number, Word's rendered page breaks) and a section path
rebuilt from each element's chain of Title parents.
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import replace
from pathlib import Path

from rag_pipeline.language import UNSPACED_CHARACTERS
from rag_pipeline.parsing import heartbeat
from rag_pipeline.parsing.elements import (
    Element,
    ElementKind,
    ParsedDocument,
    ParsedImage,
    ParseError,
    ParseOptions,
)
from rag_pipeline.parsing.images import office_pictures, picture_words
from rag_pipeline.parsing.tables import html_table_text

# unstructured phones home at import and per call unless told not to; set before it is imported.
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")

PARSER_VERSION = "office-5"

# format → (module under unstructured.partition, function)
PARTITIONERS: dict[str, tuple[str, str]] = {
    "docx": ("docx", "partition_docx"),
    "pptx": ("pptx", "partition_pptx"),
    "xlsx": ("xlsx", "partition_xlsx"),
    "html": ("html", "partition_html"),
    "eml": ("email", "partition_email"),
    "epub": ("epub", "partition_epub"),
    "odt": ("odt", "partition_odt"),
    "rtf": ("rtf", "partition_rtf"),
}
# Formats whose Title elements come from unstructured's text heuristics, not document structure.
_HEURISTIC_TITLES = {"xlsx"}
_DROPPED = {"PageBreak", "Header", "Footer", "PageNumber"}
_KINDS: dict[str, ElementKind] = {
    "Title": "title",
    "ListItem": "list",
    "Table": "table",
    "Image": "image",
}
_SPACE_BETWEEN_UNSPACED = re.compile(rf"(?<=[{UNSPACED_CHARACTERS}])\s+(?=[{UNSPACED_CHARACTERS}])")


def parse_office(path: Path, file_format: str, options: ParseOptions) -> ParsedDocument:
    _require_offline_spacy_model()
    module, function = PARTITIONERS[file_format]
    partition = getattr(importlib.import_module(f"unstructured.partition.{module}"), function)
    try:
        raw = partition(filename=str(path), languages=["eng"])
    except ParseError:
        raise
    except Exception as error:  # unstructured and its readers raise many types for bad files
        raise ParseError(
            f"unreadable {file_format.upper()} file ({type(error).__name__}: {error})"
        ) from error
    by_id = {element.id: element for element in raw}
    elements: list[Element] = []
    for element in raw:
        if element.category in _DROPPED:
            continue
        kind = _KINDS.get(element.category, "paragraph")
        if kind == "title" and file_format in _HEURISTIC_TITLES:
            kind = "paragraph"
        text = _normalise(element.text or "")
        if not text or kind == "image":  # images are their own issue; text-less ones carry nothing
            continue
        if file_format == "xlsx":
            text = text.replace("\\n", " ")
        if kind == "table":  # rows as rows, not the cells run together
            text = html_table_text(getattr(element.metadata, "text_as_html", None) or "") or text
        section = _section_path(element, by_id, file_format)
        if kind == "title":
            section = (*section, text)
        elements.append(
            Element(text=text, kind=kind, page=element.metadata.page_number, section=section)
        )
    picture_languages = options.picture_languages
    pictures = (
        office_pictures(path, file_format, options.min_image_side)
        if options.images or picture_languages
        else []
    )
    if picture_languages:
        elements = _with_picture_words(elements, pictures, picture_languages)
    if not options.images:
        pictures = []
    if not elements and not pictures:
        raise ParseError(f"the {file_format.upper()} file has no text")
    title = next((e.text for e in elements if e.kind == "title"), None)
    if file_format == "eml":
        title = getattr(raw[0].metadata, "subject", None) or title
    pages = [e.page for e in elements if e.page]
    return ParsedDocument(
        elements=elements,
        title=title,
        page_count=max(pages) if pages else None,
        images=pictures,
    )


def _with_picture_words(
    elements: list[Element], pictures: list[ParsedImage], languages: str
) -> list[Element]:
    """``elements`` with the words OCR reads in each picture after the text of the picture's
    slide, under its section; a DOCX picture (no page: Word places it) after all the text."""
    merged = list(elements)
    for picture in pictures:
        words = picture_words(picture, languages)
        heartbeat.beat()  # seconds a picture: the parser's time limit restarts
        at = len(merged)
        if picture.page is not None:
            on_page = [i for i, e in enumerate(merged) if e.page == picture.page]
            later = (i for i, e in enumerate(merged) if e.page and e.page > picture.page)
            at = on_page[-1] + 1 if on_page else next(later, len(merged))
        beside = merged[at - 1] if at and picture.page is not None else None
        section = beside.section if beside and beside.page == picture.page else ()
        merged[at:at] = [replace(word, section=section) for word in words]
    return merged


def _section_path(element: object, by_id: dict, file_format: str) -> tuple[str, ...]:
    titles: list[str] = []
    current, seen = element, set()
    while (parent_id := getattr(current.metadata, "parent_id", None)) and parent_id in by_id:
        if parent_id in seen:
            break
        seen.add(parent_id)
        current = by_id[parent_id]
        if current.category == "Title" and file_format not in _HEURISTIC_TITLES:
            titles.append(_normalise(current.text))
    titles.reverse()
    sheet = getattr(element.metadata, "page_name", None)
    if file_format == "xlsx" and sheet:
        titles.insert(0, sheet)
    return tuple(titles)


def _normalise(text: str) -> str:
    return _SPACE_BETWEEN_UNSPACED.sub("", " ".join(text.split()))


def _require_offline_spacy_model() -> None:
    import spacy.util

    if not spacy.util.is_package("en_core_web_sm"):
        raise ParseError(
            "spaCy's en_core_web_sm is not installed, and unstructured would try to download it: "
            "reinstall rag-pipeline (pip install -e .), which installs vendor/en_core_web_sm"
        )
