"""A cited passage shown where it stands: its PDF page rendered with the passage's boxes
highlighted, an image file with the boxes of the words read in it, a picture from a Word or
PowerPoint file as it was extracted, or, for other formats, the passage in the text around it.

Everything is looked up by chunk or document id in the catalog, never by a path the request
names, and a file is read only when its real path lies inside a watched folder: no request can
read anything else (``../``, absolute paths and symbolic links out of the folders included).
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from upath import UPath

from rag_pipeline import ids
from rag_pipeline.catalog import Catalog, DocumentRecord
from rag_pipeline.chunking import document_name, shown_section, table_captions, without_header
from rag_pipeline.config import Settings
from rag_pipeline.parsing.lines import join_lines
from rag_pipeline.redaction import MASK, Redactor
from rag_pipeline.stages import StageFiles
from rag_pipeline.store import is_picture

if TYPE_CHECKING:
    import pymupdf

HIGHLIGHT = (1.0, 0.78, 0.0)  # amber, visible on white and on scans
_CONTEXT_CHARS = 600


# What a reader is told of a document or passage archived or rejected: not why, nor by whom.
DOCUMENT_OFFLINE = "This document was taken offline."
PASSAGE_OFFLINE = "This passage was taken offline."


class PreviewError(LookupError):
    """Nothing to show for this request (unknown, outdated, offline or not allowed); says
    which."""


@dataclass(frozen=True, slots=True)
class Preview:
    doc_id: str
    chunk_id: str
    page: int | None
    pages: tuple[int, ...]  # every page the passage lies on, to step through
    pictured: bool  # shown on a picture: its PDF page, its image file, the picture it is
    png: bytes | None  # that picture, the passage marked on it, when asked to be drawn
    html: str  # the passage in context (for every format; the caption for PDFs)


def source_file(
    settings: Settings, catalog: Catalog, doc_id: str, *, offline_shown: bool = False
) -> tuple[DocumentRecord, Path]:
    """A document's file, only if the live collection holds it, it lies inside a watched
    folder and, unless ``offline_shown`` (for those who may put it back), it is not offline."""
    live = catalog.live_collection()
    record = catalog.document(live.name, doc_id) if live else None
    if record is None:
        raise PreviewError(f"no indexed document {doc_id!r}")
    if not offline_shown and doc_id in catalog.live_offline()[0]:
        raise PreviewError(DOCUMENT_OFFLINE)
    try:
        path = record.file_path.resolve(strict=True)
    except (OSError, RuntimeError) as error:
        raise PreviewError(f"the file of {doc_id!r} is gone") from error
    folders = [folder.resolve() for folder in settings.watched_folders]
    if not path.is_file() or not any(path.is_relative_to(folder) for folder in folders):
        raise PreviewError(f"the file of {doc_id!r} is outside the watched folders")
    return record, path


def cited_chunk(catalog: Catalog, chunk_id: str) -> tuple[list[dict[str, Any]], int]:
    """The chunk with its neighbours, and its position among them."""
    try:
        ids.parse_chunk_id(chunk_id)
    except ValueError as error:
        raise PreviewError(str(error)) from error
    live = catalog.live_collection()
    found = catalog.chunk_context(live.name, chunk_id) if live else None
    if found is None:
        raise PreviewError(f"{chunk_id!r} is not in the index (the document changed since?)")
    return found


def cited(
    settings: Settings, catalog: Catalog, chunk_id: str, *, offline_shown: bool = False
) -> tuple[list[dict[str, Any]], int, DocumentRecord, Path]:
    """The chunk with the neighbours that may be shown around it, its position among them, and
    its document's record and file; an offline document or passage only when
    ``offline_shown``."""
    rows, position = cited_chunk(catalog, chunk_id)
    record, path = source_file(
        settings, catalog, rows[position]["doc_id"], offline_shown=offline_shown
    )
    if not offline_shown:
        offline = catalog.live_offline()[1]
        if chunk_id in offline:
            raise PreviewError(PASSAGE_OFFLINE)
        # Its neighbours are shown around it: not one taken offline.
        rows = [r for i, r in enumerate(rows) if i == position or r["chunk_id"] not in offline]
        position = next(i for i, r in enumerate(rows) if r["chunk_id"] == chunk_id)
    return rows, position, record, path


def preview(
    settings: Settings,
    catalog: Catalog,
    chunk_id: str,
    *,
    page: int | None = None,
    dpi: int = 110,
    offline_shown: bool = False,
    drawn: bool = True,
) -> Preview:
    """The cited page or picture with the passage marked (unless not ``drawn``: whether there
    is one, for a page that fetches it from the preview route), and the passage in its text;
    an offline document or passage only when ``offline_shown``.

    ``page``: which of the passage's pages to show (a citation's, where what it quotes lies);
    by default its first.
    """
    rows, position, record, path = cited(settings, catalog, chunk_id, offline_shown=offline_shown)
    row = rows[position]
    live = catalog.live_collection()
    captions = table_captions(catalog.table_chunks(live.name, row["doc_id"]) if live else [])
    named = document_name(record.relative_path, record.title)
    context = passage_in_context(rows, position, named, captions)
    page = passage_page(row, page)
    on_page = record.file_type == "pdf" and page is not None
    pictured = on_page or record.file_type == "image" or is_picture(row)
    png: bytes | None = None
    if drawn and pictured:
        boxes = [box for box in row["bboxes"] if box["page"] == page]
        redactor = Redactor.of(settings)
        hidden = redacted_boxes(catalog, row["doc_id"], page) if redactor else []
        if on_page:
            png = render_page(path, page, boxes, dpi=dpi, redactor=redactor, hidden=hidden)
        elif record.file_type == "image":
            # The picture itself needs no frame around all of it; words read in it do.
            png = render_picture(path, [] if is_picture(row) else boxes, hidden=hidden)
        else:
            png = picture_file(settings, row).read_bytes()
    pages = passage_pages(row)
    return Preview(row["doc_id"], chunk_id, page, pages, pictured, png, context)


def cited_picture(
    settings: Settings, catalog: Catalog, chunk_id: str, *, offline_shown: bool = False
) -> bytes:
    """The stored picture of a picture chunk, as extracted (a thumbnail among the pictures an
    answer found); an offline document or passage only when ``offline_shown``."""
    rows, position, _, _ = cited(settings, catalog, chunk_id, offline_shown=offline_shown)
    if not is_picture(rows[position]):
        raise PreviewError(f"{chunk_id!r} is not a picture")
    return picture_file(settings, rows[position]).read_bytes()


def passage_page(row: dict[str, Any], page: int | None) -> int | None:
    """``page`` if the chunk (a catalog row) lies on it, its first page if None."""
    if page is None:
        return row["page_start"]
    if row["page_start"] is None or not row["page_start"] <= page <= row["page_end"]:
        raise PreviewError(f"{row['chunk_id']!r} does not lie on page {page}")
    return page


def passage_pages(row: dict[str, Any]) -> tuple[int, ...]:
    """The pages a chunk (a catalog row) lies on, first to last; none for a file without
    pages."""
    if row["page_start"] is None:
        return ()
    return tuple(range(row["page_start"], row["page_end"] + 1))


def picture_file(settings: Settings, row: dict[str, Any]) -> UPath:
    """The stored picture of a picture chunk (a catalog row), only from the stored pictures."""
    path = StageFiles(settings.stage_root).stored_picture(row.get("image_file") or "")
    if path is None or not path.is_file():
        raise PreviewError(f"the picture of {row['chunk_id']!r} is gone")
    return path


def redacted_boxes(catalog: Catalog, doc_id: str, page: int | None) -> list[dict[str, float]]:
    """The boxes, on ``page``, of the chunks whose text had a value redacted: what a preview
    blacks out where the page has no text of its own to search (a scan, a picture read by
    OCR). Coarse, whole chunks, since a chunk keeps its lines' boxes but not where in them
    each word was."""
    live = catalog.live_collection()
    if live is None:
        return []
    page = page or 1
    return [
        box
        for row in catalog.page_chunks(live.name, doc_id, page)
        if MASK.search(row["text"])
        for box in row["bboxes"]
        if box["page"] == page
    ]


def render_picture(
    path: Path,
    boxes: list[dict[str, float]],
    *,
    hidden: Sequence[dict[str, float]] = (),
    most_side: int = 1400,
) -> bytes:
    """PNG of an image file with ``boxes`` (its own pixels) highlighted and ``hidden`` blacked
    out, scaled to fit."""
    from PIL import Image, ImageDraw, UnidentifiedImageError

    try:
        with Image.open(path) as opened:
            picture = opened.convert("RGB")
    except (UnidentifiedImageError, OSError) as error:  # its message names the server's path
        raise PreviewError(f"cannot read the image {path.name}") from error
    overlay = Image.new("RGBA", picture.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    amber = tuple(round(255 * channel) for channel in HIGHLIGHT)
    for box in boxes:
        rectangle = (box["x0"] - 2, box["y0"] - 2, box["x1"] + 2, box["y1"] + 2)
        draw.rectangle(rectangle, fill=(*amber, 77), outline=(*amber, 255), width=2)
    for box in hidden:
        draw.rectangle((box["x0"], box["y0"], box["x1"], box["y1"]), fill=(0, 0, 0, 255))
    shown = Image.alpha_composite(picture.convert("RGBA"), overlay).convert("RGB")
    shown.thumbnail((most_side, most_side))
    encoded = io.BytesIO()
    shown.save(encoded, format="PNG")
    return encoded.getvalue()


def render_page(
    path: Path,
    page_number: int,
    boxes: list[dict[str, float]],
    *,
    dpi: int,
    redactor: Redactor | None = None,
    hidden: Sequence[dict[str, float]] = (),
) -> bytes:
    """PNG of a PDF page (1-based) with ``boxes`` (PDF points, top-left origin) highlighted.

    With a ``redactor``, every value it finds in the page's text is blacked out where the page
    draws it, wrapped over lines or not; on a page without text (a scan), the ``hidden`` boxes
    are.
    """
    import pymupdf

    try:
        with pymupdf.open(path) as document:
            page = document[page_number - 1]
            if redactor is not None:
                rectangles = _values_drawn(page, redactor)
                if not page.get_text().strip():  # a scan: its words were read by OCR
                    rectangles += [pymupdf.Rect(b["x0"], b["y0"], b["x1"], b["y1"]) for b in hidden]
                for rectangle in rectangles:
                    page.add_redact_annot(rectangle, fill=(0, 0, 0))
                # Removes the text under them, and draws black there.
                page.apply_redactions(images=pymupdf.PDF_REDACT_IMAGE_PIXELS)
            for box in boxes:
                page.draw_rect(
                    pymupdf.Rect(box["x0"] - 2, box["y0"] - 2, box["x1"] + 2, box["y1"] + 2),
                    color=HIGHLIGHT,
                    fill=HIGHLIGHT,
                    fill_opacity=0.3,
                    width=1.5,
                )
            return page.get_pixmap(dpi=dpi).tobytes("png")
    except (RuntimeError, ValueError, IndexError) as error:  # its message may name the path
        raise PreviewError(
            f"cannot render page {page_number} of {path.name} (damaged, or changed since indexing)"
        ) from error


def _values_drawn(page: pymupdf.Page, redactor: Redactor) -> list[pymupdf.Rect]:
    """Where ``page`` draws the values ``redactor`` finds in it: a rectangle per line that
    holds (part of) one.

    Each block's lines are joined as the parser joins them (``join_lines``), so that a value
    the page wraps onto the next line ("4111 1111" / "1111 1111") is found as it was in the
    indexed text; each line's part of it is then searched for within that line's box only.
    """
    import pymupdf

    flags = pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP  # as the parser reads
    rectangles: list[pymupdf.Rect] = []
    for block in page.get_text("dict", flags=flags)["blocks"]:
        text, boxes = join_lines(
            ("".join(span["text"] for span in line["spans"]), line["bbox"])
            for line in block.get("lines", ())
        )
        for found in redactor.find(text):
            for box in boxes:
                start, end = max(found.start, box.start), min(found.end, box.end)
                if start < end:
                    clip = pymupdf.Rect(box.bbox)
                    rectangles += page.search_for(text[start:end], clip=clip)
    return rectangles


def passage_in_context(
    rows: list[dict[str, Any]],
    position: int,
    document: str | None,
    captions: frozenset[str] = frozenset(),
) -> str:
    """HTML: the section the cited chunk is shown under (its document's table ``captions``
    heading no other heading), the end of the chunk before, the cited chunk marked, the start
    of the one after, each as the document has it (the line naming ``document`` and its
    section, which heads a chunk for search, left out)."""
    texts = [
        row["text"] if is_picture(row) else without_header(row["text"], document, row["section"])
        for row in rows
    ]
    before = texts[position - 1][-_CONTEXT_CHARS:] if position > 0 else ""
    after = texts[position + 1][:_CONTEXT_CHARS] if position + 1 < len(rows) else ""
    first_line = texts[position].partition("\n")[0]
    where = " › ".join(shown_section(rows[position]["section"], first_line, captions))
    parts = [f"<p class='where'>{html.escape(where)}</p>" if where else ""]
    if before:
        parts.append(f"<p class='context'>…{_paragraphs(before)}</p>")
    parts.append(f"<p><mark>{_paragraphs(texts[position])}</mark></p>")
    if after:
        parts.append(f"<p class='context'>{_paragraphs(after)}…</p>")
    return "\n".join(part for part in parts if part)


def _paragraphs(text: str) -> str:
    return html.escape(text).replace("\n", "<br>")
