"""Parts of a document a question names: "page 5", "Figure 3", "Table 1-1", "Section 3.4",
"the cover page", "第5页", "图3". A search by meaning and words finds the document such a
question is about but rarely the part it names, whose number is one common word among many:
the part is looked up in the documents found first, and its passage put first."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from rag_pipeline.store import Hit, QueryFilter, payload_pages
from serving.retrieval.candidates import Candidate

# How many of the documents found first a named part is looked up in: the question's document
# is the first one found on most questions but not on all.
NAMED_DOCUMENTS = 2

_NUMBER = r"\d{1,4}(?:[.-]\d{1,3})*"
_MORE = (
    r"((?:\s*(?:,\s*(?:and|or)?|and|&|or)\s*\d{1,4})*)"  # "pages 15 and 16", "units 4, 5, and 6"
)
_PAGE = re.compile(rf"\b(?:pages?|slides?|p\.)\s*\(?({_NUMBER})\)?{_MORE}", re.IGNORECASE)
_FIRST_PAGE = re.compile(r"\b(?:first|cover|front|title)\s+(?:page|slide)\b", re.IGNORECASE)
_LABEL = re.compile(
    rf"\b(fig(?:ure)?s?\.?|tables?|sections?|chapters?|appendix|appendices|parts?|units?)\s*"
    rf"({_NUMBER}|(?-i:[A-H])\b){_MORE}",  # an appendix's letter in capitals only
    re.IGNORECASE,
)
_FIRST_LABEL = re.compile(r"\bfirst\s+(figure|table)\b", re.IGNORECASE)
_CHINESE_PAGE = re.compile(r"第\s*(\d{1,4})\s*页")
_CHINESE_LABEL = re.compile(rf"(图|表|第\s*(?=\d+\s*[章节]))\s*({_NUMBER})\s*([章节])?")

# The kinds a label's word names, and how a passage shows that it holds the part: a figure or
# table by its caption's line ("Figure 3:", "Table 2."), a section and the like by its heading.
_KINDS = {
    "fig": "figure",
    "tab": "table",
    "sec": "section",
    "cha": "chapter",
    "app": "appendix",
    "par": "part",
    "uni": "unit",
}
_CAPTIONED = {"figure": r"fig(?:ure)?\.?|图", "table": r"table|表"}
_HEADED = {
    "section": r"(?:section|§|第)?",
    "chapter": r"chapter|第",
    "appendix": r"appendix",
    "part": r"part",
    "unit": r"unit",
}


@dataclass(frozen=True, slots=True)
class NamedParts:
    """The pages (1-based) and the labelled parts (kind, number) a question names."""

    pages: frozenset[int] = frozenset()
    labels: frozenset[tuple[str, str]] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.pages or self.labels)

    def each(self) -> list[NamedParts]:
        """Each named part alone."""
        return [NamedParts(pages=frozenset({page})) for page in sorted(self.pages)] + [
            NamedParts(labels=frozenset({label})) for label in sorted(self.labels)
        ]

    def holds(self, payload: dict[str, Any]) -> bool:
        """Whether a passage lies on a named page or holds a named figure's or table's caption
        or a named section's heading."""
        if self.pages & set(payload_pages(payload)):
            return True
        text = payload.get("text", "")
        headings = "\n" + (payload.get("section") or "")
        return any(
            _pattern(kind, number).search(text if kind in _CAPTIONED else headings)
            for kind, number in self.labels
        )


def named_parts(question: str) -> NamedParts:
    pages: set[int] = set()
    labels: set[tuple[str, str]] = set()
    for match in _PAGE.finditer(question):
        pages.add(int(re.split(r"[.-]", match.group(1))[0]))
        pages.update(int(more) for more in re.findall(r"\d+", match.group(2)))
    if _FIRST_PAGE.search(question):
        pages.add(1)
    pages.update(int(match.group(1)) for match in _CHINESE_PAGE.finditer(question))
    for match in _LABEL.finditer(question):
        kind = _KINDS[match.group(1)[:3].lower()]
        for number in [match.group(2), *re.findall(r"\d+", match.group(3))]:
            labels.add((kind, number.upper()))
    labels.update((match.group(1).lower(), "1") for match in _FIRST_LABEL.finditer(question))
    for match in _CHINESE_LABEL.finditer(question):
        word, number, unit = match.groups()
        kind = {"图": "figure", "表": "table"}.get(word) or (
            "chapter" if unit == "章" else "section"
        )
        labels.add((kind, number))
    return NamedParts(frozenset(page for page in pages if page > 0), frozenset(labels))


def _pattern(kind: str, number: str) -> re.Pattern[str]:
    """A line (of a caption) or a heading (of a section path) that starts with the label."""
    words = _CAPTIONED.get(kind) or _HEADED[kind]
    # "Figure 3" but not "Figure 30" or "Figure 3.2"; a section's number alone heads it too
    return re.compile(
        rf"(?:^|\n|{re.escape(' > ')})\s*(?:{words})\s*{re.escape(number)}(?![\d.]\d|\d)",
        re.IGNORECASE,
    )


def leading_documents(candidates: list[Candidate], count: int = NAMED_DOCUMENTS) -> list[str]:
    """The first ``count`` documents of a ranking."""
    documents = dict.fromkeys(candidate.payload.get("doc_id", "") for candidate in candidates)
    return [doc_id for doc_id in documents if doc_id][:count]


def look_up(
    parts: NamedParts,
    documents: list[str],
    query_filter: QueryFilter,
    search: Callable[[QueryFilter], list[Candidate]],
) -> list[Hit]:
    """Of each part, the best passage holding it in each of ``documents``: each document
    searched again alone (``search``: the question's ranking under a filter), on the named
    pages (and the pages before them) for pages."""
    named: dict[str, Hit] = {}
    for doc_id in documents:
        searches = []
        if parts.pages:
            # a passage is filed under the page it starts on: one over a break, the one before
            pages = {page for shown in parts.pages for page in (shown - 1, shown)}
            searches.append(replace(query_filter, doc_ids=(doc_id,), pages=tuple(sorted(pages))))
        if parts.labels:
            searches.append(replace(query_filter, doc_ids=(doc_id,)))
        found = [candidate for restricted in searches for candidate in search(restricted)]
        for part in parts.each():
            best = next((c for c in found if part.holds(c.payload)), None)
            if best is not None and best.point_id not in named:
                named[best.point_id] = Hit(best.point_id, best.score, best.payload)
    return list(named.values())


def with_named_passages(candidates: list[Candidate], named: list[Hit]) -> list[Candidate]:
    """The candidates with the ``named`` passages (best first) moved, or added, before all
    others, each lifted to the best one's score: a question naming a part of a document asks
    about that part, of the document searched first or of the next one."""
    if not named:
        return candidates
    by_id = {candidate.point_id: candidate for candidate in candidates}
    chosen = [by_id.get(hit.point_id) or Candidate(hit.point_id, hit.payload) for hit in named]
    moved = {candidate.point_id for candidate in chosen}
    others = [candidate for candidate in candidates if candidate.point_id not in moved]
    best = max((candidate.score for candidate in [*chosen, *others]), default=0.0)
    for candidate in chosen:
        candidate.named_score = best - candidate.score
    return chosen + others
