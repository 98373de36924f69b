"""The embedded engine: Qdrant Edge, Qdrant's own in-process shard.

Chosen by measurement over qdrant-client's local mode (``bench/vector_store.py``): at 10k
points a hybrid query takes about a millisecond instead of several hundred, and upserts are
two orders of magnitude faster.

One process at a time may open a shard. Qdrant Edge enforces that itself only half-way: its
``load`` opens and rewrites the shard's segment files before it tries the write-ahead log's lock,
so a second process that opens a shard in use is refused, but only after it has damaged the
shard under its holder (lost and undecodable points; ``test_stores`` pins it). So a shard is
opened only under a lock of our own, taken first; a second process waits for it, or gets
:class:`StoreBusyError`.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_pipeline.batching import batched
from rag_pipeline.files import copy_keeping_holes
from rag_pipeline.locking import FileLock
from rag_pipeline.store import StoreBusyError, StoreError
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
    from qdrant_edge import EdgeConfig, EdgeShard, Filter, SearchParams

    from rag_pipeline.store.keeping import StoreKeeper

logger = logging.getLogger(__name__)

_UPSERT_BATCH = 256
_REOPEN_AFTER_POINTS = 20_000
# Optimized segments are merged up to this size (KB): what one optimization holds in memory.
_MAX_SEGMENT_KB = 64_000
_SCROLL_PAGE = 2048
_ID_SCROLL_PAGE = 10_000  # ids alone: larger pages, fewer calls
_CONFIG_FILE = "edge_config.json"  # written by qdrant_edge itself
_QUANTILE = 0.99  # the int8 copies' range: outliers past it are clipped
# The hits scored again on the full vectors, per hit asked for: what keeps the int8 scan's
# ranking the exact one.
_OVERSAMPLING = 2.0
# How long a replica's copy waits for a shard another process keeps open between its uses.
_HAND_OVER_SECONDS = 3.0


class EdgeStore:
    def __init__(
        self, path: Path, *, wait_seconds: float = 0.0, keeper: StoreKeeper | None = None
    ) -> None:
        """Open the shard at ``path`` if it exists, waiting up to ``wait_seconds`` for another
        process (or another store object) that holds it. With ``keeper``, closing it leaves it
        open for the keeper's next caller (``keeping.py``)."""
        self.path = path
        self.keeper = keeper
        self.is_dropped = False
        self._config: dict[str, Any] | None = None  # the shard's vector layout, read once
        self._written = 0  # points upserted since the shard was opened
        # Whether any point has a multilingual vector: asked once, and again after a write.
        self._holds_multilingual: bool | None = None
        self._lock = _lock_of(path)
        if not acquire_asking(self._lock, path, wait_seconds):
            raise StoreBusyError(
                f"the vector store at {path} is open in another process (an indexing run?); "
                "try again when it has finished"
            )
        try:
            self._shard = self._load() if (path / _CONFIG_FILE).exists() else None
        except BaseException:
            self._lock.release()
            raise

    def replace_with_copy_of(self, source: Path) -> bool:
        """Make this store a copy of the shard at ``source`` (what it held is let go), the copy
        made under that shard's lock: no process writes it meanwhile, a run waits. False, with
        this store as it was, when ``source`` holds no shard or is open elsewhere. Copying the
        files is what makes a large index's copy take minutes, not the hours of writing its
        points again."""
        held = _lock_of(source)
        if not acquire_asking(held, source, _HAND_OVER_SECONDS):
            return False
        copy = self.path.with_name(f".{self.path.name}.copy")
        try:
            if not (source / _CONFIG_FILE).exists():
                return False
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(source, copy, copy_function=copy_keeping_holes)
        except BaseException:
            shutil.rmtree(copy, ignore_errors=True)
            raise
        finally:
            held.release()
        if self._shard is not None:
            self._shard.close()
            self._shard = None
        shutil.rmtree(self.path, ignore_errors=True)
        copy.rename(self.path)
        self._shard, self._config, self._written = self._load(), None, 0
        self._holds_multilingual = None
        return True

    def _load(self) -> EdgeShard:
        from qdrant_edge import EdgeShard

        try:
            return EdgeShard.load(str(self.path))
        except Exception as error:
            raise StoreError(f"cannot open the vector store at {self.path}: {error}") from error

    def ensure_collection(
        self,
        dense_dim: int,
        image_dim: int | None = None,
        multilingual_dim: int | None = None,
        *,
        page_keywords: bool = False,
    ) -> None:
        from qdrant_edge import EdgeShard

        config = _shard_config_for(dense_dim, image_dim, multilingual_dim, page_keywords)
        if self._shard is not None:
            held = (self.dense_size(), self.image_size(), self.multilingual_size())
            if held != (dense_dim, image_dim, multilingual_dim):
                # Never dropped here: another layout is another collection (VectorLayout).
                raise StoreError(
                    f"the vector store at {self.path} holds {VectorSizes(*held)} but the models "
                    f"give {VectorSizes(dense_dim, image_dim, multilingual_dim)}"
                )
            if self._exact_segments() and "quantization_config" not in self._shard_config():
                self._quantize(config)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._shard = EdgeShard.create(str(self.path), config)
        self._map_payload_indexes()

    def _map_payload_indexes(self) -> None:
        """Index the payload fields that searches and deletions filter on, in files mapped
        rather than loaded: a loaded index is read whole each time the shard opens, most of
        what opening a large one costs. A shard whose indexes were loaded (written before) has
        them built again mapped, once."""
        from qdrant_edge import FloatIndexParams, KeywordIndexParams, Memory, UpdateOperation

        wanted = {field: KeywordIndexParams(memory=Memory.Cold) for field in INDEXED_FIELDS}
        wanted |= {field: FloatIndexParams(memory=Memory.Cold) for field in RANGE_FIELDS}
        held = self.shard.info().payload_schema
        for field, params in wanted.items():
            index = held.get(field)
            if index is None or getattr(index.params, "memory", None) != Memory.Cold:
                if index is not None:
                    logger.info("mapping the payload index of %s in %s (once)", field, self.path)
                self.shard.update(UpdateOperation.create_field_index(field, params))

    def _quantize(self, config: EdgeConfig) -> None:
        """Give a shard written before its dense vectors were quantized their int8 copies, in
        place: the engine takes the new layout on load and rewrites each segment with it."""
        from qdrant_edge import EdgeShard

        logger.info("quantizing the dense vectors of %s (once)", self.path)
        self.shard.flush()
        self.shard.close()
        self._shard = EdgeShard.load(str(self.path), config)
        self._shard.optimize()
        self._config = None

    @property
    def shard(self) -> EdgeShard:
        if self._shard is None:
            raise StoreError("the vector store is empty: nothing has been indexed yet")
        return self._shard

    def dense_size(self) -> int | None:
        if self._shard is None:
            return None
        return self._shard_config()["vectors"][DENSE_VECTOR]["size"]

    def image_size(self) -> int | None:
        if self._shard is None:
            return None
        return self._shard_config()["vectors"].get(IMAGE_VECTOR, {}).get("size")

    def multilingual_size(self) -> int | None:
        if self._shard is None:
            return None
        return self._shard_config()["vectors"].get(MULTILINGUAL_VECTOR, {}).get("size")

    def holds_multilingual(self) -> bool:
        from qdrant_edge import CountRequest, Filter, HasVectorCondition

        if self._holds_multilingual is None:
            self._holds_multilingual = bool(self.multilingual_size()) and (
                self.shard.count(
                    CountRequest(
                        exact=True, filter=Filter(must=[HasVectorCondition(MULTILINGUAL_VECTOR)])
                    )
                )
                > 0
            )
        return self._holds_multilingual

    def _shard_config(self) -> dict[str, Any]:
        """The layout qdrant_edge wrote when it created the shard (queries ask it each time)."""
        import json

        if self._config is None:
            self._config = json.loads((self.path / _CONFIG_FILE).read_text())
        return self._config

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        from qdrant_edge import Point, SparseVector, UpdateOperation

        for start in range(0, len(points), _UPSERT_BATCH):
            batch = [
                Point(
                    point.point_id,
                    _vectors(point, SparseVector),
                    point.payload,
                )
                for point in points[start : start + _UPSERT_BATCH]
            ]
            self.shard.update(UpdateOperation.upsert_points(batch))
            self._written += len(batch)
            self._holds_multilingual = None
            if self._written >= _REOPEN_AFTER_POINTS:
                self._reopen()

    def _reopen(self) -> None:
        """Optimize, flush, close and open the shard again (the lock stays held).

        Qdrant Edge keeps every segment file it writes mapped in, and what an optimization
        replaced in memory: a long write (one huge document, a first index) would hold the
        whole index resident. Reopening lets go of them; what searches need comes back from
        the page cache on demand.
        """
        self.optimize()
        self.shard.flush()
        self.shard.close()
        self._shard = self._load()
        self._written = 0

    def flush(self) -> None:
        if self._shard is not None:
            self._shard.flush()

    def optimize(self) -> None:
        """Turn the appendable segment into an optimized one once it is large (Qdrant's
        indexing threshold; below it, this costs nothing): its sparse index then leaves
        memory. Shards created before exact-search segments were configured are left as
        they are: optimizing them would build an HNSW graph of the whole index at once."""
        if self._shard is not None and self._exact_segments():
            self._shard.optimize()

    def _exact_segments(self) -> bool:
        return self._shard_config().get("hnsw_config", {}).get("m") == 0

    def delete_document(self, doc_id: str, keep_version: str | None = None) -> None:
        from qdrant_edge import FieldCondition, Filter, MatchValue, UpdateOperation

        if self._shard is None:
            return
        keep = [FieldCondition("version", match=MatchValue(keep_version))] if keep_version else None
        selection = Filter(must=[FieldCondition("doc_id", match=MatchValue(doc_id))], must_not=keep)
        self._shard.update(UpdateOperation.delete_points_by_filter(selection))
        self._holds_multilingual = None

    def count(self, doc_id: str | None = None) -> int:
        from qdrant_edge import CountRequest, FieldCondition, Filter, MatchValue

        if self._shard is None:
            return 0
        selection = (
            Filter(must=[FieldCondition("doc_id", match=MatchValue(doc_id))]) if doc_id else None
        )
        return self._shard.count(CountRequest(exact=True, filter=selection))

    def point_ids(self) -> set[str]:
        from qdrant_edge import ScrollRequest

        found: set[str] = set()
        offset = None
        while self._shard is not None:
            records, offset = self._shard.scroll(
                ScrollRequest(offset=offset, limit=_ID_SCROLL_PAGE, with_payload=False)
            )
            found.update(str(record.id) for record in records)
            if offset is None:
                break
        return found

    def owners_of(self, point_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        owners: dict[str, tuple[str, str]] = {}
        for batch in batched(list(point_ids), _SCROLL_PAGE):
            if self._shard is None:
                break
            for record in self._shard.retrieve(list(batch), with_payload=True, with_vector=False):
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
        from qdrant_edge import Query, QueryBatchRequest, QueryRequest, SparseVector

        if self._shard is None:
            return NearestHits([], [])
        selection = _edge_filter(query_filter)
        indices, values = sparse
        searches = {
            "dense": Query.Nearest(dense.tolist(), using=DENSE_VECTOR),
            "sparse": Query.Nearest(
                SparseVector(indices.tolist(), values.tolist()), using=SPARSE_VECTOR
            ),
        }
        if image is not None and self.image_size():
            searches["image"] = Query.Nearest(image.tolist(), using=IMAGE_VECTOR)
        if multilingual is not None and self.multilingual_size():
            searches["multilingual"] = Query.Nearest(
                multilingual.tolist(), using=MULTILINGUAL_VECTOR
            )
        rescored = _rescored()
        found = self._shard.query_batch(
            QueryBatchRequest(
                [
                    QueryRequest(
                        limit=limit,
                        query=search,
                        filter=selection,
                        with_payload=True,
                        params=None if ranking == "sparse" else rescored,
                    )
                    for ranking, search in searches.items()
                ]
            )
        )
        return NearestHits(
            **{
                ranking: [Hit(str(p.id), p.score, p.payload or {}) for p in points]
                for ranking, points in zip(searches, found, strict=True)
            }
        )

    def page_keyword_scores(
        self, sparse: tuple[np.ndarray, np.ndarray], point_ids: Collection[str]
    ) -> list[Hit]:
        from qdrant_edge import Filter, HasIdCondition, Query, QueryRequest, SparseVector

        if not point_ids or self._shard is None:
            return []
        if PAGE_SPARSE_VECTOR not in self._shard_config()["sparse_vectors"]:
            return []
        indices, values = sparse
        found = self._shard.query(
            QueryRequest(
                limit=len(point_ids),
                query=Query.Nearest(
                    SparseVector(indices.tolist(), values.tolist()), using=PAGE_SPARSE_VECTOR
                ),
                filter=Filter(must=[HasIdCondition(set(point_ids))]),
                with_payload=True,
            )
        )
        return [Hit(str(point.id), point.score, point.payload or {}) for point in found]

    def nearest_pictures(
        self, image: np.ndarray, *, limit: int, query_filter: QueryFilter | None = None
    ) -> list[Hit]:
        from qdrant_edge import Query, QueryRequest

        if self._shard is None or not self.image_size():
            return []
        found = self._shard.query(
            QueryRequest(
                limit=limit,
                query=Query.Nearest(image.tolist(), using=IMAGE_VECTOR),
                filter=_edge_filter(query_filter),
                with_payload=True,
                params=_rescored(),
            )
        )
        return [Hit(str(point.id), point.score, point.payload or {}) for point in found]

    def drop(self) -> None:
        if self._shard is not None:
            self._shard.close()
            self._shard = None
        shutil.rmtree(self.path, ignore_errors=True)
        self._config = None
        self.is_dropped = True
        self._lock.path.unlink(missing_ok=True)  # held until close: no one opens it meanwhile

    def close(self) -> None:
        if self._shard is not None and self._written:
            self.optimize()
        if self.keeper is not None:
            # On disk as after a close, before the keeper may let go of it from its thread.
            self.flush()
            if self.keeper.give_back(self):
                return
        if self._shard is not None:
            self._shard.close()
            self._shard = None
        self._lock.release()


def _shard_config_for(
    dense_dim: int, image_dim: int | None, multilingual_dim: int | None, page_keywords: bool
) -> EdgeConfig:
    """The shard's layout. Cold: the files are mapped and read on demand, not loaded into
    memory when the shard opens; the operating system's page cache keeps what searches touch.
    That holds for optimized segments only: an appendable one keeps its sparse index in memory,
    so the shard is optimized as it grows (``EdgeStore.optimize``), into segments of exact
    search (no HNSW graph, m=0), as appendable segments are searched. The dense vectors also
    have int8 copies, a quarter of their size, which the exact search scans; the best hits are
    scored again on the full vectors (``_rescored``)."""
    from qdrant_edge import (
        Distance,
        EdgeConfig,
        EdgeOptimizersConfig,
        EdgeSparseVectorParams,
        EdgeVectorParams,
        HnswIndexConfig,
        Memory,
        Modifier,
        ScalarQuantizationConfig,
        ScalarType,
    )

    sizes = {
        DENSE_VECTOR: dense_dim,
        IMAGE_VECTOR: image_dim,
        MULTILINGUAL_VECTOR: multilingual_dim,
    }
    return EdgeConfig(
        vectors={
            name: EdgeVectorParams(size=size, distance=Distance.Cosine, memory=Memory.Cold)
            for name, size in sizes.items()
            if size
        },
        sparse_vectors={
            name: EdgeSparseVectorParams(modifier=Modifier.Idf, memory=Memory.Cold)
            for name in (SPARSE_VECTOR, PAGE_SPARSE_VECTOR)
            if name == SPARSE_VECTOR or page_keywords
        },
        payload_memory=Memory.Cold,
        id_tracker_memory=Memory.Cold,
        hnsw_config=HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000),
        quantization_config=ScalarQuantizationConfig(
            type=ScalarType.Int8, quantile=_QUANTILE, memory=Memory.Cold
        ),
        optimizers=EdgeOptimizersConfig(max_segment_size=_MAX_SEGMENT_KB),
    )


