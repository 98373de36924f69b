"""What moves candidates after fusion: their page's context and keywords, their document's
freshness and year, at most a few passages per page, and a look-up's rare identifiers."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rag_pipeline.store import Hit
from serving.retrieval.candidates import Candidate

_LOOKUP_TERMS = 4  # a query of at most this many keyword terms is a look-up (looks_up)


def looks_up(query: str, terms: int | None) -> bool:
    """Whether ``query`` (of ``terms`` keyword terms; None: count its words) is a look-up of a
    few words: there an identifier is what is asked for; in a question it is one detail among
    many (a fiscal year, a company's name), and moving passages for it cost questions on
    financebench-dev."""
    return (len(query.split()) if terms is None else terms) <= _LOOKUP_TERMS


# A word mixing letters and digits (part numbers, codes), or of capitals only (tickers).
_IDENTIFIER = re.compile(
    r"(?<![\w-])(?=[\w./-]*\d)(?=[\w./-]*[^\W\d_])\w[\w./-]*\w(?![\w-])"
    r"|(?<![\w-])[A-Z]{2,6}(?![\w-])"
)


def identifiers_before_dense_guesses(
    candidates: list[Candidate], query: str, keyword_hits: list[Hit], most_documents: int
) -> list[Candidate]:
    """The candidates with those that only the dense side found moved after every candidate
    holding one of the query's rare identifiers; the others keep their order. An identifier is
    rare when the keyword search's passages hold it in at least one and at most
    ``most_documents`` documents: fusion gives a passage that only the keyword side found (an
    exact code) no more than the dense side's best guess, and would tie the two."""
    patterns = [
        re.compile(rf"(?<![\w-]){re.escape(word)}(?![\w-])", re.IGNORECASE)
        for word in dict.fromkeys(_IDENTIFIER.findall(query))
    ]
    rare = [
        pattern
        for pattern in patterns
        if 1
        <= len({hit.payload.get("doc_id") for hit in keyword_hits if pattern.search(_text(hit))})
        <= most_documents
    ]
    holding = [i for i, c in enumerate(candidates) if any(p.search(c.text) for p in rare)]
    if not holding:
        return candidates
    last = holding[-1]
    held = set(holding)

    def dense_only(index: int) -> bool:
        candidate = candidates[index]
        return index not in held and candidate.sparse_rank is None

    before = range(last + 1)
    return (
        [candidates[i] for i in before if not dense_only(i)]
        + [candidates[i] for i in before if dense_only(i)]
        + candidates[last + 1 :]
    )


def _text(hit: Hit) -> str:
    return hit.payload.get("text", "")


def with_page_context(candidates: list[Candidate], weight: float) -> list[Candidate]:
    """The candidates with their page scores, ordered again: a passage's page is where it
    starts, and the best of the other passages found there adds to it (a statement's rows and
    its title, each matched a little, lift each other). The best one, not their sum: a sum made
    a page of many middling passages outrank every other page."""
    best: dict[tuple[str, int], list[float]] = {}  # page -> its two best fused scores
    for candidate in candidates:
        if (page := _page_of(candidate)) is not None:
            best[page] = sorted([*best.get(page, []), candidate.fused_score], reverse=True)[:2]
    for candidate in candidates:
        if (page := _page_of(candidate)) is not None:
            first, *second = best[page]
            other = first if candidate.fused_score < first else (second or [0.0])[0]
            candidate.page_score = weight * other
    return sorted(candidates, key=lambda candidate: -candidate.score)


def with_page_keywords(
    candidates: list[Candidate], page_hits: list[Hit], weight: float
) -> list[Candidate]:
    """The candidates with their page keyword scores, ordered again: each passage gains
    ``weight`` × how well the whole page it starts on matches the query's keywords: its page's
    BM25 score over the best page's, from ``page_hits`` (the candidates, each scored by its
    page). A page answers as a whole (a title on top, the figure asked for in a table below)
    where no one passage holds every word of the question."""
    best: dict[tuple[str, int], float] = {}
    for hit in page_hits:
        page = hit.payload.get("page")
        if page is not None:
            key = (hit.payload.get("doc_id", ""), page)
            best[key] = max(best.get(key, 0.0), hit.score)
    top = max(best.values(), default=0.0)
    if top <= 0:
        return candidates
    for candidate in candidates:
        if (page := _page_of(candidate)) in best:
            candidate.page_keyword_score = weight * best[page] / top
    return sorted(candidates, key=lambda candidate: -candidate.score)


def diversified(candidates: list[Candidate], per_page: int) -> list[Candidate]:
    """The candidates with at most ``per_page`` of each page first, in order, then the rest in
    order: the first passages show as many pages as come close."""
    shown: dict[tuple[str, int], int] = {}
    first: list[Candidate] = []
    later: list[Candidate] = []
    for candidate in candidates:
        page = _page_of(candidate)
        if page is not None and shown.get(page, 0) >= per_page:
            later.append(candidate)
            continue
        if page is not None:
            shown[page] = shown.get(page, 0) + 1
        first.append(candidate)
    return first + later


def _page_of(candidate: Candidate) -> tuple[str, int] | None:
    page = candidate.payload.get("page")
    return None if page is None else (candidate.payload.get("doc_id", ""), page)


_YEAR = re.compile(r"(?<!\d)(19[5-9]\d|20\d\d)(?!\d)")


def years_in(*texts: str) -> set[int]:
    return {int(year) for text in texts for year in _YEAR.findall(text)}


def _file_name(payload: dict[str, Any]) -> str:
    return Path(payload.get("file_path") or "").name


def document_date(payload: dict[str, Any]) -> float | None:
    """When a passage's document is dated, in seconds since the epoch: the end of the latest
    year its title or file name names (a report's period), else its file's modification
    time."""
    if years := years_in(payload.get("title") or "", _file_name(payload)):
        return datetime(max(years), 12, 31, tzinfo=UTC).timestamp()
    return payload.get("mtime")


def freshened(
    candidates: list[Candidate], half_life_days: float, weight: float, *, reranked: int
) -> list[Candidate]:
    """The candidates with their freshness scores, ordered again (see :func:`_reordered`)."""
    now = time.time()
    for candidate in candidates:
        dated = document_date(candidate.payload)
        age_days = max(now - dated, 0.0) / 86_400 if dated is not None else None
        decay = 0.5 ** (age_days / half_life_days) if age_days is not None else 0.0
        candidate.freshness_score = weight * decay
    return _reordered(candidates, reranked)


def of_named_years(
    candidates: list[Candidate], years: set[int], weight: float, reranked: int
) -> list[Candidate]:
    """The candidates with their named year scores, ordered again: ``weight`` for those whose
    document's file name names one of ``years``, the years the query names. The file name, not
    the title: a file is named by its period (``PEPSICO_2022_10K.pdf``), a title often by its
    topic (an article on the 2008 Olympics)."""
    for candidate in candidates:
        named = years_in(_file_name(candidate.payload))
        candidate.named_year_score = weight if years & named else 0.0
    return _reordered(candidates, reranked)


def _reordered(candidates: list[Candidate], reranked: int) -> list[Candidate]:
    """Each part (the reranked first ``reranked``, then the rest, whose scores are on another
    scale) ordered again by score."""

    def ordered(part: list[Candidate]) -> list[Candidate]:
        return sorted(part, key=lambda candidate: -candidate.score)

    return ordered(candidates[:reranked]) + ordered(candidates[reranked:])
