"""Hybrid retrieval: dense, sparse (and CLIP image) nearest neighbours, fused, reranked, cut.

One Qdrant search returns the nearest points by each vector (``VectorStore.nearest``); they are
fused here rather than inside Qdrant so that every fusion method (RRF, DBSF, min-max sums, with
weights) works the same on both backends, and so that a trace keeps each ranking. The numbers
(candidates per vector, fusion, rerank depth, passages kept, score threshold) are settings.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_pipeline import ids
from rag_pipeline.catalog import Catalog
from rag_pipeline.config import RetrievalSettings, Settings
from rag_pipeline.embedding import DenseEncoder, SparseEncoder
from rag_pipeline.embedding.image import ClipEncoder
from rag_pipeline.embedding.models import dense_model_languages
from rag_pipeline.language import detect_language
from rag_pipeline.store import SearchableStore
from rag_pipeline.store.schema import Hit, NearestHits, QueryFilter

if TYPE_CHECKING:
    from PIL.Image import Image

    from serving.rerank import Reranker


class QueryError(ValueError):
    """A query that cannot be run; the message says why."""


# The rankings fusion merges: NearestHits fields, each weighted by RetrievalSettings.<kind>_weight.
_RANKINGS = ("dense", "sparse", "image")


@dataclass(slots=True)
class Candidate:
    """A point found by the dense, sparse or image search (or several), with its fused score."""

    point_id: str
    payload: dict[str, Any]
    dense_rank: int | None = None  # 1-based
    dense_score: float | None = None
    sparse_rank: int | None = None
    sparse_score: float | None = None
    image_rank: int | None = None  # by the query through CLIP's text tower, or by a picture
    image_score: float | None = None
    fused_score: float = 0.0
    page_score: float | None = None  # page_weight × the fused scores of its page's others
    rerank_score: float | None = None
    freshness_score: float | None = None  # weight × 0.5^(age / half-life), when configured
    named_year_score: float | None = None  # weight when its document is of a year the query names

    @property
    def score(self) -> float:
        """The score that orders the final passages: the reranker's, else the fused one with
        its page's context, plus the freshness and named year scores."""
        if self.rerank_score is not None:
            base = self.rerank_score
        else:
            base = self.fused_score + (self.page_score or 0.0)
        return base + (self.freshness_score or 0.0) + (self.named_year_score or 0.0)

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


class OnlineOnly:
    """A store searched without what operators took out of search (archived or rejected
    documents and chunks, read from the catalog at each search: effective at once)."""

    def __init__(self, store: SearchableStore, catalog: Catalog) -> None:
        self.store = store
        self.catalog = catalog

    def nearest(
        self,
        dense: np.ndarray,
        sparse: tuple[np.ndarray, np.ndarray],
        *,
        limit: int,
        query_filter: QueryFilter | None = None,
        image: np.ndarray | None = None,
    ) -> NearestHits:
        return self.store.nearest(
            dense, sparse, limit=limit, query_filter=self._online(query_filter), image=image
        )

    def nearest_pictures(
        self, image: np.ndarray, *, limit: int, query_filter: QueryFilter | None = None
    ) -> list[Hit]:
        return self.store.nearest_pictures(
            image, limit=limit, query_filter=self._online(query_filter)
        )

    def _online(self, query_filter: QueryFilter | None) -> QueryFilter | None:
        live = self.catalog.live_collection()
        documents, chunks = self.catalog.offline(live.name) if live else ([], [])
        if not documents and not chunks:
            return query_filter
        return dataclasses.replace(
            query_filter or QueryFilter(),
            offline_doc_ids=tuple(documents),
            offline_point_ids=tuple(ids.point_id(chunk_id) for chunk_id in chunks),
        )


