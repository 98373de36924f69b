"""Opening the embedded store, with its payload indexes loaded (the layout before) or mapped
(today's), over the same points.

A shard is grown to ``--points`` points shaped like real chunks (``vector_store.py``'s), then
copied; the copy's payload indexes are built again loaded into memory, as shards were written
before. Each is opened in a fresh process (the time to open it and count its points, and that
process's peak RSS), then searched: hybrid queries without a filter and restricted to one
document (the named-document search, and the filter a deletion uses). Every command, every
layout, in the same run.

    python bench/store_open.py [--points 300000] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vector_store import DIM, dense_vector, make_points, sparse_vector

from rag_pipeline.files import copy_keeping_holes
from rag_pipeline.store.edge import EdgeStore
from rag_pipeline.store.schema import INDEXED_FIELDS, RANGE_FIELDS, QueryFilter

_OPEN = """
import json, resource, sys, time
from pathlib import Path
from rag_pipeline.store.edge import EdgeStore
started = time.perf_counter()
store = EdgeStore(Path(sys.argv[1]))
points = store.count()
seconds = time.perf_counter() - started
store.close()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "points": points, "peak_mb": peak}))
"""


def grow(path: Path, points: int) -> None:
    rng = np.random.default_rng(0)
    store = EdgeStore(path)
    store.ensure_collection(DIM)
    for first in range(0, points, 50_000):
        store.upsert(make_points(min(50_000, points - first), rng, first=first))
        store.optimize()
    store.close()


def load_indexes_into_memory(path: Path) -> None:
    """Build the shard's payload indexes again as they were before: loaded as it opens."""
    from qdrant_edge import EdgeShard, PayloadSchemaType, UpdateOperation

    shard = EdgeShard.load(str(path))
    for field in INDEXED_FIELDS:
        shard.update(UpdateOperation.create_field_index(field, PayloadSchemaType.Keyword))
    for field in RANGE_FIELDS:
        shard.update(UpdateOperation.create_field_index(field, PayloadSchemaType.Float))
    shard.close()


def opened_in_new_process(path: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _OPEN, str(path)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def query_times(path: Path, queries: int, documents: int) -> dict[str, list[float]]:
    """Hybrid queries, one after another: without a filter, and within one document."""
    # Opened without ensure_collection: that would map a loaded shard's indexes.
    store = EdgeStore(path)
    rng = np.random.default_rng(1)
    times: dict[str, list[float]] = {"no filter": [], "one document": []}
    try:
        for _ in range(queries):
            for kind, where in (
                ("no filter", None),
                ("one document", QueryFilter(doc_ids=(f"bench/doc-{rng.integers(documents)}.md",))),
            ):
                dense, sparse = dense_vector(rng), sparse_vector(rng)
                started = time.perf_counter()
                store.nearest(dense, sparse, limit=60, query_filter=where)
                times[kind].append((time.perf_counter() - started) * 1000)
    finally:
        store.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=300_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rag-bench-store-open-"))
    try:
        started = time.perf_counter()
        grow(work / "mapped", args.points)
        shutil.copytree(work / "mapped", work / "loaded", copy_function=copy_keeping_holes)
        load_indexes_into_memory(work / "loaded")
        print(f"{args.points:,} points written in {time.perf_counter() - started:,.0f} s")
        for layout in ("loaded", "mapped"):
            opened = opened_in_new_process(work / layout)
            assert opened["points"] == args.points
            times = query_times(work / layout, args.queries, args.points // 10)
            searches = ", ".join(
                f"{kind} p50 {statistics.median(values):.1f} ms p95 "
                f"{sorted(values)[int(0.95 * (len(values) - 1))]:.1f} ms"
                for kind, values in times.items()
            )
            print(
                f"payload indexes {layout}: open + count {opened['seconds']:.2f} s, "
                f"peak RSS {opened['peak_mb']:,.0f} MB | hybrid query ({args.queries} each): "
                f"{searches}",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
