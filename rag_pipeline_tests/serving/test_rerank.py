"""Rerankers by configuration: a tiny random cross-encoder proves the wiring, not the quality."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import RerankSettings, Settings
from rag_pipeline.embedding.models import OFFLINE_DENSE_MODELS
from rag_pipeline.store import EmbeddedReplica
from serving.rerank import FastembedReranker, RerankError, TransformersReranker, load_reranker
from serving.retrieval import Retriever

TOKENIZER_FILES = next(iter(OFFLINE_DENSE_MODELS.values())).tokenizer_files


def tiny_cross_encoder(folder: Path) -> Path:
    """A random 2-layer BERT sequence classifier with the MiniLM tokenizer, saved to ``folder``."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
        vocab_size=30522,
    )
    transformers.BertForSequenceClassification(config).eval().save_pretrained(folder)
    transformers.AutoTokenizer.from_pretrained(TOKENIZER_FILES).save_pretrained(folder)
    return folder


def onnx_cross_encoder(source: Path, folder: Path) -> Path:
    """The same model exported to ONNX, in the folder layout fastembed loads."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("onnx")
    model = transformers.AutoModelForSequenceClassification.from_pretrained(source).eval()
    model.config.return_dict = False
    tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    sample = tokenizer(["a question"], ["a passage"], return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    (folder / "onnx").mkdir(parents=True)
    torch.onnx.export(
        model,
        tuple(sample[name] for name in names),
        str(folder / "onnx" / "model.onnx"),
        input_names=names,
        output_names=["logits"],
        dynamic_axes={name: {0: "batch", 1: "sequence"} for name in names}
        | {"logits": {0: "batch"}},
        opset_version=18,
        dynamo=False,
    )
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        shutil.copy(source / name, folder / name)
    return folder


TEXTS = [
    "Owls hunt at night.",
    "Herons stand still in shallow water.",
    "The river floods in spring.",
    "Kingfishers dive from a perch.",
]


def test_a_transformers_cross_encoder_scores_question_passage_pairs(tmp_path: Path) -> None:
    folder = tiny_cross_encoder(tmp_path / "tiny-ce")
    reranker = TransformersReranker(RerankSettings(model=str(folder), batch_size=3), tmp_path)
    scores = reranker.score("when do owls hunt", TEXTS)
    assert len(scores) == 4 and len(set(scores)) == 4  # batches of 3 and 1, all scored
    assert scores == pytest.approx(reranker.score("when do owls hunt", TEXTS))


def test_a_fastembed_cross_encoder_from_a_local_onnx_folder_gives_the_same_scores(
    tmp_path: Path,
) -> None:
    source = tiny_cross_encoder(tmp_path / "tiny-ce")
    folder = onnx_cross_encoder(source, tmp_path / "tiny-ce-onnx")
    settings = RerankSettings(model=str(folder))
    onnx_scores = FastembedReranker(settings, tmp_path).score("owls", TEXTS)
    torch_scores = TransformersReranker(RerankSettings(model=str(source)), tmp_path).score(
        "owls", TEXTS
    )
    assert onnx_scores == pytest.approx(torch_scores, abs=1e-4)


def test_auto_picks_fastembed_for_an_onnx_folder_and_transformers_otherwise(
    tmp_path: Path, indexed: Settings
) -> None:
    source = tiny_cross_encoder(tmp_path / "tiny-ce")
    folder = onnx_cross_encoder(source, tmp_path / "tiny-ce-onnx")
    as_onnx = load_reranker(
        indexed.model_copy(update={"rerank": RerankSettings(model=str(folder))})
    )
    as_torch = load_reranker(
        indexed.model_copy(update={"rerank": RerankSettings(model=str(source))})
    )
    assert isinstance(as_onnx, FastembedReranker) and isinstance(as_torch, TransformersReranker)
    assert load_reranker(indexed) is None  # none configured


def test_the_final_order_follows_the_rerankers_scores(
    tmp_path: Path, indexed: Settings, catalog: Catalog
) -> None:
    folder = tiny_cross_encoder(tmp_path / "tiny-ce")
    settings = indexed.model_copy(update={"rerank": RerankSettings(model=str(folder))})
    reranker = load_reranker(settings)
    replica = EmbeddedReplica(settings, catalog)
    try:
        replica.refresh()
        retrieval = Retriever(settings, replica, reranker).retrieve("owls and herons", top_k=3)
    finally:
        replica.close()
    assert retrieval.reranker == str(folder)
    scores = [passage.rerank_score for passage in retrieval.passages]
    assert scores == sorted(scores, reverse=True)
    pool = [c for c in retrieval.candidates if c.rerank_score is not None]
    assert len(pool) == len(retrieval.candidates)  # every candidate (fewer than 50) was scored
    assert retrieval.passages[0].rerank_score == max(c.rerank_score for c in pool)


def test_a_reranker_that_cannot_load_says_why(tmp_path: Path, indexed: Settings) -> None:
    pytest.importorskip("transformers")
    missing = indexed.model_copy(
        update={"rerank": RerankSettings(model=str(tmp_path / "nowhere"), backend="transformers")}
    )
    with pytest.raises(RerankError, match="cannot load the reranker"):
        load_reranker(missing)
