"""The vector store: one small interface; an embedded engine by default, a Qdrant server by URL.

Built on it: chunks as points from the embedding cache (``points.py``), stores searched through
the catalog (``catalog_views.py``), and what the chat page searches, the store itself or a
replica of it (``replica.py``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Iterable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Protocol

import numpy as np

from rag_pipeline.config import Settings
from rag_pipeline.store.schema import (
    SECTION_SEPARATOR,
    DocumentFacts,
    Hit,
    IndexPoint,
    NearestHits,
    QueryFilter,
    VectorSizes,
    is_picture,
    payload_pages,
)

__all__ = [
    "SECTION_SEPARATOR",
    "CommittedOnly",
    "DocumentFacts",
    "EmbeddedReplica",
    "Hit",
    "IndexPoint",
    "NearestHits",
    "OnlineOnly",
    "QueryFilter",
    "RefreshLoop",
    "RefreshReport",
    "SearchableStore",
    "ServingStore",
    "StoreBusyError",
    "StoreError",
    "VectorModels",
    "VectorSizes",
    "VectorStore",
    "drop_collection",
    "embedded_files_state",
    "embedded_path",
    "is_picture",
    "open_serving_store",
    "open_vector_store",
    "page_chunks",
    "page_key",
    "passed_verification_record",
    "payload_pages",
    "points_from_cache",
    "uses_server",
    "vector_sizes",
]


class StoreError(Exception):
    """The vector store cannot do what was asked; the message says why and what to do."""


class StoreBusyError(StoreError):
    """Another process holds the embedded store open (only one may at a time)."""


class SearchableStore(Protocol):
    """What retrieval needs of a store: the index itself, or the chat page's replica of it."""

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
        """The ``limit`` nearest points by the dense, the sparse and the image vector (when
        ``image``, a CLIP text-tower vector, is given and pictures have vectors), and the
        multilingual one (when ``multilingual``, that model's query vector, is given and the
        collection has such vectors), in one search.

        Fusion happens in ``serving.retrieval``, where each ranking is also kept for traces and
        evaluation.
        """

    def nearest_pictures(
        self, image: np.ndarray, *, limit: int, query_filter: QueryFilter | None = None
    ) -> list[Hit]:
        """The ``limit`` pictures nearest to a CLIP vector (search by image)."""

    def page_keyword_scores(
        self, sparse: tuple[np.ndarray, np.ndarray], point_ids: Collection[str]
    ) -> list[Hit]:
        """The points ``point_ids`` (a search's candidates) that lie on a page with a keyword
        vector, scored by how well that whole page matches ``sparse`` (BM25), best first; none
        when the collection has no page vectors."""

    def holds_multilingual(self) -> bool:
        """Whether any point has a multilingual vector (text in a language the dense model
        does not understand): only then is a question embedded by that model too."""


class VectorStore(SearchableStore, Protocol):
    def ensure_collection(
        self,
        dense_dim: int,
        image_dim: int | None = None,
        multilingual_dim: int | None = None,
        *,
        page_keywords: bool = False,
    ) -> None:
        """Create the collection if missing; fail clearly if it exists with other vector sizes.

        ``image_dim``: the size of the pictures' CLIP vectors, None when there are none;
        ``multilingual_dim``: that of the multilingual model's, None when there are none;
        ``page_keywords``: whether text chunks carry their page's keyword vector.
        """

    def upsert(self, points: Sequence[IndexPoint]) -> None: ...

    def flush(self) -> None:
        """Make the writes so far durable: the catalog names a version live only after this."""

    def delete_document(self, doc_id: str, keep_version: str | None = None) -> None:
        """Delete a document's points, all of them or all but those of ``keep_version``."""

    def count(self, doc_id: str | None = None) -> int: ...

    def point_ids(self) -> set[str]:
        """Every point's id, read without payloads (a few times quicker than the owners)."""

    def owners_of(self, point_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        """point id → (doc_id, version) of those of ``point_ids`` that exist."""

    def dense_size(self) -> int | None:
        """The size of the dense text vectors, or None when there is no collection yet."""

    def image_size(self) -> int | None:
        """The size of the image vectors, or None when the collection has none."""

    def multilingual_size(self) -> int | None:
        """The size of the multilingual model's vectors, or None when the collection has none."""

    def drop(self) -> None:
        """Delete the collection with all its points."""

    def close(self) -> None: ...


def open_vector_store(
    settings: Settings, collection: str, *, wait_seconds: float = 600.0
) -> VectorStore:
    """``collection`` on the Qdrant server when ``store.url`` is set, else in the embedded
    engine under the home.

    The embedded engine admits one process at a time: wait up to ``wait_seconds`` for it (a
    process keeping it open between uses lets go when asked: ``keeping.py``).
    """
    if uses_server(settings):
        from rag_pipeline.store.server import QdrantServerStore

        return QdrantServerStore.from_settings(settings.store, collection)
    from rag_pipeline.store.edge import EdgeStore
    from rag_pipeline.store.keeping import active_keeper

    path = embedded_path(settings, collection)
    keeper = active_keeper()
    if keeper is not None:
        return keeper.open(path, wait_seconds=wait_seconds)
    return EdgeStore(path, wait_seconds=wait_seconds)


def uses_server(settings: Settings) -> bool:
    """Whether the store is a Qdrant server (or qdrant-client's stand-in for one)."""
    return bool(settings.store.url or settings.store.client_path)


def embedded_path(settings: Settings, collection: str) -> Path:
    return settings.home / "qdrant" / collection


def passed_verification_record(settings: Settings, collection: str) -> Path:
    """Where the state of an embedded collection that last passed verification is kept."""
    return embedded_path(settings, collection).with_name(f".{collection}.passed")


def embedded_files_state(settings: Settings, collection: str) -> str | None:
    """A hash of the names, sizes and times of the embedded collection's files: the same while
    nothing writes them. None for a server, whose files are out of sight."""
    if uses_server(settings):
        return None
    folder = embedded_path(settings, collection)
    entries = []
    # os.walk passes over a folder the engine removes meanwhile (its atomic writes' temporary
    # folders), where Path.rglob raised.
    for root, _, files in os.walk(folder):
        for name in files:
            path = Path(root) / name
            with suppress(FileNotFoundError):  # a file the engine replaced meanwhile
                stat = path.stat()
                entries.append(f"{path.relative_to(folder)}\0{stat.st_size}\0{stat.st_mtime_ns}\n")
    digest = hashlib.sha256()
    for entry in sorted(entries):
        digest.update(entry.encode())
    return digest.hexdigest()


def drop_collection(settings: Settings, collection: str) -> None:
    """Delete a collection and its points (a retired one, once another has taken over)."""
    store = open_vector_store(settings, collection)
    try:
        store.drop()
    finally:
        store.close()
    passed_verification_record(settings, collection).unlink(missing_ok=True)


# Last: these modules build on the definitions above and import them from this package.
from rag_pipeline.store.catalog_views import CommittedOnly, OnlineOnly  # noqa: E402
from rag_pipeline.store.points import (  # noqa: E402
    VectorModels,
    page_chunks,
    page_key,
    points_from_cache,
    vector_sizes,
)
from rag_pipeline.store.replica import (  # noqa: E402
    EmbeddedReplica,
    RefreshLoop,
    RefreshReport,
    ServingStore,
    open_serving_store,
)
