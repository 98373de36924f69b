"""Pictures: standalone image files as documents, and the pictures inside PDF, DOCX and PPTX.

Each kept picture becomes a :class:`ParsedImage`: a PNG small enough to embed and show, its
content hash (the embedding cache's key) and a perceptual hash. Pictures too small to mean
anything (icons, bullets, rules) are skipped, near-identical ones are kept once, and a picture
repeated on several pages (a logo in the letterhead) is dropped altogether.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rag_pipeline.parsing import ocr
from rag_pipeline.parsing.elements import (
    BBox,
    Element,
    ParsedDocument,
    ParsedImage,
    ParseError,
    ParseOptions,
    TextBox,
    enclosing,
)
from rag_pipeline.parsing.lines import join_lines

if TYPE_CHECKING:
    from PIL.Image import Image
    from pptx.shapes.group import GroupShape
    from pptx.shapes.picture import Picture

PARSER_VERSION = "image-2"
EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".bmp", ".gif")

MAX_IMAGE_SIDE = 1024  # pixels: enough for CLIP (224) and captioners (384), and for the page
_SAME_PICTURE_BITS = 4  # perceptual hashes this close (of 64 bits) are one picture
_LOGO_PAGES = 3  # a picture on this many pages is decoration, not content
_EMU_PER_POINT = 12700  # Office drawing units


def open_picture(data: bytes) -> Image:
    """The picture in ``data`` (the first frame of an animation), decoded, as RGB."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as picture:
            picture.seek(0)
            return picture.convert("RGB")
    except UnidentifiedImageError as error:
        raise ParseError("not a readable image (no image format recognised)") from error
    except (OSError, ValueError, Image.DecompressionBombError) as error:
        raise ParseError(f"not a readable image ({error})") from error


def perceptual_hash(picture: Image) -> str:
    """64-bit DCT hash (pHash): the signs of the lowest frequencies of a 32×32 thumbnail."""
    from PIL import Image

    pixels = np.asarray(picture.convert("L").resize((32, 32), Image.Resampling.LANCZOS), float)
    low = (_DCT @ pixels @ _DCT.T)[:8, :8].flatten()
    bits = low > np.median(low[1:])
    return f"{int(''.join('1' if bit else '0' for bit in bits), 2):016x}"


def _dct_matrix(size: int) -> np.ndarray:
    rows = np.arange(size)[:, None]
    columns = np.arange(size)[None, :]
    matrix = np.cos(np.pi * (2 * columns + 1) * rows / (2 * size)) * np.sqrt(2 / size)
    matrix[0] /= np.sqrt(2)
    return matrix


_DCT = _dct_matrix(32)


def hash_distance(first: str, second: str) -> int:
    return (int(first, 16) ^ int(second, 16)).bit_count()


def kept_picture(
    data: bytes, *, page: int | None, bbox: BBox | None, min_side: int
) -> ParsedImage | None:
    """``data`` as a picture worth indexing, or None when it is too small to mean anything."""
    from PIL import Image

    picture = open_picture(data)
    width, height = picture.size
    if min(width, height) < min_side:
        return None
    phash = perceptual_hash(picture)
    picture.thumbnail((MAX_IMAGE_SIDE, MAX_IMAGE_SIDE), Image.Resampling.LANCZOS)
    encoded = io.BytesIO()
    picture.save(encoded, format="PNG", optimize=False)
    return ParsedImage(
        data=encoded.getvalue(),
        sha256=hashlib.sha256(data).hexdigest(),
        phash=phash,
        width=width,
        height=height,
        page=page,
        bbox=bbox,
    )


def distinct_pictures(pictures: Iterable[ParsedImage]) -> list[ParsedImage]:
    """Each picture once (its first place), and none that repeats on many pages (logos)."""
    groups: list[list[ParsedImage]] = []
    for picture in pictures:
        group = next(
            (g for g in groups if hash_distance(g[0].phash, picture.phash) <= _SAME_PICTURE_BITS),
            None,
        )
        if group is None:
            groups.append([picture])
        else:
            group.append(picture)
    return [group[0] for group in groups if len({p.page for p in group}) < _LOGO_PAGES]


