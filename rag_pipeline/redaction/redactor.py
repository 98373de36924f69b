"""Replacing sensitive values in a parsed document, before anything else sees its text.

Each value found becomes a mask (``[EMAIL]``) or a keyed hash of it (``[EMAIL:1f0c9a2e]``, equal
values alike, so they stay joinable); the boxes that locate an element's text on its page move
with the text around them. The counts of what was replaced, by kind, go to the document's
metadata; the values themselves go nowhere.
"""

from __future__ import annotations

import bisect
import hashlib
import hmac
import os
import re
import secrets
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from rag_pipeline.config import RedactionSettings, Settings
from rag_pipeline.parsing import Element, ParsedDocument, TextBox
from rag_pipeline.redaction.detectors import BUILT_IN, PRIORITY, WRAP, Detector, canonical

KEY_FILE = "redaction.key"
# What a replaced value reads as: the masks of every detector, with or without a hash.
MASK = re.compile(r"\[[A-Z][A-Z0-9_]*(?::[0-9a-f]{8})?\]")


@dataclass(frozen=True, slots=True)
class Found:
    start: int
    end: int
    kind: str


class Redactor:
    """Finds and replaces the values its settings name. Picklable: parser workers use it."""

    def __init__(self, settings: RedactionSettings, key: bytes = b"") -> None:
        built_in = [BUILT_IN[name] for name in PRIORITY if name in settings.detectors]
        custom = [Detector(name, re.compile(p)) for name, p in settings.patterns.items()]
        self.detectors = [*custom, *built_in]  # custom ones first: the user asked for them
        self.hashed = settings.mode == "hash"
        self._settings, self._key = settings, key

    def __reduce__(self) -> tuple[type[Redactor], tuple[RedactionSettings, bytes]]:
        return Redactor, (self._settings, self._key)  # rebuilt from its settings in a worker

    @classmethod
    def of(cls, settings: Settings) -> Redactor | None:
        """The redactor ``settings`` ask for, or None when redaction is off."""
        redaction = settings.redaction
        if not redaction.enabled:
            return None
        return cls(redaction, hash_key(settings.root) if redaction.mode == "hash" else b"")

    def find(self, text: str) -> list[Found]:
        """The values in ``text``, not overlapping, in order; a detector listed earlier wins
        where two overlap."""
        found: list[tuple[int, int, int, str]] = []  # start, priority, end, kind
        for priority, detector in enumerate(self.detectors):
            for start, end in _spans(detector, text, 0, len(text)):
                found.append((start, priority, end, detector.name))
        kept: list[Found] = []
        taken: list[tuple[int, int]] = []
        for start, _, end, kind in sorted(found, key=lambda f: (f[1], f[0])):
            if not any(start < b and a < end for a, b in taken):
                taken.append((start, end))
                kept.append(Found(start, end, kind))
        return sorted(kept, key=lambda f: f.start)

    def mask(self, kind: str, value: str) -> str:
        if not self.hashed:
            return f"[{kind.upper()}]"
        value = canonical(kind, value)
        digest = hmac.new(self._key, value.encode("utf-8"), hashlib.sha256).hexdigest()[:8]
        return f"[{kind.upper()}:{digest}]"

    def text(self, text: str, counts: Counter[str] | None = None) -> str:
        return self._replaced(text, counts)[0]

    def element(self, element: Element, counts: Counter[str]) -> Element:
        """The element with its values replaced (its section too), its boxes moved along."""
        text, moves = self._replaced(element.text, counts)
        section = tuple(self.text(part, counts) for part in element.section)
        if not moves and section == element.section:
            return element
        boxes = tuple(
            TextBox(_moved(box.start, moves, end=False), _moved(box.end, moves, end=True), box.bbox)
            for box in element.boxes
        )
        return replace(element, text=text, section=section, boxes=boxes)

    def document(self, parsed: ParsedDocument, counts: Counter[str]) -> ParsedDocument:
        """``parsed`` with every element redacted as it is read (a generator stays one);
        ``counts`` fills as the elements are read."""
        elements: Iterable[Element] = parsed.elements

        def redacted() -> Iterator[Element]:
            for element in elements:
                yield self.element(element, counts)

        title = self.text(parsed.title, counts) if parsed.title else parsed.title
        return replace(parsed, elements=redacted(), title=title)

    def _replaced(
        self, text: str, counts: Counter[str] | None
    ) -> tuple[str, list[tuple[int, int, int, int]]]:
        """The text with its values replaced, and each replacement as (old start, old end,
        new start, new end)."""
        parts, moves, position, shift = [], [], 0, 0
        for found in self.find(text):
            masked = self.mask(found.kind, text[found.start : found.end])
            parts += [text[position : found.start], masked]
            start = found.start + shift
            moves.append((found.start, found.end, start, start + len(masked)))
            shift += len(masked) - (found.end - found.start)
            position = found.end
            if counts is not None:
                counts[found.kind] += 1
        if not moves:
            return text, moves
        parts.append(text[position:])
        return "".join(parts), moves


def _spans(detector: Detector, text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Where ``detector`` finds valid values in ``text[start:end]``.

    A candidate joined over a line end (``WRAP``) that fails its check is scanned again as the
    lines it spans, as if they had never been joined: a card number at a line's end stays one
    when the next line starts with figures that make the joined run Luhn-invalid.
    """
    position = start
    while match := detector.pattern.search(text, position, end):
        if match.end() == match.start():
            position = match.end() + 1  # an empty match (a custom pattern) finds nothing
        elif detector.valid(match.group()):
            yield match.span()
            position = match.end()
        elif wrap := WRAP.search(text, match.start(), match.end()):
            yield from _spans(detector, text, match.start(), wrap.start())
            position = max(wrap.start(), match.start() + 1)
        else:
            position = match.end()


def _moved(offset: int, moves: list[tuple[int, int, int, int]], *, end: bool) -> int:
    """Where ``offset`` of the old text lands in the new one; inside a replaced value, at the
    start (or, for an end, the end) of its mask."""
    index = bisect.bisect_right([move[0] for move in moves], offset) - 1
    if index < 0:
        return offset
    old_start, old_end, new_start, new_end = moves[index]
    if offset >= old_end:
        return new_end + offset - old_end
    if offset == old_start:
        return new_start
    return new_end if end else new_start


def hash_key(root: Path) -> bytes:
    """The installation's secret for hashed masks, made at first use (readable by its owner
    only): without it, a hash of a phone number cannot be recomputed from a guess."""
    path = root / KEY_FILE
    if not path.exists():
        root.mkdir(parents=True, exist_ok=True)
        partial = root / f".{KEY_FILE}.{os.getpid()}"
        partial.write_bytes(secrets.token_bytes(32))
        partial.chmod(0o600)
        try:
            os.link(partial, path)  # the first writer wins; others read what it wrote
        except FileExistsError:
            pass
        finally:
            partial.unlink()
    return path.read_bytes()
