"""BM25's punctuation set, saved once instead of made by every process (a fastembed internal)."""

from pathlib import Path

import pytest
from fastembed.common.utils import get_all_punctuation
from fastembed.sparse import bm25

from rag_pipeline.config import EmbeddingSettings
from rag_pipeline.embedding import SparseEncoder, punctuation
from rag_pipeline.embedding.models import models_folder


def test_bm25_gets_the_punctuation_fastembed_computes_and_saves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(punctuation, "_known", None)
    assert callable(bm25.get_all_punctuation)  # the name fastembed's BM25 calls
    encoder = SparseEncoder(EmbeddingSettings(), tmp_path)
    assert encoder.model.model.punctuation == get_all_punctuation()
    saved = punctuation.punctuation_file(models_folder(tmp_path))
    assert saved.is_file()
    assert bm25.get_all_punctuation.reads_saved_set


def test_a_saved_set_is_read_not_computed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(punctuation, "_known", None)
    punctuation._punctuation(tmp_path, lambda: {"!", "?"})
    monkeypatch.setattr(punctuation, "_known", None)

    def computed() -> set[str]:
        raise AssertionError("computed again")

    assert punctuation._punctuation(tmp_path, computed) == {"!", "?"}


def test_an_unreadable_saved_set_is_computed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(punctuation, "_known", None)
    punctuation.punctuation_file(tmp_path).write_text("not json")
    assert punctuation._punctuation(tmp_path, lambda: {"!"}) == {"!"}
