"""Lines of text as read off a page (by PyMuPDF or by OCR) → one text, with a box per line.

Lines are joined with a space, except between two characters of a script written without
spaces (Chinese, Japanese) and across a hyphen that splits a word ("em-" + "bedding").
"""

from __future__ import annotations

from collections.abc import Iterable

from rag_pipeline.language import is_unspaced
from rag_pipeline.parsing.elements import BBox, TextBox


def join_lines(lines: Iterable[tuple[str, BBox]]) -> tuple[str, tuple[TextBox, ...]]:
    """``(line text, line box)`` pairs as one text and where each line of it sits."""
    text = ""
    boxes: list[TextBox] = []
    for line, bbox in lines:
        piece = " ".join(line.split())
        if not piece:
            continue
        if text:
            if _is_hyphenated(text, piece):
                text = text[:-1]
            elif not (is_unspaced(text[-1]) and is_unspaced(piece[0])):
                text += " "
        start = len(text)
        text += piece
        boxes.append(TextBox(start=start, end=len(text), bbox=bbox))
    return text, tuple(boxes)


def _is_hyphenated(text: str, next_piece: str) -> bool:
    return (
        len(text) >= 2
        and text[-1] in "-\u00ad"
        and text[-2].isalpha()
        and next_piece[0].isalpha()
        and next_piece[0].islower()
    )
