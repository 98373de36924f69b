"""Lines of text as read off a page (by PyMuPDF or by OCR) → one text, with a box per line.

Lines are joined with a space, except between two CJK characters (Chinese and Japanese put
none) and across a hyphen that splits a word ("em-" + "bedding").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rag_pipeline.parsing.elements import BBox, TextBox

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uff00-\uffef\u3000-\u303f]")


def is_cjk(character: str) -> bool:
    return _CJK.match(character) is not None


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
            elif not (is_cjk(text[-1]) and is_cjk(piece[0])):
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
