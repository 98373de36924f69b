"""What every parser returns: a document as elements that remember where they came from."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

ElementKind = Literal["title", "paragraph", "table", "list", "image"]

# (x0, y0, x1, y1) in PDF points, origin at the page's top-left corner.
BBox = tuple[float, float, float, float]

# The longest element text: a longer one (a log without blank lines, a huge table) is cut at
# line ends, so that no later stage holds more than this of one element at a time.
MAX_ELEMENT_CHARS = 64_000


def enclosing(boxes: Iterable[BBox]) -> BBox | None:
    """The smallest box around ``boxes`` (None when there are none)."""
    boxes = list(boxes)
    if not boxes:
        return None
    return (
        min(box[0] for box in boxes),
        min(box[1] for box in boxes),
        max(box[2] for box in boxes),
        max(box[3] for box in boxes),
    )


@dataclass(frozen=True, slots=True)
class TextBox:
    """Where ``text[start:end]`` of an element sits on its page (one line of a PDF)."""

    start: int
    end: int
    bbox: BBox


@dataclass(slots=True)
class Element:
    text: str
    kind: ElementKind
    page: int | None = None  # 1-based; slide or sheet number for presentations and workbooks
    bbox: BBox | None = None
    section: tuple[str, ...] = ()  # heading path, outermost first; a title includes itself
    boxes: tuple[TextBox, ...] = ()  # finer positions, for highlighting part of a long element


@dataclass(frozen=True, slots=True)
class ParsedImage:
    """A picture worth indexing: a standalone image file, or one found inside a document."""

    data: bytes  # PNG, downscaled to at most MAX_IMAGE_SIDE pixels a side
    sha256: str  # of the original image bytes: equal pictures share one vector per model
    phash: str  # 64-bit perceptual hash, hex: near-identical pictures are kept once
    width: int  # of the original, in pixels
    height: int
    page: int | None = None
    bbox: BBox | None = None  # on its page; for a standalone image, in its own pixels


@dataclass(frozen=True, slots=True)
class ParseOptions:
    """What parsing may do beyond reading text; the same for every document of a run."""

    ocr_languages: str | None = None  # tesseract's "eng+chi_sim"; None: no OCR
    ocr_dpi: int = 200
    ocr_pictures: bool = False  # also read the words in pictures in PDF, PPTX, DOCX
    images: bool = False  # keep pictures (standalone and embedded) for image search
    min_image_side: int = 64

    @property
    def picture_languages(self) -> str | None:
        """The languages the words in a document's pictures are read in; None: not read."""
        return self.ocr_languages if self.ocr_pictures else None


@dataclass(slots=True)
class ParsedDocument:
    elements: Iterable[Element]  # a list, or a generator for formats read a block at a time
    title: str | None = None
    page_count: int | None = None
    page_sizes: list[tuple[float, float]] = field(default_factory=list)  # (width, height) per page
    images: list[ParsedImage] = field(default_factory=list)


class ParseError(Exception):
    """A document that cannot be indexed; the message is shown to the user as the reason."""


def bounded(elements: Iterable[Element]) -> Iterator[Element]:
    """``elements``, those longer than ``MAX_ELEMENT_CHARS`` cut at line ends (at spaces in a
    line that long) into consecutive elements of the same kind, page and section; a table's
    header row heads each of its parts, and each part keeps the boxes of its lines."""
    for element in elements:
        if len(element.text) <= MAX_ELEMENT_CHARS:
            yield element
            continue
        text = element.text
        header = text[: text.find("\n") + 1] if element.kind == "table" else ""
        limit = MAX_ELEMENT_CHARS - len(header) if len(header) < MAX_ELEMENT_CHARS // 2 else 0
        if not limit:
            header, limit = "", MAX_ELEMENT_CHARS
        start = len(header)
        while start < len(text):
            end = min(start + limit, len(text))
            if end < len(text):
                cut = max(text.rfind("\n", start, end), text.rfind(" ", start, end))
                end = cut + 1 if cut > start else end
            boxes = tuple(
                TextBox(
                    max(box.start - start, 0) + len(header),
                    min(box.end, end) - start + len(header),
                    box.bbox,
                )
                for box in element.boxes
                if box.start < end and box.end > start
            )
            part = header + text[start:end]
            yield replace(
                element,
                text=part,
                boxes=boxes,
                bbox=enclosing(b.bbox for b in boxes) or element.bbox,
            )
            start = end
