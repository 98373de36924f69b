"""Words in pictures → text lines with boxes, through tesseract (Debian ``tesseract-ocr``).

pytesseract is called directly rather than through unstructured's ``ocr_only``, which drops
unspaced CJK text. Tesseract returns Chinese one character per "word": words are joined with a
space only where neither side is CJK.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from rag_pipeline.language import is_unspaced
from rag_pipeline.parsing.elements import BBox, ParseError

if TYPE_CHECKING:
    from PIL.Image import Image

_MIN_CONFIDENCE = 30.0  # tesseract's per-word confidence (0–100); lower is mostly noise


@dataclass(frozen=True, slots=True)
class OcrLine:
    text: str
    bbox: BBox  # in the picture's pixels
    paragraph: int  # lines of one paragraph share this number


@cache
def _installed_languages() -> frozenset[str]:
    import pytesseract

    if shutil.which("tesseract") is None:
        return frozenset()
    return frozenset(pytesseract.get_languages(config=""))


def require_ocr(languages: str) -> None:
    """Fail with what to install when tesseract or one of ``languages`` is missing."""
    installed = _installed_languages()
    if not installed:
        raise ParseError(
            "OCR needs tesseract: install Debian's tesseract-ocr and tesseract-ocr-chi-sim "
            "(or set images.ocr_languages to null to skip OCR)"
        )
    missing = [language for language in languages.split("+") if language not in installed]
    if missing:
        raise ParseError(
            f"tesseract lacks the language data {', '.join(missing)}: install "
            f"tesseract-ocr-{'-'.join(missing[0].split('_'))} or change images.ocr_languages"
        )


def read_paragraphs(picture: Image, languages: str) -> list[list[OcrLine]]:
    """The lines tesseract finds in ``picture``, grouped by paragraph, in reading order."""
    paragraphs: dict[int, list[OcrLine]] = {}
    for line in read_lines(picture, languages):
        paragraphs.setdefault(line.paragraph, []).append(line)
    return list(paragraphs.values())


def read_lines(picture: Image, languages: str) -> list[OcrLine]:
    """The text lines tesseract finds in ``picture``, in its reading order."""
    import pytesseract

    require_ocr(languages)
    with _one_thread():
        data = pytesseract.image_to_data(
            picture if picture.mode == "RGB" else picture.convert("RGB"),
            lang=languages,
            output_type=pytesseract.Output.DICT,
        )
    lines: dict[tuple[int, int, int], list[int]] = {}
    for index, word in enumerate(data["text"]):
        if word.strip() and float(data["conf"][index]) >= _MIN_CONFIDENCE:
            key = (data["block_num"][index], data["par_num"][index], data["line_num"][index])
            lines.setdefault(key, []).append(index)
    paragraphs = {key[:2]: number for number, key in enumerate(dict.fromkeys(k[:2] for k in lines))}
    found: list[OcrLine] = []
    for key, words in lines.items():
        text = join_words(data["text"][index].strip() for index in words)
        left = min(data["left"][index] for index in words)
        top = min(data["top"][index] for index in words)
        right = max(data["left"][index] + data["width"][index] for index in words)
        bottom = max(data["top"][index] + data["height"][index] for index in words)
        found.append(OcrLine(text, (left, top, right, bottom), paragraphs[key[:2]]))
    return found


_THREAD_LIMIT = "OMP_THREAD_LIMIT"
_limit_lock = threading.Lock()
_limit_users = 0
_limit_previous: str | None = None


@contextmanager
def _one_thread() -> Iterator[None]:
    """Tesseract on one thread: its OpenMP threads make it slower, not faster (a page of
    English at 200 dpi: 10.8 s with them, 4.1 s without, on 2 cores); parallelism comes from
    running several at once. pytesseract passes ``os.environ`` to tesseract, so the limit is set
    there while any OCR call runs (counted: calls may overlap in threads)."""
    global _limit_users, _limit_previous
    with _limit_lock:
        if _limit_users == 0:
            _limit_previous = os.environ.get(_THREAD_LIMIT)
            os.environ[_THREAD_LIMIT] = "1"
        _limit_users += 1
    try:
        yield
    finally:
        with _limit_lock:
            _limit_users -= 1
            if _limit_users == 0:
                if _limit_previous is None:
                    os.environ.pop(_THREAD_LIMIT, None)
                else:
                    os.environ[_THREAD_LIMIT] = _limit_previous


def join_words(words: Iterable[str]) -> str:
    """Words of one line as text: spaced, except between two Chinese or Japanese characters."""
    text = ""
    for word in words:
        if text and not (is_unspaced(text[-1]) and is_unspaced(word[0])):
            text += " "
        text += word
    return text
