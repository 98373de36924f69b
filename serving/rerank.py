"""Cross-encoder rerankers: fastembed's ONNX ones, or any transformers sequence classifier.

A reranker reads the question and a passage together and scores how well the passage answers
it, which orders the fused candidates better than either vector alone. Which one is a setting
(``rerank.model``): a fastembed name, a transformers model id, or a local folder of either.
With none configured, the fused order stands.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rag_pipeline.config import RerankSettings, Settings
from rag_pipeline.embedding import models_folder

if TYPE_CHECKING:
    from fastembed.rerank.cross_encoder import TextCrossEncoder


class RerankError(RuntimeError):
    """The configured reranker cannot be loaded or run; the message says why."""


class Reranker(Protocol):
    name: str

    def score(self, query: str, texts: list[str]) -> list[float]:
        """One relevance score per text, higher is better, in the order given."""


def load_reranker(settings: Settings) -> Reranker | None:
    """The configured reranker, or None when there is none."""
    config = settings.rerank
    if not config.model:
        return None
    backend = config.backend
    if backend == "auto":
        backend = "fastembed" if _is_fastembed_model(config.model) else "transformers"
    try:
        if backend == "fastembed":
            return FastembedReranker(config, settings.root)
        return TransformersReranker(config, settings.root)
    except ImportError as error:
        raise RerankError(
            f"the {backend} reranker needs a package that is not installed ({error.name}): "
            'pip install -e ".[rerank]"'
        ) from error
    except Exception as error:  # model hubs, missing files and bad configs raise many types
        raise RerankError(f"cannot load the reranker {config.model!r}: {error}") from error


def _is_fastembed_model(model: str) -> bool:
    folder = Path(model).expanduser()
    if folder.is_dir():
        return any(folder.rglob("*.onnx"))
    from fastembed.rerank.cross_encoder import TextCrossEncoder

    return model in {
        description["model"] for description in TextCrossEncoder.list_supported_models()
    }


class FastembedReranker:
    def __init__(self, settings: RerankSettings, home: Path) -> None:
        self.name = settings.model or ""
        self.batch_size = settings.batch_size
        self._model = _load_fastembed(self.name, home)

    def score(self, query: str, texts: list[str]) -> list[float]:
        return [float(s) for s in self._model.rerank(query, texts, batch_size=self.batch_size)]


def _load_fastembed(model: str, home: Path) -> TextCrossEncoder:
    from fastembed.common.model_description import ModelSource
    from fastembed.rerank.cross_encoder import TextCrossEncoder

    folder = Path(model).expanduser()
    if not folder.is_dir():
        return TextCrossEncoder(model, cache_dir=str(models_folder(home) / "fastembed"))
    # A local folder: register it under its own name, with the ONNX file it holds.
    name = f"local/{folder.resolve().name}"
    onnx_file = next(folder.rglob("*.onnx")).relative_to(folder).as_posix()
    known = {description["model"] for description in TextCrossEncoder.list_supported_models()}
    if name not in known:
        TextCrossEncoder.add_custom_model(
            model=name, sources=ModelSource(hf=name), model_file=onnx_file
        )
    return TextCrossEncoder(name, specific_model_path=str(folder))


class TransformersReranker:
    """A transformers sequence classifier scoring (question, passage) pairs on the CPU."""

    def __init__(self, settings: RerankSettings, home: Path) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.name = settings.model or ""
        self.batch_size = settings.batch_size
        options: dict[str, Any] = {"cache_dir": str(models_folder(home) / "transformers")}
        self._tokenizer = AutoTokenizer.from_pretrained(self.name, **options)
        self._model = AutoModelForSequenceClassification.from_pretrained(self.name, **options)
        self._model.eval()
        if self._tokenizer.pad_token is None:  # decoder-based rerankers (Qwen3) have none
            self._tokenizer.pad_token = self._tokenizer.eos_token
            self._model.config.pad_token_id = self._tokenizer.pad_token_id
        self._torch = torch

    def score(self, query: str, texts: list[str]) -> list[float]:
        scores: list[float] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            inputs = self._tokenizer(
                [query] * len(batch),
                batch,
                padding=True,
                truncation=True,
                max_length=512,
                return_tensors="pt",
            )
            with self._torch.inference_mode():
                logits = self._model(**inputs).logits
            # One label: the score itself; two or more: the last (the "relevant" class).
            scores.extend(logits[:, -1].float().tolist())
        return scores
