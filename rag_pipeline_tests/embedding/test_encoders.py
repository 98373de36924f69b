from pathlib import Path

import numpy as np

from rag_pipeline.config import EmbeddingSettings
from rag_pipeline.embedding import DenseEncoder, SparseEncoder, SqliteEmbeddingCache, ensure_dense
from rag_pipeline.embedding.sparse import segment_cjk


def test_the_offline_default_model_embeds_without_a_model_hub(tmp_path: Path) -> None:
    encoder = DenseEncoder(EmbeddingSettings(), tmp_path)
    vectors = encoder.embed_documents(
        ["The cat sat on the mat.", "A kitten rests on a rug.", "Stock prices fell."]
    )
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-3)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_length_sorted_batches_return_vectors_in_input_order(tmp_path: Path) -> None:
    encoder = DenseEncoder(EmbeddingSettings(batch_size=2), tmp_path)
    texts = ["short", "a much longer text " * 20, "mid length text here", "x"]
    together = encoder.embed_documents(texts)
    one_by_one = np.vstack([encoder.embed_documents([text]) for text in texts])
    assert np.allclose(together, one_by_one, atol=1e-4)


def test_batches_group_texts_of_similar_token_length(tmp_path: Path) -> None:
    encoder = DenseEncoder(EmbeddingSettings(batch_size=2), tmp_path)
    texts = ["long text " * 50, "short", "another long text " * 40, "tiny"]
    assert [sorted(batch.tolist()) for batch in encoder.batches(texts)] == [[1, 3], [0, 2]]


def test_cached_texts_are_not_embedded_again(tmp_path: Path) -> None:
    encoder = DenseEncoder(EmbeddingSettings(), tmp_path)
    cache = SqliteEmbeddingCache(tmp_path / "cache.sqlite")
    first = ensure_dense(encoder, {"h1": "alpha", "h2": "beta"}, cache)
    calls = encoder.calls
    second = ensure_dense(encoder, {"h1": "alpha", "h2": "beta", "h3": "gamma"}, cache)
    assert first == {"h1", "h2"} and second == {"h3"}
    assert encoder.calls == calls + 1
    assert set(cache.get_many(encoder.model_id, ["h1", "h2", "h3"])) == {"h1", "h2", "h3"}


def test_chinese_is_segmented_into_words_for_bm25() -> None:
    segmented = segment_cjk("我们在北京大学学习自然语言处理")
    assert "北京大学" in segmented.split() and "自然语言" in segmented.split()


def test_a_chinese_query_term_matches_inside_an_unspaced_sentence(tmp_path: Path) -> None:
    encoder = SparseEncoder(EmbeddingSettings(), tmp_path)
    document = encoder.embed_documents(["北京大学是中国著名的高等学府，位于海淀区。"])[0]
    query = encoder.embed_query("海淀区")
    assert set(query.indices) & set(document.indices)


def test_sparse_vectors_survive_the_cache_round_trip(tmp_path: Path) -> None:
    from rag_pipeline.embedding import SparseVector

    vector = SparseEncoder(EmbeddingSettings(), tmp_path).embed_documents(["hybrid search works"])[
        0
    ]
    again = SparseVector.from_bytes(vector.to_bytes())
    assert list(again.indices) == list(vector.indices) and np.allclose(again.values, vector.values)
