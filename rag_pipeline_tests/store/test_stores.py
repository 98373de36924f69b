"""The same contract for both backends: the embedded engine and qdrant-client (local mode here)."""

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rag_pipeline.config import StoreSettings
from rag_pipeline.store import StoreBusyError, StoreError, VectorStore
from rag_pipeline.store.edge import EdgeStore
from rag_pipeline.store.schema import INDEXED_FIELDS, RANGE_FIELDS, IndexPoint, QueryFilter
from rag_pipeline.store.server import QdrantServerStore

DIM = 8


def _point(doc: str, version: str, index: int, seed: int, lang: str = "en") -> IndexPoint:
    rng = np.random.default_rng(seed)
    dense = rng.normal(size=DIM).astype(np.float32)
    return IndexPoint(
        point_id=f"00000000-0000-0000-0000-{seed:012d}",
        dense=dense / np.linalg.norm(dense),
        sparse=(np.array([seed, 1000 + seed]), np.array([1.0, 0.5], dtype=np.float32)),
        payload={
            "doc_id": doc,
            "version": version,
            "chunk_id": f"{doc}#{index}",
            "lang": lang,
            "modality": "text",
        },
    )


def _local_mode(tmp_path: Path) -> QdrantServerStore:
    """The server backend's code, through qdrant-client's local mode (no server here)."""
    return QdrantServerStore.from_settings(StoreSettings(client_path=tmp_path / "local"), "test")