# -- standalone image files -------------------------------------------------------------------


def parse_image(path: Path, options: ParseOptions) -> ParsedDocument:
    """An image file as a one-page document: the picture, and the words OCR reads in it."""
    data = path.read_bytes()
    picture = open_picture(data)
    width, height = picture.size
    elements = ocr_elements(picture, options.ocr_languages)
    images: list[ParsedImage] = []
    if options.images:
        kept = kept_picture(data, page=1, bbox=(0.0, 0.0, width, height), min_side=1)
        images = [kept] if kept else []
    if not elements and not images:
        raise ParseError(
            "no text found in the image, and image search is off: set images.clip_model (or "
            "images.caption_model) to index pictures"
        )
    return ParsedDocument(
        elements=elements,
        title=path.stem,
        page_count=1,
        page_sizes=[(float(width), float(height))],
        images=images,
    )


def ocr_elements(picture: Image, languages: str | None) -> list[Element]:
    """The words in an image file as paragraphs with line boxes, in its pixels (its one page)."""
    return [
        Element(text, "paragraph", 1, enclosing(box.bbox for box in boxes), (), boxes)
        for text, boxes in _ocr_paragraphs(picture, languages)
    ]


def picture_words(picture: ParsedImage, languages: str) -> list[Element]:
    """The words in a picture inside a document, as paragraphs on the picture's page, placed
    where it is shown (a DOCX picture has neither page nor place: Word lays it out)."""
    image = open_picture(picture.data)
    place = placement_on_page(image, picture.bbox) if picture.bbox else None
    elements: list[Element] = []
    for text, boxes in _ocr_paragraphs(image, languages):
        placed = tuple(TextBox(b.start, b.end, place(b.bbox)) for b in boxes) if place else ()
        elements.append(
            Element(
                text, "paragraph", picture.page, enclosing(box.bbox for box in placed), (), placed
            )
        )
    return elements


def _ocr_paragraphs(picture: Image, languages: str | None) -> list[tuple[str, tuple[TextBox, ...]]]:
    if not languages:
        return []
    return [
        join_lines((line.text, line.bbox) for line in lines)
        for lines in ocr.read_paragraphs(picture, languages)
    ]


def placement_on_page(picture: Image, shown_at: BBox) -> Callable[[BBox], BBox]:
    """Pixels of ``picture`` → page units, where the page shows it at ``shown_at``."""
    x0, y0, x1, y1 = shown_at
    scale_x, scale_y = (x1 - x0) / picture.width, (y1 - y0) / picture.height

    def place(box: BBox) -> BBox:
        return (
            x0 + box[0] * scale_x,
            y0 + box[1] * scale_y,
            x0 + box[2] * scale_x,
            y0 + box[3] * scale_y,
        )

    return place


# -- pictures inside documents ----------------------------------------------------------------


def pdf_pictures(document: object, min_side: int) -> list[ParsedImage]:
    """The pictures on a PDF's pages, with their page and box (one per place they are shown)."""
    extracted: dict[int, bytes | None] = {}
    pictures: list[ParsedImage] = []
    for page in document:  # type: ignore[attr-defined]
        for info in page.get_image_info(xrefs=True):
            xref = info.get("xref") or 0
            if xref <= 0 or min(info["width"], info["height"]) < min_side:
                continue
            if xref not in extracted:
                try:
                    extracted[xref] = document.extract_image(xref)["image"]  # type: ignore[attr-defined]
                except Exception:  # an unreadable picture costs the picture, not the document
                    extracted[xref] = None
            data = extracted[xref]
            box = page.rect & info["bbox"]
            if data is None or box.is_empty:
                continue
            try:
                kept = kept_picture(data, page=page.number + 1, bbox=tuple(box), min_side=min_side)
            except ParseError:
                continue
            if kept:
                pictures.append(kept)
    return distinct_pictures(pictures)