def _rescored() -> SearchParams:
    """A dense search over the int8 copies whose best hits are scored on the full vectors."""
    from qdrant_edge import QuantizationSearchParams, SearchParams

    return SearchParams(
        quantization=QuantizationSearchParams(rescore=True, oversampling=_OVERSAMPLING)
    )


def _lock_of(path: Path) -> FileLock:
    """The lock every process takes before opening the shard at ``path``: beside the shard,
    not in it, since the shard's folder is removed when it starts afresh."""
    return FileLock(path.with_name(f".{path.name}.lock"))


def _ask_lock_of(path: Path) -> FileLock:
    """Held shared by whoever waits for the shard at ``path``: a process keeping it open
    between uses (``keeping.py``) lets go when it sees that."""
    return FileLock(path.with_name(f".{path.name}.asked"))


def acquire_asking(lock: FileLock, path: Path, wait_seconds: float) -> bool:
    """Take the lock of the shard at ``path``; if it is taken, ask for it while waiting up to
    ``wait_seconds``."""
    if lock.acquire(0):
        return True
    asking = _ask_lock_of(path)
    # Shared: askers do not exclude each other; refused only during a keeper's look.
    asked = asking.acquire(1.0, shared=True)
    try:
        return lock.acquire(wait_seconds)
    finally:
        if asked:
            asking.release()


