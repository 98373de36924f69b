"""How the fusion settings move nDCG@10: a grid over method, RRF's k, weights and depth.

The dataset is indexed as ``rag-pipeline eval`` indexes it (into ``<home>/eval/<name>``, so run
``rag-pipeline eval`` first or let this do it); each query is searched once, 200 deep, and every
combination fused from that, through ``Retriever.rank``, the chat page's code. What this prints
is how the defaults in ``rag_pipeline/config/serving.py`` (``RetrievalSettings``) were chosen.

    python bench/fusion_sweep.py ../shared/eval/scifact [--split test] [--home data]
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from evaluation.beir import _documents, load_beir, write_corpus
from evaluation.metrics import evaluate
from rag_pipeline.config import load_settings
from rag_pipeline.orchestration.incremental import index_once
from rag_pipeline.store.schema import NearestHits
from serving.retrieval import Retriever, live_index

GRID = {
    "fusion": ["rrf", "dbsf", "minmax"],
    "rrf_k": [2, 10, 30, 60],
    "dense_weight": [0.6, 0.8, 1.0, 1.2, 1.5],
    "prefetch": [30, 60, 100],
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--split", default="test")
    parser.add_argument("--home", type=Path, default=Path("data"))
    args = parser.parse_args()
    data = load_beir(args.dataset, args.split)
    settings = load_settings(args.home)
    scratch = settings.home / "eval" / data.name
    names = write_corpus(data, scratch / "corpus")
    scratch_settings = settings.in_home(scratch, [scratch / "corpus"])
    index_once(scratch_settings, trigger="eval")
    beir_ids = {f"corpus/{name}": doc_id for name, doc_id in names.items()}
    with live_index(scratch_settings) as (live_settings, store):
        retriever = Retriever(live_settings, store)
        searched = {
            query_id: (text, retriever.search(text, limit=200))
            for query_id, text in data.queries.items()
        }
    base = scratch_settings.retrieval
    results = []
    for fusion, k, weight, depth in itertools.product(*GRID.values()):
        if fusion != "rrf" and k != GRID["rrf_k"][0]:
            continue  # k only matters to RRF
        variant = base.model_copy(
            update={"fusion": fusion, "rrf_k": k, "dense_weight": weight, "prefetch": depth}
        )
        rankings = {}
        for query_id, (text, nearest) in searched.items():
            cut = NearestHits(nearest.dense[:depth], nearest.sparse[:depth])
            ranked, _ = retriever.rank(text, cut, keep=10, fusion=variant, rerank=False)
            rankings[query_id] = _documents(ranked, beir_ids)
        scores = evaluate(rankings, data.qrels)
        label = f"{fusion:<6} k={k:<3} dense_weight={weight:<4} prefetch={depth:<3}"
        results.append((scores["ndcg@10"], scores["recall@100"], label))
    for ndcg, recall, label in sorted(results, reverse=True):
        print(f"{label}  nDCG@10 {ndcg:.4f}  Recall@100 {recall:.4f}")


if __name__ == "__main__":
    main()
