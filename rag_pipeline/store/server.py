"""A Qdrant server or cluster through qdrant-client: how the pipeline scales out.

qdrant-client's local mode speaks the same API without a server (``store.client_path``), which is
how the tests exercise this backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from rag_pipeline.config import StoreSettings
from rag_pipeline.store import StoreError
from rag_pipeline.store.schema import (
    DENSE_VECTOR,
    IMAGE_VECTOR,
    INDEXED_FIELDS,
    RANGE_FIELDS,
    SPARSE_VECTOR,
    Hit,
    IndexPoint,
    NearestHits,
    QueryFilter,
)

if TYPE_CHECKING:
    from qdrant_client import QdrantClient, models

_UPSERT_BATCH = 256
_SCROLL_PAGE = 2048


class QdrantServerStore:
    def __init__(self, client: QdrantClient, collection: str) -> None:
        self.client = client
        self.collection = collection
        self._searches_images: bool | None = None  # see _has_image_vectors

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

    def ensure_collection(self, dense_dim: int, image_dim: int | None = None) -> None:
        from qdrant_client import models

        size, image_size = self.dense_size(), self.image_size()
        if (size, image_size) == (dense_dim, image_dim):
            return
        if size is not None:
            raise StoreError(
                f"the Qdrant collection {self.collection!r} holds {size}-d text and "
                f"{image_size or 'no'} image vectors but the models give {dense_dim}-d text and "
                f"{image_dim or 'no'} image vectors"
            )
        vectors = {
            DENSE_VECTOR: models.VectorParams(size=dense_dim, distance=models.Distance.COSINE)
        }
        if image_dim:
            vectors[IMAGE_VECTOR] = models.VectorParams(
                size=image_dim, distance=models.Distance.COSINE
            )
        self.client.create_collection(
            self.collection,
            vectors_config=vectors,
            sparse_vectors_config={
                SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)
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
        if not self._exists():
            return None
        vectors = self.client.get_collection(self.collection).config.params.vectors
        return vectors[DENSE_VECTOR].size if isinstance(vectors, dict) else None

    def image_size(self) -> int | None:
        if not self._exists():
            return None
        vectors = self.client.get_collection(self.collection).config.params.vectors
        image = vectors.get(IMAGE_VECTOR) if isinstance(vectors, dict) else None
        return image.size if image else None

    def _has_image_vectors(self) -> bool:
        """Whether the collection has image vectors, asked once: a query need not ask the server
        each time, and an existing collection's layout does not change (ensure_collection asks
        for a new collection instead)."""
        if self._searches_images is None:
            size = self.image_size()
            if size is None and not self._exists():
                return False  # no collection yet: ask again next time
            self._searches_images = size is not None
        return self._searches_images

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        from qdrant_client import models

        for start in range(0, len(points), _UPSERT_BATCH):
            batch = [
                models.PointStruct(id=point.point_id, vector=_vectors(point), payload=point.payload)
                for point in points[start : start + _UPSERT_BATCH]
            ]
            self.client.upsert(self.collection, batch, wait=True)

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

    def point_owners(self) -> dict[str, tuple[str, str]]:
        owners: dict[str, tuple[str, str]] = {}
        if not self._exists():
            return owners
        offset = None
        while True:
            records, offset = self.client.scroll(
                self.collection,
                limit=_SCROLL_PAGE,
                offset=offset,
                with_payload=["doc_id", "version"],
                with_vectors=False,
            )
            for record in records:
                owners[str(record.id)] = (record.payload["doc_id"], record.payload["version"])
            if offset is None:
                return owners

    def nearest(
        self,
        dense: np.ndarray,
        sparse: tuple[np.ndarray, np.ndarray],
        *,
        limit: int,
        query_filter: QueryFilter | None = None,
        image: np.ndarray | None = None,
    ) -> NearestHits:
        from qdrant_client import models
        from qdrant_client.http.exceptions import UnexpectedResponse

        selection = _filter(query_filter)
        indices, values = sparse
        searches: list[tuple[object, str]] = [
            (dense.tolist(), DENSE_VECTOR),
            (models.SparseVector(indices=indices.tolist(), values=values.tolist()), SPARSE_VECTOR),
        ]
        if image is not None and self._has_image_vectors():
            searches.append((image.tolist(), IMAGE_VECTOR))
        try:
            found = self.client.query_batch_points(
                self.collection,
                [
                    models.QueryRequest(
                        query=query, using=using, limit=limit, filter=selection, with_payload=True
                    )
                    for query, using in searches
                ],
            )
        except (UnexpectedResponse, ValueError) as error:
            # Asked after the fact rather than before every query: one request per question.
            if _is_missing_collection(error):
                return NearestHits([], [])
            raise
        hits = [
            [Hit(str(p.id), p.score, p.payload or {}) for p in response.points]
            for response in found
        ]
        return NearestHits(*hits)

    def nearest_pictures(
        self, image: np.ndarray, *, limit: int, query_filter: QueryFilter | None = None
    ) -> list[Hit]:
        if not self._has_image_vectors():
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