class CommittedOnly:
    """A store searched for the versions the catalog names live, and for nothing else.

    Between a document's new points being written and its catalog commit, and between the
    commit and the old points' deletion, the store holds two versions of it: only the live one
    is returned. A store that is written in place (the index itself, a Qdrant server) is
    searched through this; the chat page's replica holds committed versions only.
    """

    def __init__(self, store: SearchableStore, catalog: Catalog, collection: str) -> None:
        self.store = store
        self.catalog = catalog
        self.collection = collection

    def nearest(
        self,
        dense: np.ndarray,
        sparse: tuple[np.ndarray, np.ndarray],
        *,
        limit: int,
        query_filter: QueryFilter | None = None,
        image: np.ndarray | None = None,
    ) -> NearestHits:
        found = self.store.nearest(
            dense, sparse, limit=limit, query_filter=query_filter, image=image
        )
        live = self._live(found.dense + found.sparse + found.image)
        return NearestHits(*(self._kept(getattr(found, kind), live) for kind in _RANKINGS))

    def nearest_pictures(
        self, image: np.ndarray, *, limit: int, query_filter: QueryFilter | None = None
    ) -> list[Hit]:
        found = self.store.nearest_pictures(image, limit=limit, query_filter=query_filter)
        return self._kept(found, self._live(found))

    def _live(self, hits: list[Hit]) -> dict[str, str]:
        return self.catalog.live_versions(
            self.collection, {hit.payload.get("doc_id", "") for hit in hits}
        )

    @staticmethod
    def _kept(hits: list[Hit], live: dict[str, str]) -> list[Hit]:
        return [
            hit
            for hit in hits
            if live.get(hit.payload.get("doc_id", "")) == hit.payload.get("version")
        ]


def fuse(nearest: NearestHits, settings: RetrievalSettings) -> list[Candidate]:
    """Merge the dense, sparse and image rankings into one, best first."""
    rankings: dict[str, list[Hit]] = {kind: getattr(nearest, kind) for kind in _RANKINGS}
    weights: dict[str, float] = {kind: getattr(settings, f"{kind}_weight") for kind in _RANKINGS}
    candidates: dict[str, Candidate] = {}
    # A ranking weighted 0 brings no candidates of its own; its ranks are kept for traces.
    for kind in sorted(rankings, key=lambda kind: weights[kind] == 0):
        hits = rankings[kind]
        contribution = _contributions(hits, settings)
        for rank, hit in enumerate(hits, 1):
            if weights[kind] == 0 and hit.point_id not in candidates:
                continue
            candidate = candidates.setdefault(hit.point_id, Candidate(hit.point_id, hit.payload))
            setattr(candidate, f"{kind}_rank", rank)
            setattr(candidate, f"{kind}_score", hit.score)
            candidate.fused_score += weights[kind] * contribution[hit.point_id]
    # Equal fused scores (DBSF clips the best to 1.0; a weight of 0 zeroes a ranking): first
    # what more weighted rankings found, then the order of the ranking that weighs more.
    unranked = 1 << 30
    order = sorted(_RANKINGS, key=lambda kind: -weights[kind])

    def evidence(candidate: Candidate) -> int:
        return sum(1 for kind in order if weights[kind] and getattr(candidate, f"{kind}_rank"))

    return sorted(
        candidates.values(),
        key=lambda c: (
            -c.fused_score,
            -evidence(c),
            *(getattr(c, f"{kind}_rank") or unranked for kind in order),
        ),
    )


def _contributions(hits: list[Hit], settings: RetrievalSettings) -> dict[str, float]:
    """Each hit's share of the fused score, from its rank or its normalised score."""
    if settings.fusion == "rrf":
        return {hit.point_id: 1.0 / (settings.rrf_k + rank) for rank, hit in enumerate(hits, 1)}
    scores = [hit.score for hit in hits]
    if not scores:
        return {}
    if settings.fusion == "minmax":
        low, high = min(scores), max(scores)
    else:  # dbsf as Qdrant computes it: mean ± 3 sample standard deviations span [0, 1]
        mean = statistics.fmean(scores)
        spread = statistics.stdev(scores) if len(scores) > 1 else 0.0
        low, high = mean - 3 * spread, mean + 3 * spread
    width = high - low
    # A ranking of one hit, or of equal scores, has no spread to normalise by: each of its hits
    # is as good as its best. (Qdrant's DBSF gives them 0.5, so that an identifier found in one
    # chunk alone lost to the dense ranking's top, whatever the keywords said.)
    return {
        hit.point_id: 1.0 if width <= 0 else min(max((hit.score - low) / width, 0.0), 1.0)
        for hit in hits
    }


