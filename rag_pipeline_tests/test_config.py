from pathlib import Path

import pytest

from rag_pipeline.config import load_settings


def test_home_defaults_to_data_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings.home == tmp_path / "data"
    assert settings.watched_folders == [tmp_path / "data" / "inbox"]


def test_environment_overrides_nested_settings(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_PIPELINE_CHUNKING__MAX_TOKENS", "128")
    monkeypatch.setenv("QDRANT_URL", "http://qdrant.example:6333")
    settings = load_settings(home)
    assert settings.chunking.max_tokens == 128
    assert settings.store.url == "http://qdrant.example:6333"


def test_sources_given_once_are_remembered(home: Path, tmp_path: Path) -> None:
    load_settings(home).remember_sources([tmp_path / "a", tmp_path / "b"])
    assert load_settings(home).watched_folders == [tmp_path / "a", tmp_path / "b"]


def test_home_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_PIPELINE_HOME", str(tmp_path / "elsewhere"))
    assert load_settings().home == tmp_path / "elsewhere"


def test_stage_files_live_in_the_home_unless_a_folder_or_url_is_given_per_workspace(
    home: Path, tmp_path: Path
) -> None:
    assert load_settings(home).stage_root == home.resolve()
    with pytest.raises(ValueError, match="must be absolute"):  # each process starts elsewhere
        load_settings(home, indexing={"stage_url": "shared"})
    folder = load_settings(home, indexing={"stage_url": str(tmp_path / "shared")})
    assert folder.stage_root == tmp_path / "shared"
    workspace = load_settings(home, "acme-1a2b3c", indexing={"stage_url": "s3://bucket/stages"})
    assert str(workspace.stage_root) == "s3://bucket/stages/workspaces/acme-1a2b3c"


def test_a_collection_recorded_before_multilingual_vectors_is_queried_without_them(
    tmp_path: Path,
) -> None:
    settings = load_settings(tmp_path)
    assert settings.embedding.multilingual_model is not None  # on by default
    recorded = settings.vector_models()
    del recorded["embedding"]["multilingual_model"]  # as collections recorded before it
    assert settings.with_vector_models(recorded).embedding.multilingual_model is None
    assert settings.with_vector_models(settings.vector_models()) == settings
