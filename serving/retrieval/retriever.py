"""The retriever: a query embedded, searched, fused, boosted, reranked and cut; and the CLI's
one search against the index itself."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import TYPE_CHECKING

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import RetrievalSettings, Settings
from rag_pipeline.embedding import dense_model_languages
from rag_pipeline.language import detect_language
from rag_pipeline.store import (
    CommittedOnly,
    Hit,
    NearestHits,
    OnlineOnly,
    QueryFilter,
    SearchableStore,
)
from serving.retrieval.boosts import (
    diversified,
    freshened,
    identifiers_before_dense_guesses,
    looks_up,
    of_named_years,
    with_page_context,
    with_page_keywords,
    years_in,
)
from serving.retrieval.candidates import Candidate, QueryError, Retrieval
from serving.retrieval.encoders import query_encoders
from serving.retrieval.fusion import fuse
from serving.retrieval.named_parts import (
    NamedParts,
    leading_documents,
    look_up,
    named_parts,
    with_named_passages,
)

if TYPE_CHECKING:
    from PIL.Image import Image

    from serving.rerank import Reranker


class Retriever:
    """Embeds a query, searches, fuses and reranks; models are loaded once and reused."""

    def __init__(
        self, settings: Settings, store: SearchableStore, reranker: Reranker | None = None
    ) -> None:
        self.settings = settings
        self.store = store
        self.reranker = reranker
        self.encoders = query_encoders(settings)
        self.dense, self.sparse, self.clip, self.multilingual = (
            self.encoders.dense,
            self.encoders.sparse,
            self.encoders.clip,
            self.encoders.multilingual,
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
        """The query embedded by each model, and the ``limit`` nearest points by each (by the
        multilingual model only where some passages have its vectors)."""
        text = _normalised(query)
        timings = {} if timings is None else timings
        with _timed(timings, "embed"):
            dense = self.dense.embed_query(text)
            sparse = self.sparse.embed_query(text)
            image = self.clip.embed_query(text) if self.clip else None
            multilingual = (
                self.multilingual.embed_query(text)
                if self.multilingual is not None and self.store.holds_multilingual()
                else None
            )

        def nearest_where(where: QueryFilter | None, limit: int) -> NearestHits:
            return self.store.nearest(
                dense,
                (sparse.indices, sparse.values),
                limit=limit,
                query_filter=where,
                image=image,
                multilingual=multilingual,
            )

        with _timed(timings, "search"):
            nearest = nearest_where(query_filter, limit)
            if self.settings.retrieval.page_keyword_weight:
                nearest.pages = self.page_keywords(text, nearest)
        if parts := named_parts(text):
            with _timed(timings, "named parts"):
                nearest.named = self._named(parts, text, nearest, query_filter, nearest_where)
        return nearest

    def page_keywords(self, query: str, nearest: NearestHits) -> list[Hit]:
        """The points ``nearest`` found, scored by how well their whole pages match the query's
        keywords: the candidates' pages and no others, so that the best of them counts as the
        full score (over the whole index, a filing's many pages that name the company and the
        year would crowd out those the passages found)."""
        found = (*nearest.dense, *nearest.sparse, *nearest.multilingual)
        keywords = self.sparse.embed_query(_normalised(query))
        return self.store.page_keyword_scores(
            (keywords.indices, keywords.values), {hit.point_id for hit in found}
        )

    def _named(
        self,
        parts: NamedParts,
        query: str,
        nearest: NearestHits,
        query_filter: QueryFilter | None,
        nearest_where: Callable[[QueryFilter, int], NearestHits],
    ) -> list[Hit]:
        """The passages of the ``parts`` a question names, looked up in the documents the
        page's own search (``prefetch`` hits a ranking, whatever depth this one went to) finds
        first."""
        config, understood = self.settings.retrieval, self.understands(query)

        def fused(where: QueryFilter) -> list[Candidate]:
            return fuse(nearest_where(where, config.prefetch), config, understood=understood)

        cut = {
            field.name: getattr(nearest, field.name)[: config.prefetch] for field in fields(nearest)
        }
        documents = leading_documents(fuse(NearestHits(**cut), config, understood=understood))
        return look_up(parts, documents, query_filter or QueryFilter(), fused)

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

        Fused (by ``fusion``, default the settings'), with page context and page keywords when
        configured; the best ``rerank_candidates`` reranked when a reranker is configured and
        ``rerank`` (they then come first, in rerank order); freshness and the named year added;
        at most ``page_passages`` of a page before the pages not yet shown; in a look-up, no
        dense guess before a passage holding a rare identifier; the first ``keep`` kept if they
        reach ``min_score``; before all, the passages of the parts the question names (see
        ``named_parts``).
        """
        terms = self.sparse.query_terms(query)  # None for SPLADE, which expands the query
        config = self._for_query(terms, fusion or self.settings.retrieval)
        timings = {} if timings is None else timings
        with _timed(timings, "fuse"):
            candidates = fuse(nearest, config, understood=self.understands(query))
            if config.page_weight:
                candidates = with_page_context(candidates, config.page_weight)
            if config.page_keyword_weight and nearest.pages:
                candidates = with_page_keywords(
                    candidates, nearest.pages, config.page_keyword_weight
                )
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
            candidates = freshened(
                candidates, config.freshness_half_life_days, config.freshness_weight, reranked=depth
            )
        if config.named_year_weight and (years := years_in(query)):
            candidates = of_named_years(candidates, years, config.named_year_weight, depth)
        candidates = with_named_passages(candidates, nearest.named)
        if config.page_passages is not None:
            candidates = diversified(candidates, config.page_passages)
        if config.identifier_documents and looks_up(query, terms):
            candidates = identifiers_before_dense_guesses(
                candidates, query, nearest.sparse, config.identifier_documents
            )
        passages = [
            candidate
            for candidate in candidates[:keep]
            if config.min_score is None or candidate.score >= config.min_score
        ]
        return candidates, passages

    def dense_side(self, query: str, nearest: NearestHits) -> list[Hit] | list[Candidate]:
        """What the hybrid's dense side finds, for evaluation: the dense model's ranking, fused
        with the multilingual model's as :meth:`rank` weighs them where there is one."""
        if not nearest.multilingual:
            return nearest.dense
        dense_only = NearestHits(nearest.dense, [], multilingual=nearest.multilingual)
        return fuse(dense_only, self.settings.retrieval, understood=self.understands(query))

    def understands(self, query: str) -> bool:
        """Whether the dense model understands the query's language (an English model asked
        in Chinese ranks close to at random: fusion then leans on the other rankings)."""
        return self._dense_languages is None or detect_language(query) in self._dense_languages

    @staticmethod
    def _for_query(terms: int | None, config: RetrievalSettings) -> RetrievalSettings:
        """``config``, with the keyword weight lowered for a question of more than
        ``sparse_query_terms`` keyword ``terms``."""
        if config.sparse_query_terms is not None and terms and terms > config.sparse_query_terms:
            weight = config.sparse_weight * config.sparse_query_terms / terms
            return config.model_copy(update={"sparse_weight": weight})
        return config


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