@dataclass(eq=False)
class QueryEncoders:
    """The models a query is embedded with."""

    dense: DenseEncoder
    sparse: SparseEncoder
    clip: ClipEncoder | None  # pictures are searched by CLIP's text tower too, when configured


_ENCODERS: weakref.WeakValueDictionary[tuple[str, ...], QueryEncoders] = (
    weakref.WeakValueDictionary()
)
_ENCODERS_LOCK = threading.Lock()


def query_encoders(settings: Settings) -> QueryEncoders:
    """The query models for these settings, shared while anything uses them: a server's
    workspaces with the same models hold one copy of the weights, not one each."""
    key = (
        settings.embedding.model_dump_json(),
        settings.images.model_dump_json(),
        str(settings.root),
    )
    with _ENCODERS_LOCK:
        encoders = _ENCODERS.get(key)
        if encoders is None:  # models load at first use, not under this lock
            encoders = QueryEncoders(
                DenseEncoder(settings.embedding, settings.root),
                SparseEncoder(settings.embedding, settings.root),
                ClipEncoder(settings.images) if settings.images.clip_model else None,
            )
            _ENCODERS[key] = encoders
        return encoders


class Retriever:
    """Embeds a query, searches, fuses and reranks; models are loaded once and reused."""

    def __init__(
        self, settings: Settings, store: SearchableStore, reranker: Reranker | None = None
    ) -> None:
        self.settings = settings
        self.store = store
        self.reranker = reranker
        self.encoders = query_encoders(settings)
        self.dense, self.sparse, self.clip = (
            self.encoders.dense,
            self.encoders.sparse,
            self.encoders.clip,
        )
        self._dense_languages = dense_model_languages(settings.embedding)

    def retrieve(
        self,
        query: str,
        query_filter: QueryFilter | None = None,
        *,
        top_k: int | None = None,
    ) -> Retrieval:
        config = self.settings.retrieval
        keep = config.top_k if top_k is None else top_k
        if keep < 1:
            raise QueryError("top-k must be at least 1")
        query_filter = query_filter or QueryFilter()
        timings: dict[str, float] = {}
        text = _normalised(query)
        nearest = self.search(text, query_filter, limit=max(config.prefetch, keep), timings=timings)
        candidates, passages = self.rank(text, nearest, keep=keep, timings=timings)
        by_id = {candidate.point_id: candidate for candidate in candidates}
        pictures = [
            by_id.get(hit.point_id)
            or Candidate(hit.point_id, hit.payload, image_rank=rank, image_score=hit.score)
            for rank, hit in enumerate(nearest.image[: config.pictures], 1)
        ]
        return Retrieval(
            query=text,
            query_filter=query_filter,
            candidates=candidates,
            passages=passages,
            reranker=self.reranker.name if self.reranker else None,
            timings_ms=timings,
            pictures=pictures,
        )

    def search(
        self,
        query: str,
        query_filter: QueryFilter | None = None,
        *,
        limit: int,
        timings: dict[str, float] | None = None,
    ) -> NearestHits:
        """The query embedded by both models, and the ``limit`` nearest points by each."""
        text = _normalised(query)
        timings = {} if timings is None else timings
        with _timed(timings, "embed"):
            dense = self.dense.embed_query(text)
            sparse = self.sparse.embed_query(text)
            image = self.clip.embed_query(text) if self.clip else None
        with _timed(timings, "search"):
            return self.store.nearest(
                dense,
                (sparse.indices, sparse.values),
                limit=limit,
                query_filter=query_filter,
                image=image,
            )

    def search_by_picture(
        self, picture: Image, query_filter: QueryFilter | None = None, *, limit: int = 12
    ) -> list[Candidate]:
        """The pictures most like ``picture`` (and so the pages that hold them), best first."""
        if self.clip is None:
            raise QueryError("search by image needs a CLIP model (images.clip_model)")
        vector = self.clip.embed_pictures([picture.convert("RGB")])[0]
        hits = self.store.nearest_pictures(vector, limit=limit, query_filter=query_filter)
        return [
            Candidate(
                hit.point_id,
                hit.payload,
                image_rank=rank,
                image_score=hit.score,
                fused_score=hit.score,
            )
            for rank, hit in enumerate(hits, 1)
        ]

    def rank(
        self,
        query: str,
        nearest: NearestHits,
        *,
        keep: int,
        fusion: RetrievalSettings | None = None,
        rerank: bool = True,
        timings: dict[str, float] | None = None,
    ) -> tuple[list[Candidate], list[Candidate]]:
        """(every candidate in final order, the passages to answer from).

        Fused (by ``fusion``, default the settings'), with page context when configured; the
        best ``rerank_candidates`` reranked when a reranker is configured and ``rerank`` (they
        then come first, in rerank order); freshness and the named year added; at most
        ``page_passages`` of a page before the pages not yet shown; in a look-up, no dense
        guess before a passage holding a rare identifier; the first ``keep`` kept if they reach
        ``min_score``.
        """
        terms = self.sparse.query_terms(query)  # None for SPLADE, which expands the query
        config = self._for_query(query, terms, fusion or self.settings.retrieval)
        timings = {} if timings is None else timings
        with _timed(timings, "fuse"):
            candidates = fuse(nearest, config)
            if config.page_weight:
                candidates = _with_page_context(candidates, config.page_weight)
        depth = max(config.rerank_candidates, keep)
        if rerank and self.reranker is not None and candidates:
            pool = candidates[:depth]
            with _timed(timings, "rerank"):
                scores = self.reranker.score(query, [candidate.text for candidate in pool])
            for candidate, score in zip(pool, scores, strict=True):
                candidate.rerank_score = float(score)
            candidates = sorted(pool, key=lambda candidate: -candidate.score) + candidates[depth:]
        else:
            depth = 0  # nothing reranked: one scale for all
        if config.freshness_half_life_days is not None:
            candidates = _freshened(
                candidates, config.freshness_half_life_days, config.freshness_weight, reranked=depth
            )
        if config.named_year_weight and (years := _years_in(query)):
            candidates = _of_named_years(candidates, years, config.named_year_weight, depth)
        if config.page_passages is not None:
            candidates = _diversified(candidates, config.page_passages)
        if config.identifier_documents and _looks_up(query, terms):
            candidates = _identifiers_before_dense_guesses(
                candidates, query, nearest.sparse, config.identifier_documents
            )
        passages = [
            candidate
            for candidate in candidates[:keep]
            if config.min_score is None or candidate.score >= config.min_score
        ]
        return candidates, passages

    def _for_query(
        self, query: str, terms: int | None, config: RetrievalSettings
    ) -> RetrievalSettings:
        """``config``, with the dense weight lowered when the dense model does not know the
        query's language (an English model asked in Chinese ranks close to at random), and the
        keyword weight lowered for a question of more than ``sparse_query_terms`` keyword
        ``terms``."""
        weights: dict[str, float] = {}
        if self._dense_languages is not None and (
            detect_language(query) not in self._dense_languages
        ):
            weights["dense_weight"] = config.foreign_dense_weight
        if config.sparse_query_terms is not None and terms and terms > config.sparse_query_terms:
            weights["sparse_weight"] = config.sparse_weight * config.sparse_query_terms / terms
        return config.model_copy(update=weights) if weights else config


