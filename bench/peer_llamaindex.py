"""Ours against LlamaIndex's IngestionPipeline on the same corpus, in the same run.

The peer: llama-index-core's ``IngestionPipeline`` with a docstore (``UPSERTS_AND_DELETE``, so
unchanged documents are skipped and deleted ones removed), its Qdrant vector store
(qdrant-client's local mode) and the same embedding model through fastembed (the offline
all-MiniLM-L6-v2 int8, loaded by our own loader), chunked by its ``SentenceSplitter`` at 256
tokens with an overlap of 50, as ours. Its retrieval is what its vector store offers: dense
top 100.

Every step is a fresh process, timed, its peak memory watched: full index, no-op re-run,
re-run after one changed file; then nDCG@10 on the dataset's test queries (ours: ``rag-pipeline
eval``, the chat page's hybrid retrieval). Ratios are ours / theirs (below 1: we are faster or
smaller; above 1 for nDCG: we find more).

    pip install -e ".[bench,peer]"
    python bench/peer_llamaindex.py [--dataset ../shared/eval/scifact]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import SHARED, Measured, require_shared, run_cli, run_command

PEER = [sys.executable, str(Path(__file__).resolve())]


# -- the peer, run in its own process -----------------------------------------------------------


def peer_embedding() -> Any:
    """The same fastembed model as ours, as a LlamaIndex embedding (its default batch of 10)."""
    from llama_index.core.embeddings import BaseEmbedding

    from rag_pipeline.config import EmbeddingSettings
    from rag_pipeline.embedding.models import load_dense_model

    model = load_dense_model(EmbeddingSettings(parallel=1), Path(tempfile.gettempdir()) / "peer")

    class SameModel(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return next(iter(model.query_embed(query))).tolist()

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return next(iter(model.embed([text]))).tolist()

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [vector.tolist() for vector in model.embed(texts, batch_size=len(texts))]

    return SameModel(model_name="all-MiniLM-L6-v2-int8")


def peer_store(store: Path) -> tuple[Any, Any]:
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    client = QdrantClient(path=str(store / "qdrant"))
    return client, QdrantVectorStore(client=client, collection_name="peer")


def peer_index(corpus: Path, store: Path) -> None:
    from llama_index.core import SimpleDirectoryReader
    from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.storage.docstore import SimpleDocumentStore

    documents = SimpleDirectoryReader(str(corpus), filename_as_id=True).load_data()
    docstore_path = store / "docstore.json"
    docstore = (
        SimpleDocumentStore.from_persist_path(str(docstore_path))
        if docstore_path.exists()
        else SimpleDocumentStore()
    )
    client, vector_store = peer_store(store)
    pipeline = IngestionPipeline(
        transformations=[SentenceSplitter(chunk_size=256, chunk_overlap=50), peer_embedding()],
        docstore=docstore,
        vector_store=vector_store,
        docstore_strategy=DocstoreStrategy.UPSERTS_AND_DELETE,
    )
    nodes = pipeline.run(documents=documents)
    docstore.persist(str(docstore_path))
    client.close()
    print(f"peer: {len(documents)} documents read, {len(nodes)} nodes embedded")


def peer_evaluate(dataset: Path, store: Path) -> None:
    from llama_index.core.vector_stores.types import VectorStoreQuery

    from evaluation.beir import load_beir
    from evaluation.metrics import evaluate

    data = load_beir(dataset)
    embedding = peer_embedding()
    client, vector_store = peer_store(store)
    rankings: dict[str, list[str]] = {}
    for query_id, text in data.queries.items():
        found = vector_store.query(
            VectorStoreQuery(
                query_embedding=embedding.get_query_embedding(text), similarity_top_k=200
            )
        )
        ranked: dict[str, None] = {}
        for node in found.nodes:
            name = Path(node.ref_doc_id or "").name.removesuffix(".md")
            ranked.setdefault(unquote(name), None)
        rankings[query_id] = list(ranked)
    client.close()
    print(json.dumps(evaluate(rankings, data.qrels)))


# -- the comparison ---------------------------------------------------------------------------


def run_peer(*args: str | Path) -> Measured:
    return run_command([*PEER, *map(str, args)])


def compare(dataset: Path, work: Path) -> None:
    from evaluation.beir import load_beir, write_corpus

    data = load_beir(dataset)
    home = work / "ours"
    corpus = home / "eval" / data.name / "corpus"
    names = write_corpus(data, corpus)
    peer_corpus = work / "peer-corpus"
    shutil.copytree(corpus, peer_corpus)
    scratch = home / "eval" / data.name
    changed = sorted(names)[len(names) // 2]

    ours: dict[str, Measured] = {}
    theirs: dict[str, Measured] = {}
    ours["full index"] = run_cli("index", "--home", scratch, "--source", corpus)
    theirs["full index"] = run_peer("--peer-index", peer_corpus, work / "peer")
    ours["no-op re-run"] = run_cli("index", "--home", scratch)
    theirs["no-op re-run"] = run_peer("--peer-index", peer_corpus, work / "peer")
    for folder in (corpus, peer_corpus):
        path = folder / changed
        path.write_text(path.read_text(encoding="utf-8") + "\nA sentence added later.\n")
    ours["one changed file"] = run_cli("index", "--home", scratch)
    theirs["one changed file"] = run_peer("--peer-index", peer_corpus, work / "peer")

    report = json.loads(run_cli("eval", dataset, "--home", home, "--json").stdout)
    peer_scores = json.loads(run_peer("--peer-evaluate", dataset, work / "peer").stdout)
    configured = report["run"]["configured_method"]

    print(f"{data.name}: {len(names)} documents; ours / LlamaIndex IngestionPipeline")
    for step in ours:
        print(
            f"  {step}: {ours[step].seconds:.1f} s / {theirs[step].seconds:.1f} s = "
            f"{ours[step].seconds / theirs[step].seconds:.2f}"
        )
    peak_ours = max(run.peak_rss_mb for run in ours.values())
    peak_theirs = max(run.peak_rss_mb for run in theirs.values())
    print(f"  peak RSS: {peak_ours:.0f} MB / {peak_theirs:.0f} MB = {peak_ours / peak_theirs:.2f}")
    ndcg_ours, ndcg_theirs = report[configured]["ndcg@10"], peer_scores["ndcg@10"]
    print(
        f"  nDCG@10: {ndcg_ours:.4f} ({configured}) / {ndcg_theirs:.4f} (dense) = "
        f"{ndcg_ours / ndcg_theirs:.2f}; ours dense alone {report['dense']['ndcg@10']:.4f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", type=Path, default=SHARED / "eval" / "scifact")
    parser.add_argument("--peer-index", nargs=2, type=Path, metavar=("CORPUS", "STORE"))
    parser.add_argument("--peer-evaluate", nargs=2, type=Path, metavar=("DATASET", "STORE"))
    args = parser.parse_args()
    if args.peer_index:
        peer_index(*args.peer_index)
        return
    if args.peer_evaluate:
        peer_evaluate(*args.peer_evaluate)
        return
    require_shared()
    work = Path(tempfile.mkdtemp(prefix="rag-bench-peer-"))
    try:
        compare(args.dataset, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
