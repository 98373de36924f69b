"""Image models by configuration: the real OpenCLIP architecture and a tiny BLIP with random
weights prove the wiring (no trained weights can be downloaded here); their outputs mean nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from rag_pipeline.config import ImageSettings
from rag_pipeline.embedding.cache import SqliteEmbeddingCache
from rag_pipeline.embedding.image import (
    Captioner,
    ClipEncoder,
    ImageModelError,
    clip_dim,
    ensure_captions,
)
from rag_pipeline.embedding.models import OFFLINE_DENSE_MODELS
from rag_pipeline.parsing.images import open_picture
from rag_pipeline_tests.documents import photo

RANDOM_CLIP = ImageSettings(clip_model="ViT-B-32", clip_pretrained=None)


@pytest.fixture
def open_clip() -> None:
    """OpenCLIP comes with the ``image`` extra (with torch); .ci/run installs it."""
    pytest.importorskip("open_clip")


def tiny_captioner(folder: Path) -> Path:
    """A random one-layer BLIP captioner with the MiniLM (BERT) tokenizer, saved to ``folder``."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    layers = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
    config = transformers.BlipConfig(
        text_config={**layers, "intermediate_size": 64, "encoder_hidden_size": 32},
        vision_config={**layers, "intermediate_size": 64, "image_size": 64, "patch_size": 16},
        projection_dim=32,
    )
    transformers.BlipForConditionalGeneration(config).eval().save_pretrained(folder)
    tokenizer_files = next(iter(OFFLINE_DENSE_MODELS.values())).tokenizer_files
    transformers.BlipProcessor(
        image_processor=transformers.BlipImageProcessor(size={"height": 64, "width": 64}),
        tokenizer=transformers.AutoTokenizer.from_pretrained(tokenizer_files),
    ).save_pretrained(folder)
    return folder


@pytest.mark.usefixtures("open_clip")
def test_the_image_vector_size_is_read_without_loading_the_model() -> None:
    assert clip_dim(RANDOM_CLIP) == 512
    assert clip_dim(ImageSettings()) is None  # no CLIP configured: no image vectors


@pytest.mark.usefixtures("open_clip")
def test_random_clip_weights_are_the_same_in_every_load_so_queries_match_the_index() -> None:
    pictures = [open_picture(photo(seed)) for seed in (1, 2)]
    first = ClipEncoder(RANDOM_CLIP).embed_pictures(pictures)
    again = ClipEncoder(RANDOM_CLIP).embed_pictures(pictures)
    assert first.shape == (2, 512)
    np.testing.assert_allclose(first, again, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    query = ClipEncoder(RANDOM_CLIP).embed_query("a heron in shallow water")
    assert query.shape == (512,)


@pytest.mark.usefixtures("open_clip")
def test_an_unknown_clip_model_fails_with_a_reason() -> None:
    encoder = ClipEncoder(ImageSettings(clip_model="ViT-Nonexistent", clip_pretrained=None))
    with pytest.raises(ImageModelError, match="ViT-Nonexistent"):
        encoder.embed_query("anything")


def test_captions_come_from_the_configured_model_and_are_cached(tmp_path: Path) -> None:
    settings = ImageSettings(caption_model=str(tiny_captioner(tmp_path / "blip")))
    files = {}
    for seed in (1, 2):
        files[f"picture-{seed}"] = tmp_path / f"{seed}.png"
        files[f"picture-{seed}"].write_bytes(photo(seed))
    cache = SqliteEmbeddingCache(tmp_path / "cache.sqlite")
    captions = ensure_captions(Captioner(settings), files, cache)
    assert set(captions) == set(files) and all(isinstance(c, str) for c in captions.values())
    shutil.rmtree(tmp_path / "blip")  # cached captions need no model
    assert ensure_captions(Captioner(settings), files, cache) == captions
    cache.close()
