"""The words OCR reads on a PDF page, as blocks placed on the page: pages without a text layer
(scans), read several at once, and the pictures a page shows."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, as_completed, wait
from typing import TYPE_CHECKING

from rag_pipeline.parsing import heartbeat, ocr
from rag_pipeline.parsing.elements import BBox, ParsedImage, ParseOptions
from rag_pipeline.parsing.images import open_picture, placement_on_page
from rag_pipeline.parsing.pdf_blocks import Block, Line, block_of_lines

if TYPE_CHECKING:
    from PIL.Image import Image


class ScanReader:
    """OCR of a PDF's scanned pages, several at once (tesseract runs as a subprocess, so threads
    suffice), each page rendered in this thread (MuPDF is not thread-safe) just before it is
    needed: at most two pages per thread wait in memory."""

    def __init__(self, options: ParseOptions) -> None:
        self.languages = options.ocr_languages or ""
        self.dpi = options.ocr_dpi
        self.pages: set[int] = set()  # page numbers read by OCR
        self._threads = len(os.sched_getaffinity(0))
        self._executor = ThreadPoolExecutor(self._threads, thread_name_prefix="ocr")
        self._pending: dict[Future[list[Block]], int] = {}
        self._done: list[tuple[int, list[Block]]] = []

    def __enter__(self) -> ScanReader:
        return self

    def __exit__(self, *exception: object) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def submit(self, page: object) -> None:
        from PIL import Image

        while len(self._pending) >= 2 * self._threads:
            self._collect(wait(self._pending, return_when=FIRST_COMPLETED).done)
        pixmap = page.get_pixmap(dpi=self.dpi)  # type: ignore[attr-defined]
        picture = Image.frombytes("RGB", (pixmap.width, pixmap.height), pixmap.samples)
        number = page.number + 1  # type: ignore[attr-defined]
        size = page.rect  # type: ignore[attr-defined]
        place = placement_on_page(picture, (0.0, 0.0, size.width, size.height))
        future = self._executor.submit(_blocks_read_in, picture, self.languages, number, place)
        self._pending[future] = number
        self.pages.add(number)

    def results(self) -> list[tuple[int, list[Block]]]:
        """(page number, its blocks) for every page submitted, once all are read."""
        self._collect(as_completed(list(self._pending)))
        return self._done

    def _collect(self, finished: Iterable[Future[list[Block]]]) -> None:
        for future in finished:
            self._done.append((self._pending.pop(future), future.result()))
            heartbeat.beat()  # OCR takes seconds a page: the time limit restarts here


def picture_blocks(picture: ParsedImage, languages: str) -> list[Block]:
    """The words in a picture on a page, read by OCR, placed where the picture is shown."""
    assert picture.page is not None and picture.bbox is not None
    image = open_picture(picture.data)
    return _blocks_read_in(image, languages, picture.page, placement_on_page(image, picture.bbox))


def _blocks_read_in(
    picture: Image, languages: str, page_number: int, place: Callable[[BBox], BBox]
) -> list[Block]:
    """OCR lines of ``picture`` as blocks (one per paragraph), ``place`` mapping its pixels to
    PDF points."""
    blocks: list[Block] = []
    for paragraph in ocr.read_paragraphs(picture, languages):
        lines: list[Line] = []
        for line in paragraph:
            box = place(line.bbox)
            # A line's box is about its font size high: what heading detection compares.
            size = round((box[3] - box[1]) * 2) / 2
            lines.append(Line(text=line.text, bbox=box, size=size, bold=False))
        blocks.append(block_of_lines(page_number, lines))
    return blocks