@pytest.fixture(params=["edge", "qdrant-client"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    if request.param == "edge":
        opened: VectorStore = EdgeStore(tmp_path / "edge")
    else:
        opened = QdrantServerStore.from_settings(
            StoreSettings(client_path=tmp_path / "local"), "test"
        )
    opened.ensure_collection(DIM)
    yield opened
    opened.close()


@pytest.mark.parametrize("backend", ["edge", "qdrant-client"])
def test_a_search_before_anything_is_indexed_finds_nothing(backend: str, tmp_path: Path) -> None:
    empty: VectorStore = (
        EdgeStore(tmp_path / "edge") if backend == "edge" else _local_mode(tmp_path)
    )
    sparse = (np.array([1]), np.array([1.0], dtype=np.float32))
    try:
        found = empty.nearest(np.ones(DIM, dtype=np.float32), sparse, limit=5)
        assert (found.dense, found.sparse) == ([], [])
    finally:
        empty.close()


def test_one_search_returns_the_nearest_points_by_each_vector(store: VectorStore) -> None:
    points = [_point("a", "v1", i, seed=i + 1) for i in range(5)]
    store.upsert(points)
    target = points[3]
    nearest = store.nearest(target.dense, target.sparse, limit=3)
    assert nearest.dense[0].point_id == target.point_id
    assert nearest.sparse[0].point_id == target.point_id
    assert nearest.dense[0].payload["chunk_id"] == "a#3"
    assert len(nearest.dense) == 3 and nearest.dense[0].score >= nearest.dense[1].score


def test_point_ids_name_every_point_and_owners_of_tell_whose_the_named_ones_are(
    store: VectorStore,
) -> None:
    points = [_point("a", "v1", 0, 1), _point("a", "v1", 1, 2), _point("b", "v2", 0, 3)]
    store.upsert(points)
    assert store.point_ids() == {point.point_id for point in points}
    absent = _point("c", "v1", 0, 4).point_id
    assert store.owners_of([points[2].point_id, absent]) == {points[2].point_id: ("b", "v2")}


def test_delete_keeps_only_the_named_version(store: VectorStore) -> None:
    store.upsert(
        [
            _point("a", "v1", 0, 1),
            _point("a", "v1", 1, 2),
            _point("a", "v2", 0, 3),
            _point("b", "v1", 0, 4),
        ]
    )
    store.delete_document("a", keep_version="v2")
    assert store.count("a") == 1 and store.count("b") == 1
    assert set(store.owners_of(store.point_ids()).values()) == {("a", "v2"), ("b", "v1")}
    store.delete_document("a")
    assert store.count() == 1


def test_upserting_the_same_points_twice_creates_no_duplicates(store: VectorStore) -> None:
    points = [_point("a", "v1", i, i + 1) for i in range(3)]
    store.upsert(points)
    store.upsert(points)
    assert store.count() == 3


def test_filters_restrict_the_search(store: VectorStore) -> None:
    old, new = _point("a", "v1", 0, 1, lang="en"), _point("b", "v1", 0, 2, lang="zh")
    old.payload["mtime"], new.payload["mtime"] = 1_000.0, 2_000.0
    old.payload["page"], new.payload["page"] = 4, 5
    store.upsert([old, new])
    query = _point("x", "v", 0, 1)

    def found(query_filter: QueryFilter) -> set[str]:
        nearest = store.nearest(query.dense, query.sparse, limit=5, query_filter=query_filter)
        return {hit.payload["doc_id"] for hit in nearest.dense + nearest.sparse}

    assert found(QueryFilter(langs=("zh",))) == {"b"}
    assert found(QueryFilter(doc_ids=("a", "b"), modalities=("text",))) == {"a", "b"}
    assert found(QueryFilter(modified_after=1_500.0)) == {"b"}
    assert found(QueryFilter(modified_before=1_500.0)) == {"a"}
    assert found(QueryFilter(pages=(5, 6))) == {"b"}


def test_vector_size_is_reported(store: VectorStore) -> None:
    assert store.dense_size() == DIM


def _open_edge_in_a_loop(path: Path, stop: Path, refused: Path) -> subprocess.Popen[str]:
    """Another process opening the embedded store again and again, as CLI queries do; it
    touches ``refused`` when first refused."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from rag_pipeline.store import StoreBusyError\n"
        "from rag_pipeline.store.edge import EdgeStore\n"
        "busy = opened = 0\n"
        f"while not Path({str(stop)!r}).exists():\n"
        "    try:\n"
        f"        EdgeStore(Path({str(path)!r})).close()\n"
        "        opened += 1\n"
        "    except StoreBusyError as error:\n"
        "        busy += 1\n"
        "        message = str(error)\n"
        f"        Path({str(refused)!r}).touch()\n"
        "print(busy, opened, message if busy else '')\n"
    )
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_another_process_opening_the_embedded_store_in_use_waits_and_damages_nothing(
    tmp_path: Path,
) -> None:
    # Qdrant Edge alone lets a second process rewrite the shard's files before refusing it:
    # points written meanwhile were lost or undecodable.
    path, stop, refused = tmp_path / "edge", tmp_path / "stop", tmp_path / "refused"
    writer = EdgeStore(path)
    writer.ensure_collection(DIM)
    opener = _open_edge_in_a_loop(path, stop, refused)
    try:
        deadline = time.monotonic() + 120  # its start may take long on a loaded machine
        while not refused.exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # until the other process is up and trying
        for start in range(0, 600, 20):
            writer.upsert([_point("a", "v1", i, i + 1) for i in range(start, start + 20)])
            writer.flush()
    finally:
        stop.touch()
        out, _ = opener.communicate(timeout=60)
    busy, _, message = out.split(" ", 2)
    assert int(busy) > 0 and "open in another process" in message
    assert writer.count() == 600
    assert len(writer.owners_of(writer.point_ids())) == 600  # every payload still decodes
    writer.close()
    reopened = EdgeStore(path, wait_seconds=10)  # the lock went with the writer's close
    assert reopened.count() == 600
    reopened.close()


def test_two_store_objects_in_one_process_exclude_each_other(tmp_path: Path) -> None:
    first = EdgeStore(tmp_path / "edge")
    with pytest.raises(StoreBusyError):
        EdgeStore(tmp_path / "edge")
    first.close()
    EdgeStore(tmp_path / "edge").close()


@pytest.mark.parametrize("backend", ["edge", "qdrant-client"])
def test_a_collection_never_changes_its_vector_size_and_is_never_emptied_for_it(
    backend: str, tmp_path: Path
) -> None:
    store: VectorStore = (
        EdgeStore(tmp_path / "edge") if backend == "edge" else _local_mode(tmp_path)
    )
    store.ensure_collection(DIM)
    store.upsert([_point("a", "v1", 0, 1)])
    with pytest.raises(StoreError, match="8-d text"):
        store.ensure_collection(16)
    assert store.count() == 1
    store.drop()
    assert store.count() == 0
    store.close()


def test_a_long_write_to_the_embedded_store_loses_nothing_when_it_reopens_the_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rag_pipeline.store.edge as edge

    monkeypatch.setattr(edge, "_REOPEN_AFTER_POINTS", 100)  # reopened every 100 points
    store = EdgeStore(tmp_path / "edge")
    store.ensure_collection(DIM)
    store.upsert([_point("a", "v1", i, i + 1) for i in range(450)])
    store.delete_document("a", keep_version="v1")
    assert store.count() == 450 and len(store.owners_of(store.point_ids())) == 450
    store.close()


def _unit_vectors(rows: int, size: int = 384) -> np.ndarray:
    vectors = np.random.default_rng(0).normal(size=(rows, size)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _log_points(vectors: np.ndarray) -> list[IndexPoint]:
    return [
        IndexPoint(
            point_id=f"00000000-0000-0000-0000-{row + 1:012d}",
            dense=vectors[row],
            sparse=(np.array([row]), np.array([1.0], dtype=np.float32)),
            payload={"doc_id": "big.log", "version": "v1", "chunk_id": f"big.log#{row}"},
        )
        for row in range(len(vectors))
    ]


def _each_finds_itself_first(store: EdgeStore, vectors: np.ndarray) -> None:
    for row in (0, 3456, 6999):  # exact search: each vector finds itself first
        nearest = store.nearest(vectors[row], (np.array([row]), np.array([1.0])), limit=3)
        assert nearest.dense[0].payload["chunk_id"] == f"big.log#{row}"
        assert nearest.sparse[0].payload["chunk_id"] == f"big.log#{row}"
    assert store.count() == len(vectors)


def _quantized_files(shard: Path) -> list[Path]:
    return list(shard.rglob("quantized.data"))


def test_an_embedded_shard_that_grew_large_is_optimized_into_quantized_exact_search_segments(
    tmp_path: Path,
) -> None:
    from qdrant_edge import EdgeShard

    # Past Qdrant's indexing threshold (10 MB of vectors): 7,000 vectors of 384 floats.
    vectors = _unit_vectors(7000)
    store = EdgeStore(tmp_path / "edge")
    store.ensure_collection(384)
    store.upsert(_log_points(vectors))
    store.close()  # a writer optimizes as it closes

    shard = EdgeShard.load(str(tmp_path / "edge"))
    assert shard.info().segments_count > 1  # the appendable segment was optimized
    shard.close()
    assert _quantized_files(tmp_path / "edge")  # with the dense vectors' int8 copies
    reopened = EdgeStore(tmp_path / "edge")
    # Its payload indexes are mapped files, not read whole as it opens.
    assert _mapped_indexes(reopened) == {*INDEXED_FIELDS, *RANGE_FIELDS}
    _each_finds_itself_first(reopened, vectors)
    reopened.close()


def test_a_shard_of_an_older_layout_gets_int8_copies_and_mapped_indexes_in_place_losing_nothing(
    tmp_path: Path,
) -> None:
    from qdrant_edge import (
        Distance,
        EdgeConfig,
        EdgeShard,
        EdgeSparseVectorParams,
        EdgeVectorParams,
        HnswIndexConfig,
        Memory,
        Modifier,
        PayloadSchemaType,
        UpdateOperation,
    )

    path = tmp_path / "edge"
    # The layout of an older release: exact-search segments, no int8 copies, payload indexes
    # loaded into memory as the shard opens.
    older = EdgeShard.create(
        str(path),
        EdgeConfig(
            vectors={
                "text_dense": EdgeVectorParams(
                    size=384, distance=Distance.Cosine, memory=Memory.Cold
                )
            },
            sparse_vectors={"text_sparse": EdgeSparseVectorParams(modifier=Modifier.Idf)},
            hnsw_config=HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000),
        ),
    )
    for field in INDEXED_FIELDS:
        older.update(UpdateOperation.create_field_index(field, PayloadSchemaType.Keyword))
    older.close()
    vectors = _unit_vectors(7000)
    store = EdgeStore(path)
    store.upsert(_log_points(vectors))
    store.close()
    assert not _quantized_files(path)

    reopened = EdgeStore(path)
    assert not _mapped_indexes(reopened)
    reopened.ensure_collection(384)  # as a run or the page opens it
    assert _quantized_files(path)
    assert _mapped_indexes(reopened) == {*INDEXED_FIELDS, *RANGE_FIELDS}
    _each_finds_itself_first(reopened, vectors)
    assert reopened.count("big.log") == len(vectors)  # filtered through the rebuilt index
    reopened.delete_document("big.log")
    assert reopened.count() == 0
    reopened.close()


def _mapped_indexes(store: EdgeStore) -> set[str]:
    """The payload fields whose index the store's shard keeps in mapped files."""
    from qdrant_edge import Memory

    return {
        field
        for field, index in store.shard.info().payload_schema.items()
        if getattr(index.params, "memory", None) == Memory.Cold
    }


@pytest.mark.parametrize("backend", ["edge", "qdrant-client"])
def test_multilingual_vectors_are_searched_apart_and_leave_with_their_document(
    backend: str, tmp_path: Path
) -> None:
    opened: VectorStore = (
        EdgeStore(tmp_path / "edge") if backend == "edge" else _local_mode(tmp_path)
    )
    try:
        opened.ensure_collection(DIM, multilingual_dim=DIM)
        opened.upsert([_point("en", "v1", 0, seed=1)])
        assert not opened.holds_multilingual()
        chinese = _point("zh", "v1", 0, seed=2, lang="zh")
        chinese.multilingual, chinese.dense = chinese.dense, None
        opened.upsert([chinese])
        assert opened.holds_multilingual()
        assert chinese.multilingual is not None and chinese.sparse is not None
        found = opened.nearest(
            chinese.multilingual, chinese.sparse, limit=5, multilingual=chinese.multilingual
        )
        assert [hit.payload["doc_id"] for hit in found.dense] == ["en"]
        assert [hit.payload["doc_id"] for hit in found.multilingual] == ["zh"]
        opened.delete_document("zh")
        assert opened.count() == 1
        # The embedded store asks again after a write; a server's answer, once yes, is kept
        # (other processes write it; a query vector too many only finds nothing).
        assert opened.holds_multilingual() is (backend != "edge")
        with pytest.raises(StoreError, match="multilingual"):
            opened.ensure_collection(DIM)
    finally:
        opened.close()


@pytest.mark.parametrize("backend", ["edge", "qdrant-client"])
@pytest.mark.parametrize("page_keywords", [True, False])
def test_the_given_points_are_scored_by_their_pages_keywords_where_the_collection_has_them(
    backend: str, page_keywords: bool, tmp_path: Path
) -> None:
    opened: VectorStore = (
        EdgeStore(tmp_path / "edge") if backend == "edge" else _local_mode(tmp_path)
    )
    try:
        opened.ensure_collection(DIM, page_keywords=page_keywords)
        points = [_point("report", "v1", index, seed=index + 1) for index in range(3)]
        # chunks 0 and 1 start on a page holding terms 7 and 8; chunk 2 on one holding 7 alone
        for point, page, terms in zip(points, (1, 1, 2), ([7, 8], [7, 8], [7]), strict=True):
            point.page_sparse = (np.array(terms), np.ones(len(terms), dtype=np.float32))
            point.payload["page"] = page
        opened.upsert(points if page_keywords else [replace(p, page_sparse=None) for p in points])
        query = (np.array([7, 8]), np.array([1.0, 1.0], dtype=np.float32))
        asked = {points[2].point_id, points[1].point_id}
        found = opened.page_keyword_scores(query, asked)
        if page_keywords:
            assert [hit.point_id for hit in found] == [points[1].point_id, points[2].point_id]
            assert found[0].score > found[1].score > 0
        else:
            assert found == []
        assert opened.page_keyword_scores(query, set()) == []
    finally:
        opened.close()
