"""Stores searched through the catalog: for online documents only, for committed versions only."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

import numpy as np

from rag_pipeline import ids
from rag_pipeline.catalog import Catalog
from rag_pipeline.store import SearchableStore
from rag_pipeline.store.schema import Hit, NearestHits, QueryFilter


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
        multilingual: np.ndarray | None = None,
    ) -> NearestHits:
        return self.store.nearest(
            dense,
            sparse,
            limit=limit,
            query_filter=self._online(query_filter),
            image=image,
            multilingual=multilingual,
        )

    def nearest_pictures(
        self, image: np.ndarray, *, limit: int, query_filter: QueryFilter | None = None
    ) -> list[Hit]:
        return self.store.nearest_pictures(
            image, limit=limit, query_filter=self._online(query_filter)
        )

    def page_keyword_scores(
        self, sparse: tuple[np.ndarray, np.ndarray], point_ids: Collection[str]
    ) -> list[Hit]:
        # the candidates of a search through this view: online already
        return self.store.page_keyword_scores(sparse, point_ids)

    def holds_multilingual(self) -> bool:
        return self.store.holds_multilingual()

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
        multilingual: np.ndarray | None = None,
    ) -> NearestHits:
        found = self.store.nearest(
            dense,
            sparse,
            limit=limit,
            query_filter=query_filter,
            image=image,
            multilingual=multilingual,
        )
        rankings = [kind.name for kind in dataclasses.fields(found)]
        live = self._live([hit for kind in rankings for hit in getattr(found, kind)])
        return NearestHits(**{kind: self._kept(getattr(found, kind), live) for kind in rankings})

    def nearest_pictures(
        self, image: np.ndarray, *, limit: int, query_filter: QueryFilter | None = None
    ) -> list[Hit]:
        found = self.store.nearest_pictures(image, limit=limit, query_filter=query_filter)
        return self._kept(found, self._live(found))

    def page_keyword_scores(
        self, sparse: tuple[np.ndarray, np.ndarray], point_ids: Collection[str]
    ) -> list[Hit]:
        found = self.store.page_keyword_scores(sparse, point_ids)
        return self._kept(found, self._live(found))

    def holds_multilingual(self) -> bool:
        return self.store.holds_multilingual()

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