def office_pictures(path: Path, file_format: str, min_side: int) -> list[ParsedImage]:
    """Pictures in a PPTX (with slide and box) or a DOCX (no pages: Word lays them out)."""
    if file_format == "pptx":
        found = _pptx_pictures(path)
    elif file_format == "docx":
        found = _docx_pictures(path)
    else:
        return []
    pictures: list[ParsedImage] = []
    for data, page, bbox in found:
        try:
            kept = kept_picture(data, page=page, bbox=bbox, min_side=min_side)
        except ParseError:
            continue
        if kept:
            pictures.append(kept)
    return distinct_pictures(pictures)


def _pptx_pictures(path: Path) -> list[tuple[bytes, int | None, BBox | None]]:
    from pptx import Presentation

    found: list[tuple[bytes, int | None, BBox | None]] = []
    for number, slide in enumerate(Presentation(str(path)).slides, 1):
        for picture, (scale_x, scale_y, shift_x, shift_y) in _pptx_placed_pictures(
            slide.shapes, _IDENTITY
        ):
            try:
                data = picture.image.blob
            except (ValueError, KeyError):  # a linked picture: its file is not in the deck
                continue
            left = (scale_x * (picture.left or 0) + shift_x) / _EMU_PER_POINT
            top = (scale_y * (picture.top or 0) + shift_y) / _EMU_PER_POINT
            width = scale_x * (picture.width or 0) / _EMU_PER_POINT
            height = scale_y * (picture.height or 0) / _EMU_PER_POINT
            found.append((data, number, (left, top, left + width, top + height)))
    return found


# (scale x, scale y, shift x, shift y): a shape's own offsets and sizes → the slide's, in EMU.
_Placement = tuple[float, float, float, float]
_IDENTITY: _Placement = (1.0, 1.0, 0.0, 0.0)


def _pptx_placed_pictures(
    shapes: Iterable[object], placement: _Placement
) -> Iterator[tuple[Picture, _Placement]]:
    """Every picture among ``shapes`` (in groups too), with what places it on the slide.

    A group's members are laid out in the group's own coordinates (its child offset and extent),
    which the group maps onto its box on the slide: nested groups compose these mappings.
    """
    from pptx.shapes.group import GroupShape
    from pptx.shapes.picture import Picture

    for shape in shapes:
        if isinstance(shape, GroupShape):
            yield from _pptx_placed_pictures(shape.shapes, _group_placement(shape, placement))
        elif isinstance(shape, Picture):  # placeholders holding a picture included
            yield shape, placement


def _group_placement(group: GroupShape, outer: _Placement) -> _Placement:
    transform = group._element.grpSpPr.xfrm  # python-pptx has no public child offset/extent
    if transform is None or transform.chOff is None or transform.chExt is None:
        return outer
    child_x, child_y = transform.chOff.x, transform.chOff.y
    child_width, child_height = transform.chExt.cx, transform.chExt.cy
    scale_x = (group.width or 0) / child_width if child_width else 1.0
    scale_y = (group.height or 0) / child_height if child_height else 1.0
    outer_scale_x, outer_scale_y, outer_shift_x, outer_shift_y = outer
    return (
        outer_scale_x * scale_x,
        outer_scale_y * scale_y,
        outer_scale_x * ((group.left or 0) - child_x * scale_x) + outer_shift_x,
        outer_scale_y * ((group.top or 0) - child_y * scale_y) + outer_shift_y,
    )


def _docx_pictures(path: Path) -> list[tuple[bytes, int | None, BBox | None]]:
    from docx import Document
    from docx.opc.constants import RELATIONSHIP_TYPE

    part = Document(str(path)).part
    return [
        (relation.target_part.blob, None, None)
        for relation in part.rels.values()
        if relation.reltype == RELATIONSHIP_TYPE.IMAGE and not relation.is_external
    ]
