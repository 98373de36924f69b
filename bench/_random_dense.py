"""A dense model with random weights, for benchmarks that measure everything but the model.

BERT's embeddings with all-MiniLM-L6-v2's width (384-dimensional vectors, the same as the default
model's) and no transformer layer, its tokenizer, exported to ONNX in the folder layout
fastembed loads; a home uses it as a user configures any local ONNX model:
``embedding.dense_model`` names fastembed's description (mean pooling, normalized, 384
dimensions), ``embedding.dense_model_path`` the folder. Its vectors carry no meaning; its cost
is the tokenizer's and the runtime's call.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

from rag_pipeline.config import DEFAULT_DENSE_MODEL
from rag_pipeline.embedding.models import OFFLINE_DENSE_MODELS

# fastembed's description of this name (384 dimensions, ``model.onnx``, mean pooling) is what
# loads the folder; no file of the real model is read.
DESCRIBED_AS = "sentence-transformers/all-MiniLM-L6-v2"
# No transformer layer: BERT's embeddings, layer norm and mean pooling, so the bench's time is
# the pipeline's and not the model's (a one-layer model still took most of its wall time).
LAYERS = 0
LABEL = (
    f"random-weight BERT with {LAYERS} transformer layers, 384 dimensions, "
    "all-MiniLM-L6-v2's tokenizer (ONNX)"
)


def build_random_dense_model(folder: Path, seed: int = 0) -> dict[str, str]:
    """Write the model into ``folder`` (once) and return the settings that select it."""
    if not (folder / "model.onnx").exists():
        _export(folder, seed)
    return {
        "RAG_PIPELINE_EMBEDDING__DENSE_MODEL": DESCRIBED_AS,
        "RAG_PIPELINE_EMBEDDING__DENSE_MODEL_PATH": str(folder),
    }


def _export(folder: Path, seed: int) -> None:
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.BertConfig(
        hidden_size=384,
        num_hidden_layers=LAYERS,
        num_attention_heads=12,
        intermediate_size=1536,
        vocab_size=30522,
    )

    class LastHiddenState(torch.nn.Module):  # BertModel's own forward does not trace by position
        def __init__(self) -> None:
            super().__init__()
            self.bert = transformers.BertModel(config)

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> torch.Tensor:
            return self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer_files = OFFLINE_DENSE_MODELS[DEFAULT_DENSE_MODEL].tokenizer_files
    for path in tokenizer_files.iterdir():
        shutil.copy(path, folder / path.name)
    config.to_json_file(folder / "config.json")  # this model's, not MiniLM's 6 layers
    names = ["input_ids", "attention_mask", "token_type_ids"]
    sample = {name: torch.ones((1, 8), dtype=torch.int64) for name in names}
    # The tracer warns of branches it freezes; they are fixed in this encoder.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            LastHiddenState().eval(),
            tuple(sample[name] for name in names),
            str(folder / "model.onnx"),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={
                name: {0: "batch", 1: "sequence"} for name in [*names, "last_hidden_state"]
            },
            opset_version=18,
            dynamo=False,
        )