def asked_for(path: Path) -> bool:
    """Whether another process (or store object) waits for the shard at ``path``."""
    asking = _ask_lock_of(path)
    if not asking.acquire(0):
        return True
    asking.release()
    return False


def _vectors(point: IndexPoint, sparse_type: type) -> dict[str, Any]:
    vectors: dict[str, Any] = {}
    if point.dense is not None:
        vectors[DENSE_VECTOR] = point.dense.tolist()
    if point.sparse is not None:
        indices, values = point.sparse
        vectors[SPARSE_VECTOR] = sparse_type(indices.tolist(), values.tolist())
    if point.image is not None:
        vectors[IMAGE_VECTOR] = point.image.tolist()
    if point.multilingual is not None:
        vectors[MULTILINGUAL_VECTOR] = point.multilingual.tolist()
    if point.page_sparse is not None:
        indices, values = point.page_sparse
        vectors[PAGE_SPARSE_VECTOR] = sparse_type(indices.tolist(), values.tolist())
    return vectors


def _edge_filter(query_filter: QueryFilter | None) -> Filter | None:
    from qdrant_edge import FieldCondition, Filter, HasIdCondition, MatchAny, RangeFloat

    if query_filter is None or query_filter.is_empty():
        return None
    must = [
        FieldCondition(key, match=MatchAny(list(values)))
        for key, values in query_filter.conditions().items()
    ]
    if (dates := query_filter.mtime_range()) is not None:
        must.append(FieldCondition("mtime", range=RangeFloat(gte=dates[0], lte=dates[1])))
    must_not: list[FieldCondition | HasIdCondition] = []
    if query_filter.offline_doc_ids:
        must_not.append(
            FieldCondition("doc_id", match=MatchAny(list(query_filter.offline_doc_ids)))
        )
    if query_filter.offline_point_ids:
        must_not.append(HasIdCondition(set(query_filter.offline_point_ids)))
    return Filter(must=must, must_not=must_not or None)
