"""A Qdrant server or cluster through qdrant-client: how the pipeline scales out.

qdrant-client's local mode speaks the same API without a server (``store.client_path``), which is
how the tests exercise this backend.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from rag_pipeline.batching import batched
from rag_pipeline.config import StoreSettings
from rag_pipeline.store import StoreError
from rag_pipeline.store.schema import (
    DENSE_VECTOR,
    IMAGE_VECTOR,
    INDEXED_FIELDS,
    MULTILINGUAL_VECTOR,
    PAGE_SPARSE_VECTOR,
    RANGE_FIELDS,
    SPARSE_VECTOR,
    Hit,
    IndexPoint,
    NearestHits,
    QueryFilter,
    VectorSizes,
)

if TYPE_CHECKING:
    from qdrant_client import QdrantClient, models

_UPSERT_BATCH = 256
_SCROLL_PAGE = 2048
_ASK_AGAIN_SECONDS = 10.0  # how old a "no multilingual vectors here" may grow


class QdrantServerStore:
    def __init__(self, client: QdrantClient, collection: str) -> None:
        self.client = client
        self.collection = collection
        self._declared: dict[str, bool] = {}  # see _declares
        self._holds_multilingual = False
        self._multilingual_asked: float | None = None  # when a "no" was last asked for

    @classmethod
    def from_settings(cls, settings: StoreSettings, collection: str) -> QdrantServerStore:
        from qdrant_client import QdrantClient

        if settings.url:
            client = QdrantClient(url=settings.url, api_key=settings.api_key, timeout=60)
        else:
            client = QdrantClient(path=str(settings.client_path))
        return cls(client, collection)

    def _exists(self) -> bool:
        return self.client.collection_exists(self.collection)

    def ensure_collection(
        self,
        dense_dim: int,
        image_dim: int | None = None,
        multilingual_dim: int | None = None,
        *,
        page_keywords: bool = False,
    ) -> None:
        from qdrant_client import models

        held = VectorSizes(
            self.dense_size(), self.image_size(), self._named_size(MULTILINGUAL_VECTOR)
        )
        wanted = VectorSizes(dense_dim, image_dim, multilingual_dim)
        if held == wanted:
            return
        if held.dense is not None:
            raise StoreError(
                f"the Qdrant collection {self.collection!r} holds {held} but the models give "
                f"{wanted}"
            )
        sizes = {
            DENSE_VECTOR: dense_dim,
            IMAGE_VECTOR: image_dim,
            MULTILINGUAL_VECTOR: multilingual_dim,
        }
        vectors = {
            name: models.VectorParams(size=size, distance=models.Distance.COSINE)
            for name, size in sizes.items()
            if size
        }
        self.client.create_collection(
            self.collection,
            vectors_config=vectors,
            sparse_vectors_config={
                name: models.SparseVectorParams(modifier=models.Modifier.IDF)
                for name in (SPARSE_VECTOR, PAGE_SPARSE_VECTOR)
                if name == SPARSE_VECTOR or page_keywords
            },
        )
        for field in INDEXED_FIELDS:
            self.client.create_payload_index(
                self.collection, field, field_schema=models.PayloadSchemaType.KEYWORD
            )
        for field in RANGE_FIELDS:
            self.client.create_payload_index(
                self.collection, field, field_schema=models.PayloadSchemaType.FLOAT
            )

    def dense_size(self) -> int | None:
        return self._named_size(DENSE_VECTOR)

    def image_size(self) -> int | None:
        return self._named_size(IMAGE_VECTOR)

    def multilingual_size(self) -> int | None:
        return self._named_size(MULTILINGUAL_VECTOR)

    def _named_size(self, name: str) -> int | None:
        if not self._exists():
            return None
        vectors = self.client.get_collection(self.collection).config.params.vectors
        found = vectors.get(name) if isinstance(vectors, dict) else None
        return found.size if found else None

    def _declares(self, name: str) -> bool:
        """Whether the collection has vectors of that name, asked once for each: a query need
        not ask the server each time, and an existing collection's layout does not change
        (ensure_collection asks for a new collection instead)."""
        if name not in self._declared:
            if not self._exists():
                return False  # no collection yet: ask again next time
            params = self.client.get_collection(self.collection).config.params
            self._declared[name] = name in (params.sparse_vectors or {}) or (
                self._named_size(name) is not None
            )
        return self._declared[name]

    def holds_multilingual(self) -> bool:
        from qdrant_client import models

        # Once true, kept: other processes write a server's collection, and a query vector too
        # many only finds nothing. A "no" is asked again after this store's own writes, or once
        # it is a while old (others' writes): not a count on the server at every question.
        stale = (
            self._multilingual_asked is None
            or time.monotonic() - self._multilingual_asked > _ASK_AGAIN_SECONDS
        )
        if not self._holds_multilingual and stale and self._declares(MULTILINGUAL_VECTOR):
            has = models.Filter(must=[models.HasVectorCondition(has_vector=MULTILINGUAL_VECTOR)])
            found = self.client.count(self.collection, count_filter=has, exact=True).count
            self._holds_multilingual = found > 0
            self._multilingual_asked = time.monotonic()
        return self._holds_multilingual

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        from qdrant_client import models

        for start in range(0, len(points), _UPSERT_BATCH):
            batch = [
                models.PointStruct(id=point.point_id, vector=_vectors(point), payload=point.payload)
                for point in points[start : start + _UPSERT_BATCH]
            ]
            self.client.upsert(self.collection, batch, wait=True)
        self._multilingual_asked = None

    def flush(self) -> None:
        """Nothing to do: every write waits for the server to have applied it (``wait=True``)."""

    def delete_document(self, doc_id: str, keep_version: str | None = None) -> None:
        from qdrant_client import models

        if not self._exists():
            return
        keep = (
            [models.FieldCondition(key="version", match=models.MatchValue(value=keep_version))]
            if keep_version
            else None
        )
        selection = models.Filter(
            must=[models.FieldCondition(key="doc_id", match=models.MatchValue(value=doc_id))],
            must_not=keep,
        )
        self.client.delete(self.collection, models.FilterSelector(filter=selection), wait=True)

    def count(self, doc_id: str | None = None) -> int:
        from qdrant_client import models

        if not self._exists():
            return 0
        selection = (
            models.Filter(
                must=[models.FieldCondition(key="doc_id", match=models.MatchValue(value=doc_id))]
            )
            if doc_id
            else None
        )
        return self.client.count(self.collection, count_filter=selection, exact=True).count

    def point_ids(self) -> set[str]:
        found: set[str] = set()
        offset = None
        while self._exists():
            records, offset = self.client.scroll(
                self.collection,
                limit=_SCROLL_PAGE,
                offset=offset,
                with_payload=False,
                with_vectors=False,
            )
            found.update(str(record.id) for record in records)
            if offset is None:
                break
        return found

    def owners_of(self, point_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        owners: dict[str, tuple[str, str]] = {}
        for batch in batched(list(point_ids), _SCROLL_PAGE):
            records = self.client.retrieve(
                self.collection, list(batch), with_payload=["doc_id", "version"]
            )
            for record in records:
                owners[str(record.id)] = (record.payload["doc_id"], record.payload["version"])
        return owners

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
        from qdrant_client import models
        from qdrant_client.http.exceptions import UnexpectedResponse

        selection = _filter(query_filter)
        indices, values = sparse
        searches: dict[str, tuple[object, str]] = {
            "dense": (dense.tolist(), DENSE_VECTOR),
            "sparse": (
                models.SparseVector(indices=indices.tolist(), values=values.tolist()),
                SPARSE_VECTOR,
            ),
        }
        if image is not None and self._declares(IMAGE_VECTOR):
            searches["image"] = (image.tolist(), IMAGE_VECTOR)
        if multilingual is not None and self._declares(MULTILINGUAL_VECTOR):
            searches["multilingual"] = (multilingual.tolist(), MULTILINGUAL_VECTOR)
        try:
            found = self.client.query_batch_points(
                self.collection,
                [
                    models.QueryRequest(
                        query=query, using=using, limit=limit, filter=selection, with_payload=True
                    )
                    for query, using in searches.values()
                ],
            )
        except (UnexpectedResponse, ValueError) as error:
            # Asked after the fact rather than before every query: one request per question.
            if _is_missing_collection(error):
                return NearestHits([], [])
            raise
        return NearestHits(
            **{
                ranking: [Hit(str(p.id), p.score, p.payload or {}) for p in response.points]
                for ranking, response in zip(searches, found, strict=True)
            }
        )

    def page_keyword_scores(
        self, sparse: tuple[np.ndarray, np.ndarray], point_ids: Collection[str]
    ) -> list[Hit]:
        from qdrant_client import models

        if not point_ids or not self._declares(PAGE_SPARSE_VECTOR):
            return []
        indices, values = sparse
        found = self.client.query_points(
            self.collection,
            query=models.SparseVector(indices=indices.tolist(), values=values.tolist()),
            using=PAGE_SPARSE_VECTOR,
            limit=len(point_ids),
            query_filter=models.Filter(must=[models.HasIdCondition(has_id=list(point_ids))]),
            with_payload=True,
        )
        return [Hit(str(point.id), point.score, point.payload or {}) for point in found.points]

    def nearest_pictures(
        self, image: np.ndarray, *, limit: int, query_filter: QueryFilter | None = None
    ) -> list[Hit]:
        if not self._declares(IMAGE_VECTOR):
            return []
        found = self.client.query_points(
            self.collection,
            query=image.tolist(),
            using=IMAGE_VECTOR,
            limit=limit,
            query_filter=_filter(query_filter),
            with_payload=True,
        )
        return [Hit(str(point.id), point.score, point.payload or {}) for point in found.points]

    def drop(self) -> None:
        if self._exists():
            self.client.delete_collection(self.collection)

    def close(self) -> None:
        self.client.close()


def _is_missing_collection(error: Exception) -> bool:
    """Whether a failed call failed for want of the collection (none is indexed yet)."""
    from qdrant_client.http.exceptions import UnexpectedResponse

    if isinstance(error, UnexpectedResponse):
        return error.status_code == 404
    return "not found" in str(error)  # qdrant-client's local mode raises a ValueError


def _vectors(point: IndexPoint) -> dict[str, object]:
    from qdrant_client import models

    vectors: dict[str, object] = {}
    if point.dense is not None:
        vectors[DENSE_VECTOR] = point.dense.tolist()
    if point.sparse is not None:
        indices, values = point.sparse
        vectors[SPARSE_VECTOR] = models.SparseVector(
            indices=indices.tolist(), values=values.tolist()
        )
    if point.image is not None:
        vectors[IMAGE_VECTOR] = point.image.tolist()
    if point.multilingual is not None:
        vectors[MULTILINGUAL_VECTOR] = point.multilingual.tolist()
    if point.page_sparse is not None:
        indices, values = point.page_sparse
        vectors[PAGE_SPARSE_VECTOR] = models.SparseVector(
            indices=indices.tolist(), values=values.tolist()
        )
    return vectors


def _filter(query_filter: QueryFilter | None) -> models.Filter | None:
    from qdrant_client import models

    if query_filter is None or query_filter.is_empty():
        return None
    must: list[models.Condition] = [
        models.FieldCondition(key=key, match=models.MatchAny(any=list(values)))
        for key, values in query_filter.conditions().items()
    ]
    if (dates := query_filter.mtime_range()) is not None:
        must.append(
            models.FieldCondition(key="mtime", range=models.Range(gte=dates[0], lte=dates[1]))
        )
    must_not: list[models.Condition] = []
    if query_filter.offline_doc_ids:
        offline = models.MatchAny(any=list(query_filter.offline_doc_ids))
        must_not.append(models.FieldCondition(key="doc_id", match=offline))
    if query_filter.offline_point_ids:
        must_not.append(models.HasIdCondition(has_id=list(query_filter.offline_point_ids)))
    return models.Filter(must=must, must_not=must_not or None)
