"""Where in its passage a citation points: the pages of the sentences the answer quotes from
it, so that a passage running over two pages is cited, and shown, at the page its quoted
sentences lie on rather than at the page it starts on; and where in its text the first of them
starts, for its evidence line.

A chunk's text is the line naming its document (when it has one), then one line per piece of
its document, and it keeps one box per piece, on the piece's page (``chunking.chunk_document``):
so its lines are placed on pages when, that line left aside, they are as many as its boxes.
A passage whose lines cannot be placed so (a piece of several lines, such as a table's rows)
or that has no pages is cited as before, at its first page.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rag_pipeline.language import sentence_spans
from serving.answer import quoted
from serving.extractive import is_statement
from serving.retrieval import shown_text


def quoted_pages(payload: dict[str, Any], answer_text: str) -> list[int]:
    """The pages that the passage's sentences quoted whole in ``answer_text`` lie on, the one
    holding most of their text first; none when the answer quotes none of them (a language
    model's own words) or the passage's lines cannot be placed on pages."""
    lines = _lines_on_pages(payload)
    if not lines:
        return []
    shown = shown_text(payload)
    offset = len(payload.get("text", "")) - len(shown)  # what is shown ends the text
    quoted_characters: Counter[int] = Counter()
    for start, end in quoted_spans(shown, answer_text):
        for (line_start, line_end), page in lines:
            overlap = min(end + offset, line_end) - max(start + offset, line_start)
            if overlap > 0 and page is not None:
                quoted_characters[page] += overlap
    return [page for page, _ in quoted_characters.most_common()]


def quoted_spans(text: str, answer_text: str) -> list[tuple[int, int]]:
    """The spans of ``text``'s sentences that ``answer_text`` quotes whole, in order."""
    return [
        (start, end)
        for start, end in sentence_spans(text)
        if is_statement(sentence := text[start:end].strip()) and quoted(sentence) in answer_text
    ]


def _lines_on_pages(payload: dict[str, Any]) -> list[tuple[tuple[int, int], int | None]]:
    """Each line of the chunk's text (its span) with the page its piece lies on (None for the
    line naming its document); none when the lines and boxes do not match up."""
    text = payload.get("text", "")
    boxes = payload.get("bboxes") or []
    lines = text.split("\n")
    named = 0 if shown_text(payload) == text else 1  # the line naming its document, if any
    if not boxes or len(lines) - named != len(boxes):
        return []
    placed: list[tuple[tuple[int, int], int | None]] = []
    start = 0
    for index, line in enumerate(lines):
        page = boxes[index - named]["page"] if index >= named else None
        placed.append(((start, start + len(line)), page))
        start += len(line) + 1
    return placed
