"""Query latency of the chat page's retrieval and of a whole extractive answer, at 10k and 100k
chunks, against a brute-force numpy search over the same vectors in the same run.

Chunks are generated sentences: their sparse vectors come from the real BM25 encoder, their
dense vectors are random unit vectors (embedding 100k chunks would take hours here, and search
cost does not depend on what the vectors mean). Queries are real: each is embedded by the real
dense and sparse models, so "retrieval" includes query embedding, as a user waits for it. The
store is the page's own embedded replica (Qdrant Edge). Rerank is not configured (the goal
excludes it). Brute force: one numpy matrix product for the dense part, postings summed with
numpy for the sparse part (BM25 with IDF, as Qdrant scores it), then the same fusion.

With ``--workspaces N``, the server's case of many workspaces on one page: N collections of
``--sizes`` chunks each, every one with its own replica and retriever as the page opens them,
each query sent to a workspace drawn at random; against one workspace alone, in the same run.

    python bench/query_latency.py [--sizes 10000 100000] [--queries 200]
    python bench/query_latency.py --workspaces 20 --sizes 10000
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import WORDS

from rag_pipeline import ids
from rag_pipeline.config import Settings, load_settings
from rag_pipeline.embedding import DenseEncoder, SparseEncoder
from rag_pipeline.store.edge import EdgeStore
from rag_pipeline.store.schema import Hit, IndexPoint, NearestHits
from rag_pipeline.workspaces import create_workspace
from serving.answer import answer
from serving.extractive import ExtractiveAnswerer
from serving.retrieval import Retriever, fuse

DIM = 384


def sentences(rng: random.Random, count: int) -> str:
    return " ".join(
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16))).capitalize() + "."
        for _ in range(count)
    )


def build_points(count: int, settings: Settings) -> tuple[list[IndexPoint], np.ndarray]:
    rng, vectors = random.Random(count), np.random.default_rng(count)
    texts = [sentences(rng, rng.randint(3, 8)) for _ in range(count)]
    sparse = SparseEncoder(settings.embedding, settings.home).embed_documents(texts)
    dense = vectors.standard_normal((count, DIM)).astype(np.float32)
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    points = []
    for number, (text, vector) in enumerate(zip(texts, sparse, strict=True)):
        doc_id = f"bench/doc-{number // 20}.md"
        chunk_id = ids.chunk_id(doc_id, "v1", number % 20)
        points.append(
            IndexPoint(
                point_id=ids.point_id(chunk_id),
                dense=dense[number],
                sparse=(vector.indices, vector.values),
                payload={
                    "doc_id": doc_id,
                    "chunk_id": chunk_id,
                    "file_path": f"/bench/doc-{number // 20}.md",
                    "version": "v1",
                    "modality": "text",
                    "lang": "en",
                    "file_type": "markdown",
                    "section": "",
                    "page": None,
                    "text": text,
                },
            )
        )
    return points, dense


class BruteForce:
    """The same search done exhaustively with numpy: a baseline with no index at all."""

    def __init__(self, points: list[IndexPoint], dense: np.ndarray) -> None:
        self.points, self.dense = points, dense
        rows = np.concatenate([np.full(len(p.sparse[0]), i) for i, p in enumerate(points)])
        terms = np.concatenate([p.sparse[0] for p in points])
        weights = np.concatenate([p.sparse[1] for p in points]).astype(np.float32)
        order = np.argsort(terms, kind="stable")  # postings: documents per term
        self.terms, self.rows, self.weights = terms[order], rows[order], weights[order]
        unique, starts, counts = np.unique(self.terms, return_index=True, return_counts=True)
        self.postings = {int(t): (s, s + c) for t, s, c in zip(unique, starts, counts, strict=True)}
        total = len(points)
        self.idf = {
            t: float(np.log((total - c + 0.5) / (c + 0.5) + 1))
            for t, c in zip(unique, counts, strict=True)
        }

    def nearest(
        self, dense: np.ndarray, sparse: tuple[np.ndarray, np.ndarray], *, limit: int, **_: object
    ) -> NearestHits:
        dense_scores = self.dense @ dense
        sparse_scores = np.zeros(len(self.points), dtype=np.float32)
        for term, weight in zip(sparse[0].tolist(), sparse[1].tolist(), strict=True):
            if (span := self.postings.get(term)) is not None:
                start, end = span
                np.add.at(
                    sparse_scores,
                    self.rows[start:end],
                    self.weights[start:end] * weight * self.idf[term],
                )
        return NearestHits(self._top(dense_scores, limit), self._top(sparse_scores, limit))

    def _top(self, scores: np.ndarray, limit: int) -> list[Hit]:
        best = np.argpartition(-scores, min(limit, len(scores) - 1))[:limit]
        best = best[np.argsort(-scores[best])]
        return [
            Hit(self.points[i].point_id, float(scores[i]), self.points[i].payload)
            for i in best
            if scores[i] > 0
        ]


def percentiles(run: Callable[[str], object], queries: list[str]) -> tuple[float, float]:
    for query in queries[:5]:  # warm-up
        run(query)
    times = []
    for query in queries:
        started = time.perf_counter()
        run(query)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def measure(size: int, queries: list[str], work: Path) -> None:
    settings = load_settings(work / f"home-{size}")
    started = time.perf_counter()
    points, dense = build_points(size, settings)
    store = EdgeStore(work / f"edge-{size}")
    store.ensure_collection(DIM)
    store.upsert(points)
    print(f"{size} chunks: built in {time.perf_counter() - started:.0f} s")
    retriever = Retriever(settings, store)
    brute = BruteForce(points, dense)
    answerer = ExtractiveAnswerer(settings)
    dense_model = DenseEncoder(settings.embedding, settings.home)
    sparse_model = SparseEncoder(settings.embedding, settings.home)

    def brute_retrieval(query: str) -> object:
        vector, keywords = dense_model.embed_query(query), sparse_model.embed_query(query)
        found = brute.nearest(vector, (keywords.indices, keywords.values), limit=60)
        return fuse(found, settings.retrieval)[:8]

    def whole_answer(query: str) -> object:
        return list(answer(answerer, query, [], retriever.retrieve(query)))[-1]

    rows = {
        "retrieval (Edge)": percentiles(lambda q: retriever.retrieve(q), queries),
        "retrieval (numpy brute force)": percentiles(brute_retrieval, queries),
        "extractive answer (Edge)": percentiles(whole_answer, queries),
    }
    embed = percentiles(lambda q: dense_model.embed_query(q), queries)
    for name, (p50, p95) in rows.items():
        print(f"  {name}: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    edge, numpy_ = rows["retrieval (Edge)"], rows["retrieval (numpy brute force)"]
    print(
        f"  of which dense query embedding p50 {embed[0]:.1f} ms | Edge / brute force: "
        f"p50 {edge[0] / numpy_[0]:.2f}, p95 {edge[1] / numpy_[1]:.2f}"
    )
    store.close()


def measure_workspaces(count: int, size: int, queries: list[str], work: Path) -> None:
    """Per-workspace query latency with ``count`` workspaces open in one server process."""
    started = time.perf_counter()
    installation = load_settings(work / "installation")
    stores, retrievers = [], []
    for number in range(count):
        settings = create_workspace(installation, f"Workspace {number}").settings
        points, _ = build_points(size + number, settings)  # a different corpus in each
        store = EdgeStore(work / f"workspace-edge-{number}")
        store.ensure_collection(DIM)
        store.upsert(points)
        stores.append(store)
        retrievers.append(Retriever(settings, store))
    print(f"{count} workspaces of {size} chunks: built in {time.perf_counter() - started:.0f} s")
    rng = random.Random(count)
    alone = percentiles(lambda q: retrievers[0].retrieve(q), queries)
    spread = percentiles(lambda q: rng.choice(retrievers).retrieve(q), queries)
    print(f"  one workspace alone: p50 {alone[0]:.1f} ms, p95 {alone[1]:.1f} ms")
    print(
        f"  a random one of {count}: p50 {spread[0]:.1f} ms, p95 {spread[1]:.1f} ms "
        f"(p95 / alone {spread[1] / alone[1]:.2f}) | peak RSS {peak_rss_mb():.0f} MB"
    )
    for store in stores:
        store.close()


def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--workspaces", type=int, default=0, help="measure this many workspaces on one page"
    )
    args = parser.parse_args()
    rng = random.Random(1)
    queries = [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(args.queries)
    ]
    work = Path(tempfile.mkdtemp(prefix="rag-bench-latency-"))
    try:
        for size in args.sizes:
            if args.workspaces:
                measure_workspaces(args.workspaces, size, queries, work)
            else:
                measure(size, queries, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
