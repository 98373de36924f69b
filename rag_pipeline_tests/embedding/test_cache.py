import hashlib
from pathlib import Path

import pytest

from rag_pipeline.config import load_settings
from rag_pipeline.embedding import open_embedding_cache
from rag_pipeline_tests.conftest import Cli


@pytest.fixture(params=["sqlite", "postgres"])
def catalog_url(request: pytest.FixtureRequest) -> str | None:
    return request.getfixturevalue("postgres_url") if request.param == "postgres" else None


def test_two_workers_caching_the_same_text_keep_one_vector(
    home: Path, catalog_url: str | None
) -> None:
    settings = load_settings(home, catalog={"url": catalog_url})
    first, second = open_embedding_cache(settings), open_embedding_cache(settings)
    try:
        first.put_many("model-a", {"h1": b"\x01\x02", "h2": b"\x03"})
        second.put_many("model-a", {"h2": b"\x03", "h3": b"\x04"})  # h2 embedded by both
        assert second.get_many("model-a", ["h1", "h2", "h3", "h4"]) == {
            "h1": b"\x01\x02",
            "h2": b"\x03",
            "h3": b"\x04",
        }
        assert first.get_many("model-b", ["h1"]) == {}  # keyed by model too
    finally:
        first.close()
        second.close()
    on_disk = (home / "cache" / "embeddings.sqlite").exists()
    assert on_disk == (catalog_url is None)  # on PostgreSQL, beside the catalog


def test_with_the_catalog_on_postgresql_workers_share_the_embedding_cache(
    cli: Cli, home: Path, source: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_PIPELINE_CATALOG__URL", postgres_url)
    (source / "note.md").write_text("# Herons\n\nHerons wade in shallow water.", encoding="utf-8")
    assert cli("index", "--home", home, "--source", source).code == 0
    # Another worker's home (another machine's disk) finds the vectors in PostgreSQL.
    other = load_settings(home.parent / "other-worker", catalog={"url": postgres_url})
    mine = load_settings(home)
    cache = open_embedding_cache(other)
    try:
        from rag_pipeline.catalog import Catalog

        with Catalog(mine) as catalog:
            live = catalog.live_collection()
            assert live is not None
            [row] = [r for batch in catalog.chunk_batches(live.name, "docs/note.md") for r in batch]
        found = cache.get_many(mine.embedding.dense_model, [row["text_hash"]])
        assert list(found) == [row["text_hash"]]
    finally:
        cache.close()
    assert not (home / "cache" / "embeddings.sqlite").exists()


def test_the_cache_file_holds_dense_vectors_in_little_more_than_their_bytes(home: Path) -> None:
    """A million documents' vectors are millions of 1.5 KB rows: the file must not waste a page
    on each (384 float32 values, keyed by random hashes as texts' are)."""
    cache = open_embedding_cache(load_settings(home))
    vectors = {hashlib.sha256(str(n).encode()).hexdigest(): bytes(1536) for n in range(400)}
    try:
        cache.put_many("model-a", vectors)
    finally:
        cache.close()
    payload = sum(len(vector) for vector in vectors.values())
    assert (home / "cache" / "embeddings.sqlite").stat().st_size < 1.5 * payload
