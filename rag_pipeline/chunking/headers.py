"""The line that gives a chunk its context: the name of its document and its section."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rag_pipeline.embedding.dense import TokenCounter
    from rag_pipeline.parsing import Element

_LETTER = re.compile(r"[^\W\d_]")
_WORD = re.compile(r"[^\W\d_]{4,}")  # four letters or more


def document_name(relative_path: str, title: str | None) -> str | None:
    """What a document's chunks say they come from: its file name, which users choose to say
    what it is ("ACME_2023_10K", "3M_2018_10K"), unless that is a number or a code ("4983",
    "DEV_0"); then its title."""
    stem = Path(relative_path).stem.replace("_", " ")
    lettered = [part for part in re.split(r"[\s.-]+", stem) if _LETTER.search(part)]
    return stem if _WORD.search(stem) or len(lettered) >= 2 else title


def without_header(text: str, document: str | None, section: Sequence[str]) -> str:
    """A chunk's text as its document has it: the line :class:`_Headers` put first taken off,
    for showing a passage (what is embedded and matched keeps it).

    ``document`` and ``section`` are what the chunk was made with (its name, as
    :func:`document_name` gives it, and the section of its first text). The line is known by
    being one that :class:`_Headers` could have written for them; a chunk that starts at a
    heading was headed by the document's name alone. A chunk that starts at a heading and was
    given no line (its document has no name, or that heading is the name) cannot be told from
    one headed by that heading: the heading is taken off, as the line would be. The section is
    shown beside a passage anyway.
    """
    line, newline, rest = text.partition("\n")
    if not (newline and line):
        return text
    named, names = _named(_one_line(document or ""), tuple(map(_one_line, section)))
    if line in (*_choices(named, names), *_choices(named, ())):
        return rest
    # Too long for a line even alone, a name was cut after its first words.
    cut = any(len(line) < len(name) and name.startswith(line) for name in (*names[-1:], named))
    return rest if cut else text


def _one_line(name: str) -> str:
    return " ".join(name.split())


def _named(document: str, section: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """(the document's name, the sections below it): a document whose outermost heading is its
    name (a paper's title) is named once, as the heading spells it."""
    if section and document and section[0].casefold() == document.casefold():
        return section[0], section[1:]
    return document, section


def _choices(document: str, section: tuple[str, ...]) -> list[str]:
    """The lines that may head a chunk, longest first: the document's name and the sections, the
    sections below the name dropped from the outside, then the name too."""
    names = list(section)
    named = [document] if document else []
    shortened = [named + names[start:] for start in range(len(names))]
    return [
        " › ".join(parts) for parts in ([*shortened, names[-1:]] if names else [named]) if parts
    ]


class _Headers:
    """The line giving a chunk's context, put first: the document's name and the chunk's
    section (a chunk that starts at a heading has that heading as its first line already).

    A chunk cut from the middle of a section otherwise loses what it is about (the report, the
    statement, the chapter, the sheet), which both the dense model and keyword search need.
    """

    def __init__(self, counter: TokenCounter, most_tokens: int, document: str | None) -> None:
        self._counter = counter
        self._most = most_tokens
        self._document = _one_line(document or "")
        self._lines: dict[tuple[tuple[str, ...], str], tuple[str, int]] = {}

    def _of(self, element: Element) -> tuple[str, int]:
        section = tuple(map(_one_line, element.section))
        document, below = _named(self._document, section)
        if element.kind == "title":  # a chunk that starts at a heading holds it already
            if section and not below:  # the heading is the document's name: it is the line
                return "", 0
            below = ()
        key = (below, document)
        if key not in self._lines:
            self._lines[key] = self._fitted(below, document)
        return self._lines[key]

    def _fitted(self, section: tuple[str, ...], document: str) -> tuple[str, int]:
        """(line, its tokens): sections below the document's name dropped from the outside
        until it is short enough, then the name too; the innermost cut after its last whole
        word that fits when even it is too long (a long paper title: its first words still say
        what the chunk is about)."""
        for candidate in _choices(document, section):
            tokens = self._counter.count([candidate])[0] + 1  # and its newline
            if tokens <= self._most:
                return candidate + "\n", tokens
        if not (section or document) or self._most < 2:
            return "", 0
        innermost = (section or (document,))[-1]
        end = self._counter.offsets(innermost)[self._most - 2][1]  # keeps most - 1 tokens
        cut = innermost[:end]
        if not innermost[end].isspace() and " " in cut:  # not in the middle of a word
            cut = cut.rsplit(" ", 1)[0]
        return cut + "\n", self._counter.count([cut])[0] + 1

    def line(self, element: Element) -> str:
        return self._of(element)[0]

    def cost(self, element: Element) -> int:
        return self._of(element)[1]
