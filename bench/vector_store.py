"""Which embedded vector engine: Qdrant Edge against qdrant-client's local mode, same points.

Both backends are driven through the project's own store classes (``rag_pipeline.store``), with
the collection the pipeline creates (384-d cosine dense + IDF sparse, keyword payload indexes).
Points are random but shaped like real chunks (a unit dense vector, about 40 sparse terms from a
30k vocabulary, the payload the pipeline writes). Reported: upsert seconds, and hybrid query
latency p50 / p95 (the 60 nearest by dense and by sparse, in one search), and the ratios
local mode / Edge.

    python bench/vector_store.py [--points 10000] [--queries 200]
    python bench/vector_store.py --grow 250000,1000000,2300000 [--queries 200]

With ``--grow``, Qdrant Edge alone, one shard grown to each size in turn (what the chat page's
replica holds at 100,000 to 1,000,000 documents), its hybrid query latency at each.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rag_pipeline import ids
from rag_pipeline.config import StoreSettings
from rag_pipeline.store import VectorStore
from rag_pipeline.store.edge import EdgeStore
from rag_pipeline.store.schema import IndexPoint
from rag_pipeline.store.server import QdrantServerStore

DIM = 384
VOCABULARY = 30_000


def sparse_vector(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    indices = np.unique(rng.zipf(1.3, size=40) % VOCABULARY).astype(np.int64)
    return indices, rng.random(len(indices)).astype(np.float32) + 0.5


def dense_vector(rng: np.random.Generator) -> np.ndarray:
    vector = rng.standard_normal(DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


def make_points(count: int, rng: np.random.Generator, first: int = 0) -> list[IndexPoint]:
    points = []
    for number in range(first, first + count):
        chunk = ids.chunk_id(f"bench/doc-{number // 10}.md", "v1", number % 10)
        points.append(
            IndexPoint(
                point_id=ids.point_id(chunk),
                dense=dense_vector(rng),
                sparse=sparse_vector(rng),
                payload={
                    "doc_id": f"bench/doc-{number // 10}.md",
                    "chunk_id": chunk,
                    "version": "v1",
                    "modality": "text",
                    "lang": "en",
                    "file_type": "markdown",
                    "page": 1 + number % 10,
                    "bbox": [72.0, 100.0, 540.0, 180.0],
                    "text": "lorem ipsum " * 60,
                },
            )
        )
    return points


def measure(
    name: str, open_store: Callable[[], VectorStore], points: list[IndexPoint], queries: int
) -> dict[str, float]:
    store = open_store()
    store.ensure_collection(DIM)
    started = time.perf_counter()
    store.upsert(points)
    upsert = time.perf_counter() - started
    rng = np.random.default_rng(1)
    latencies = []
    for _ in range(queries):
        dense, sparse = dense_vector(rng), sparse_vector(rng)
        started = time.perf_counter()
        nearest = store.nearest(dense, sparse, limit=60)
        latencies.append((time.perf_counter() - started) * 1000)
        assert nearest.dense and nearest.sparse
    store.close()
    latencies.sort()
    figures = {
        "upsert_s": upsert,
        "p50_ms": statistics.median(latencies),
        "p95_ms": latencies[int(0.95 * (len(latencies) - 1))],
    }
    print(
        f"{name}: upsert {len(points)} points {figures['upsert_s']:.2f} s | hybrid query "
        f"p50 {figures['p50_ms']:.2f} ms, p95 {figures['p95_ms']:.2f} ms"
    )
    return figures


def grow(sizes: list[int], queries: int) -> None:
    """Qdrant Edge alone, as the page's replica would be at each size: points written a batch
    at a time (optimized as the pipeline does), then the shard opened afresh and hybrid
    queries timed, one after another."""
    work = Path(tempfile.mkdtemp(prefix="rag-bench-store-grow-"))
    rng = np.random.default_rng(0)
    try:
        held, writing = 0, 0.0
        for size in sizes:
            store = EdgeStore(work / "edge")
            store.ensure_collection(DIM)
            started = time.perf_counter()
            while held < size:
                batch = min(50_000, size - held)
                store.upsert(make_points(batch, rng, first=held))
                store.optimize()
                held += batch
            store.close()
            writing += time.perf_counter() - started
            store = EdgeStore(work / "edge")
            latencies = []
            queried = np.random.default_rng(1)
            for _ in range(queries):
                dense, sparse = dense_vector(queried), sparse_vector(queried)
                started = time.perf_counter()
                store.nearest(dense, sparse, limit=60)
                latencies.append((time.perf_counter() - started) * 1000)
            store.close()
            latencies.sort()
            print(
                f"{size:,} points: written in {writing:,.0f} s so far | hybrid query p50 "
                f"{statistics.median(latencies):.1f} ms, p95 "
                f"{latencies[int(0.95 * (len(latencies) - 1))]:.1f} ms ({queries} queries)",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--grow", help="comma-separated sizes: Qdrant Edge alone, grown to each")
    args = parser.parse_args()
    if args.grow:
        grow([int(size) for size in args.grow.split(",")], args.queries)
        return
    points = make_points(args.points, np.random.default_rng(0))
    work = Path(tempfile.mkdtemp(prefix="rag-bench-store-"))
    try:
        edge = measure(
            "Qdrant Edge (embedded default)",
            lambda: EdgeStore(work / "edge"),
            points,
            args.queries,
        )
        local = measure(
            "qdrant-client local mode",
            lambda: QdrantServerStore.from_settings(StoreSettings(client_path=work / "local")),
            points,
            max(args.queries // 10, 10),  # hundreds of ms each: fewer queries suffice
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"local mode / Edge: upsert {local['upsert_s'] / edge['upsert_s']:.0f} x, "
        f"query p50 {local['p50_ms'] / edge['p50_ms']:.0f} x, "
        f"p95 {local['p95_ms'] / edge['p95_ms']:.0f} x"
    )


if __name__ == "__main__":
    main()
