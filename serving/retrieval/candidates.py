"""What a retrieval returns: candidates with each ranking's rank and score, and the passages."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from rag_pipeline import ids
from rag_pipeline.chunking import document_name, without_header
from rag_pipeline.store import SECTION_SEPARATOR, QueryFilter, is_picture, payload_pages


def shown_text(payload: dict[str, Any]) -> str:
    """A point's text as its document has it: without the line naming its document and
    section that heads it for search (see ``chunking.without_header``); a picture's caption as
    it is."""
    text = payload.get("text", "")
    if is_picture(payload):
        return text
    # The name the chunker was given, as far as the payload tells: its title is the file's stem
    # when the document has none, which names it the same unless the stem is a code.
    document = document_name(payload.get("file_path", ""), payload.get("title"))
    section = payload.get("section") or ""
    return without_header(text, document, section.split(SECTION_SEPARATOR) if section else ())


class QueryError(ValueError):
    """A query that cannot be run; the message says why."""


@dataclass(slots=True)
class Candidate:
    """A point found by the dense, sparse, image or multilingual search (or several), with its
    fused score."""

    point_id: str
    payload: dict[str, Any]
    dense_rank: int | None = None  # 1-based
    dense_score: float | None = None
    sparse_rank: int | None = None
    sparse_score: float | None = None
    image_rank: int | None = None  # by the query through CLIP's text tower, or by a picture
    image_score: float | None = None
    multilingual_rank: int | None = None  # by the multilingual model (see NearestHits)
    multilingual_score: float | None = None
    fused_score: float = 0.0
    page_score: float | None = None  # page_weight × the best fused score of its page's others
    # page_keyword_weight × how well its page's whole text matches the query's keywords
    page_keyword_score: float | None = None
    rerank_score: float | None = None
    freshness_score: float | None = None  # weight × 0.5^(age / half-life), when configured
    named_year_score: float | None = None  # weight when its document is of a year the query names
    # what lifts a passage of a part the question names ("Figure 3") to the best score
    named_score: float | None = None
    # The parts of a several-part question whose own searches added it to the whole question's
    # passages, which alone it answers (empty: found for the whole question).
    parts: frozenset[str] = frozenset()

    @property
    def score(self) -> float:
        """The score that orders the final passages: the reranker's, else the fused one with
        its page's context and keywords, plus the freshness, named year and named part
        scores."""
        if self.rerank_score is not None:
            base = self.rerank_score
        else:
            base = self.fused_score + (self.page_score or 0.0) + (self.page_keyword_score or 0.0)
        return (
            base
            + (self.freshness_score or 0.0)
            + (self.named_year_score or 0.0)
            + (self.named_score or 0.0)
        )

    @property
    def text(self) -> str:
        return self.payload.get("text", "")

    def as_hit(self) -> dict[str, Any]:
        """What ``rag-pipeline query --json`` prints per hit."""
        payload = self.payload
        chunk_id = payload.get("chunk_id", "")
        return {
            "doc_id": payload.get("doc_id", ""),
            "chunk_id": chunk_id,
            "chunk_index": ids.parse_chunk_id(chunk_id)[2] if chunk_id else None,
            "file_path": payload.get("file_path", ""),
            "page": payload.get("page"),
            "pages": payload_pages(payload),
            "bbox": payload.get("bbox"),
            "section": payload.get("section", ""),
            "text": self.text,
            "score": self.score,
            "modality": payload.get("modality", "text"),
            "image_file": payload.get("image_file"),
        }


@dataclass(slots=True)
class Retrieval:
    query: str
    query_filter: QueryFilter
    candidates: list[Candidate]  # every fused candidate, best first
    passages: list[Candidate]  # what an answer is built from: reranked, cut, thresholded
    reranker: str | None  # the reranker's name, or None when the fused order stands
    timings_ms: dict[str, float] = field(default_factory=dict)
    pictures: list[Candidate] = field(default_factory=list)  # nearest by CLIP's text tower

    def with_part(self, part: str, found: Retrieval) -> Retrieval:
        """These passages and those a search of the question's ``part`` ``found`` that they
        lack, marked as that part's (a passage two parts found is both's); its candidates too,
        so that a trace lists every passage used among them, and its timings added."""
        passages = {passage.point_id: passage for passage in self.passages}
        for passage in found.passages:
            held = passages.get(passage.point_id)
            if held is None:
                passages[passage.point_id] = replace(passage, parts=frozenset({part}))
            elif held.parts:
                passages[passage.point_id] = replace(held, parts=held.parts | {part})
        merged = list(passages.values())
        by_id = {passage.point_id: passage for passage in merged}
        candidates = [by_id.get(c.point_id, c) for c in self.candidates]
        listed = {candidate.point_id for candidate in candidates}
        timings = dict(self.timings_ms)
        for stage, ms in found.timings_ms.items():
            timings[stage] = timings.get(stage, 0.0) + ms
        return replace(
            self,
            candidates=candidates + [p for p in merged if p.point_id not in listed],
            passages=merged,
            timings_ms=timings,
        )