_LOOKUP_TERMS = 4  # a query of at most this many keyword terms is a look-up (_looks_up)


def _looks_up(query: str, terms: int | None) -> bool:
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


def _identifiers_before_dense_guesses(
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


def _with_page_context(candidates: list[Candidate], weight: float) -> list[Candidate]:
    """The candidates with their page scores, ordered again: a passage's page is where it
    starts, and what the other passages found there scored adds to it (a statement's rows and
    its title, each matched a little, lift the whole page)."""
    pages: dict[tuple[str, int], float] = {}
    for candidate in candidates:
        if (page := _page_of(candidate)) is not None:
            pages[page] = pages.get(page, 0.0) + candidate.fused_score
    for candidate in candidates:
        if (page := _page_of(candidate)) is not None:
            candidate.page_score = weight * (pages[page] - candidate.fused_score)
    return sorted(candidates, key=lambda candidate: -candidate.score)


def _diversified(candidates: list[Candidate], per_page: int) -> list[Candidate]:
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


def _years_in(*texts: str) -> set[int]:
    return {int(year) for text in texts for year in _YEAR.findall(text)}


def _file_name(payload: dict[str, Any]) -> str:
    return Path(payload.get("file_path") or "").name


def document_date(payload: dict[str, Any]) -> float | None:
    """When a passage's document is dated, in seconds since the epoch: the end of the latest
    year its title or file name names (a report's period), else its file's modification
    time."""
    if years := _years_in(payload.get("title") or "", _file_name(payload)):
        return datetime(max(years), 12, 31, tzinfo=UTC).timestamp()
    return payload.get("mtime")


def _freshened(
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


def _of_named_years(
    candidates: list[Candidate], years: set[int], weight: float, reranked: int
) -> list[Candidate]:
    """The candidates with their named year scores, ordered again: ``weight`` for those whose
    document's file name names one of ``years``, the years the query names. The file name, not
    the title: a file is named by its period (``PEPSICO_2022_10K.pdf``), a title often by its
    topic (an article on the 2008 Olympics)."""
    for candidate in candidates:
        named = _years_in(_file_name(candidate.payload))
        candidate.named_year_score = weight if years & named else 0.0
    return _reordered(candidates, reranked)


def _reordered(candidates: list[Candidate], reranked: int) -> list[Candidate]:
    """Each part (the reranked first ``reranked``, then the rest, whose scores are on another
    scale) ordered again by score."""

    def ordered(part: list[Candidate]) -> list[Candidate]:
        return sorted(part, key=lambda candidate: -candidate.score)

    return ordered(candidates[:reranked]) + ordered(candidates[reranked:])


def _normalised(query: str) -> str:
    text = " ".join(query.split())
    if not text:
        raise QueryError("the query is empty")
    return text


@contextmanager
def _timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[stage] = round((time.perf_counter() - started) * 1000, 3)


@contextmanager
def live_index(
    settings: Settings, *, wait_seconds: float = 30.0
) -> Iterator[tuple[Settings, SearchableStore]]:
    """The live collection, searchable for committed versions only, and settings that name the
    models it was built with (they differ from the settings' own while a collection for new
    models is being built). The store is closed when the block ends."""
    from rag_pipeline.store import open_vector_store

    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        if live is None:
            raise QueryError(
                f"nothing is indexed yet under {settings.home}: run `rag-pipeline index`"
            )
        store = open_vector_store(settings, live.name, wait_seconds=wait_seconds)
        try:
            committed = CommittedOnly(store, catalog, live.name)
            yield settings.with_vector_models(live.models), OnlineOnly(committed, catalog)
        finally:
            store.close()


def search(
    settings: Settings,
    query: str,
    *,
    top_k: int | None = None,
    query_filter: QueryFilter | None = None,
) -> Retrieval:
    """One retrieval against the index itself (the CLI's ``query``)."""
    from serving.rerank import load_reranker

    with live_index(settings) as (live_settings, store):
        retriever = Retriever(live_settings, store, load_reranker(live_settings))
        return retriever.retrieve(query, query_filter, top_k=top_k)
