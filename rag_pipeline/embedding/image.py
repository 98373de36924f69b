"""Pictures → vectors (OpenCLIP) and → captions (BLIP through transformers).

Both need torch (the ``image`` extra) and are loaded only when configured. No trained weights
can be downloaded on an offline machine: ``images.clip_pretrained = None`` builds the real
architecture with random weights, seeded, so every process gets the same model (tests).
"""

from __future__ import annotations

import importlib.util
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from upath import UPath

from rag_pipeline.config import ImageSettings
from rag_pipeline.embedding.cache import EmbeddingCache

if TYPE_CHECKING:
    from PIL.Image import Image

logger = logging.getLogger(__name__)

_RANDOM_SEED = 0
_CAPTION_TOKENS = 30


class ImageModelError(Exception):
    """An image model cannot be loaded; the message says what to install or configure."""


def _require(module: str, extra: str = "image") -> None:
    if importlib.util.find_spec(module) is None:
        raise ImageModelError(
            f"{module} is not installed: pip install 'rag-pipeline[{extra}]' (with torch's CPU "
            "build installed first)"
        )


def clip_model_id(settings: ImageSettings) -> str | None:
    """What identifies the image vectors: architecture and weights (None: no image vectors)."""
    if not settings.clip_model:
        return None
    return f"open_clip/{settings.clip_model}/{settings.clip_pretrained or 'random'}"


def clip_dim(settings: ImageSettings) -> int | None:
    """Size of the image vectors, read from OpenCLIP's model config without loading torch."""
    if not settings.clip_model:
        return None
    spec = importlib.util.find_spec("open_clip")
    if spec is None or not spec.submodule_search_locations:
        _require("open_clip")
    assert spec is not None and spec.submodule_search_locations
    config = Path(spec.submodule_search_locations[0]) / "model_configs"
    path = config / f"{settings.clip_model}.json"
    if path.exists():
        return int(json.loads(path.read_text())["embed_dim"])
    return ClipEncoder(settings).dim  # an hf-hub: name or a custom config: ask the model


class ClipEncoder:
    """One CLIP model: pictures through its image tower, queries through its text tower."""

    def __init__(self, settings: ImageSettings) -> None:
        self.settings = settings
        model_id = clip_model_id(settings)
        if model_id is None:
            raise ImageModelError("no CLIP model configured (images.clip_model)")
        self.model_id = model_id

    @cached_property
    def _loaded(self) -> tuple[Any, Callable[[Image], Any], Callable[[list[str]], Any]]:
        _require("open_clip")
        import open_clip
        import torch

        pretrained = self.settings.clip_pretrained
        if pretrained is None:
            logger.warning("CLIP with random weights: image search results mean nothing")
            torch.manual_seed(_RANDOM_SEED)
        try:
            model, _, preprocess = open_clip.create_model_and_transforms(
                self.settings.clip_model, pretrained=pretrained
            )
        except Exception as error:  # unknown name, no network for the weights, bad file
            raise ImageModelError(
                f"cannot load CLIP {self.settings.clip_model} / {pretrained}: {error}"
            ) from error
        model.eval()
        return model, preprocess, open_clip.get_tokenizer(self.settings.clip_model)

    @property
    def dim(self) -> int:
        return int(self._loaded[0].visual.output_dim)

    def embed_pictures(self, pictures: Sequence[Image]) -> np.ndarray:
        """Unit vectors, one row per picture."""
        import torch

        model, preprocess, _ = self._loaded
        rows = []
        for start in range(0, len(pictures), self.settings.batch_size):
            batch = torch.stack(
                [preprocess(p) for p in pictures[start : start + self.settings.batch_size]]
            )
            with torch.inference_mode():
                rows.append(model.encode_image(batch, normalize=True).float().numpy())
        return np.concatenate(rows) if rows else np.zeros((0, 0), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """A text query as a unit vector in the pictures' space (the text tower)."""
        import torch

        model, _, tokenizer = self._loaded
        with torch.inference_mode():
            return model.encode_text(tokenizer([text]), normalize=True).float().numpy()[0]


class Captioner:
    """A BLIP captioning model: a short description per picture, so words find it."""

    def __init__(self, settings: ImageSettings) -> None:
        if not settings.caption_model:
            raise ImageModelError("no captioning model configured (images.caption_model)")
        self.settings = settings
        self.model_id = f"caption/{settings.caption_model}"

    @cached_property
    def _loaded(self) -> tuple[Any, Any]:
        _require("transformers")
        from transformers import BlipForConditionalGeneration, BlipProcessor

        name = self.settings.caption_model
        try:
            return (
                BlipProcessor.from_pretrained(name),
                BlipForConditionalGeneration.from_pretrained(name).eval(),
            )
        except Exception as error:
            raise ImageModelError(f"cannot load the captioning model {name}: {error}") from error

    def caption(self, pictures: Sequence[Image]) -> list[str]:
        import torch

        processor, model = self._loaded
        captions: list[str] = []
        for start in range(0, len(pictures), self.settings.batch_size):
            batch = list(pictures[start : start + self.settings.batch_size])
            inputs = processor(images=batch, return_tensors="pt")
            with torch.inference_mode():
                tokens = model.generate(**inputs, max_new_tokens=_CAPTION_TOKENS)
            captions.extend(
                " ".join(text.split())
                for text in processor.batch_decode(tokens, skip_special_tokens=True)
            )
        return captions


def _pictures(paths: Sequence[UPath]) -> list[Image]:
    from PIL import Image

    pictures = []
    for path in paths:
        with path.open("rb") as file, Image.open(file) as picture:
            pictures.append(picture.convert("RGB"))
    return pictures


def ensure_picture_vectors(
    encoder: ClipEncoder,
    pictures: Mapping[str, UPath],
    cache: EmbeddingCache,
    progress: Callable[[int, int], None] | None = None,
) -> set[str]:
    """A CLIP vector in the cache for every ``sha256 → picture file``; the hashes it embedded."""
    known = cache.get_many(encoder.model_id, pictures)
    missing = [key for key in pictures if key not in known]
    step = encoder.settings.batch_size * 4
    for start in range(0, len(missing), step):
        batch = missing[start : start + step]
        vectors = encoder.embed_pictures(_pictures([pictures[key] for key in batch]))
        cache.put_many(
            encoder.model_id,
            {
                key: row.astype(np.float32).tobytes()
                for key, row in zip(batch, vectors, strict=True)
            },
        )
        if progress:
            progress(start + len(batch), len(missing))
    return set(missing)


def ensure_captions(
    captioner: Captioner, pictures: Mapping[str, UPath], cache: EmbeddingCache
) -> dict[str, str]:
    """``sha256 → caption`` for every picture, captioning only those not cached."""
    known = cache.get_many(captioner.model_id, pictures)
    missing = [key for key in pictures if key not in known]
    if missing:
        captions = captioner.caption(_pictures([pictures[key] for key in missing]))
        fresh = {key: caption.encode() for key, caption in zip(missing, captions, strict=True)}
        cache.put_many(captioner.model_id, fresh)
        known |= fresh
    return {key: value.decode() for key, value in known.items()}
