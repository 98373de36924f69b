"""The census of a store's points against the catalog's chunks (``store/consistency.py``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from rag_pipeline import ids
from rag_pipeline.catalog import Catalog, DocumentRecord
from rag_pipeline.config import load_settings
from rag_pipeline.store import IndexPoint
from rag_pipeline.store.consistency import take_census
from rag_pipeline.store.edge import EdgeStore

COLLECTION = "rag_pipeline-test"


class _ReadsRecorded(EdgeStore):
    """The embedded store, remembering which points' payloads were asked for."""

    payloads_read: list[str]

    def owners_of(self, point_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        self.payloads_read = sorted(point_ids)
        return super().owners_of(self.payloads_read)


def _record(doc_id: str, version: str, chunks: int) -> DocumentRecord:
    return DocumentRecord(
        doc_id=doc_id,
        source="/docs",
        relative_path=doc_id,
        file_type="text",
        size=10,
        mtime_ns=1,
        sha256="abc",
        version=version,
        state="indexed",
        indexed_version=version,
        chunks=chunks,
    )


def _chunk(doc_id: str, version: str, index: int) -> dict[str, object]:
    return {
        "chunk_id": ids.chunk_id(doc_id, version, index),
        "doc_id": doc_id,
        "version": version,
        "chunk_index": index,
        "text": "hello",
        "text_hash": f"h{index}",
        "page_start": 1,
        "page_end": 1,
        "bboxes": [],
        "section": [],
        "token_count": 1,
        "lang": "en",
        "kinds": ["paragraph"],
        "modality": "text",
        "image_sha256": None,
        "image_file": None,
        "phash": None,
    }


def _point(doc_id: str, version: str, index: int) -> IndexPoint:
    dense = np.random.default_rng(index).normal(size=8).astype(np.float32)
    return IndexPoint(
        point_id=ids.point_id(ids.chunk_id(doc_id, version, index)),
        dense=dense / np.linalg.norm(dense),
        sparse=(np.array([index]), np.array([1.0], dtype=np.float32)),
        payload={"doc_id": doc_id, "version": version, "modality": "text", "lang": "en"},
    )


def test_a_census_names_points_by_their_ids_and_reads_payloads_only_of_points_no_chunk_names(
    home: Path, tmp_path: Path
) -> None:
    with Catalog(load_settings(home)) as catalog:
        catalog.commit_document(
            COLLECTION,
            _record("whole", "v1", 2),
            [_chunk("whole", "v1", 0), _chunk("whole", "v1", 1)],
        )
        catalog.commit_document(
            COLLECTION,
            _record("short", "v1", 2),
            [_chunk("short", "v1", 0), _chunk("short", "v1", 1)],
        )
        catalog.commit_document(COLLECTION, _record("moved", "v2", 1), [_chunk("moved", "v2", 0)])
        store = _ReadsRecorded(tmp_path / "edge")
        store.ensure_collection(8)
        stale = _point("moved", "v1", 0)
        store.upsert(
            [
                _point("whole", "v1", 0),
                _point("whole", "v1", 1),
                _point("short", "v1", 0),
                _point("moved", "v2", 0),
                stale,
            ]
        )
        try:
            census = take_census(catalog, store, COLLECTION)
        finally:
            store.close()
    assert census.missing() == {"short": "2 chunks but 1 points"}
    assert census.orphans() == {"moved": "points of version v1 but the catalog has v2"}
    assert census.stray_chunks == []
    assert store.payloads_read == [stale.point_id]
