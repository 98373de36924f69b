"""Pictures through the whole pipeline: image files, PDF figures and scans indexed by the CLI
(real Dagster, real Qdrant engine), CLIP with random weights, a tiny random BLIP captioner, and
tesseract; then found by text, by image and on the chat page."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from rag_pipeline.catalog import Catalog
from rag_pipeline.cli import main
from rag_pipeline.config import Settings, load_settings
from rag_pipeline.embedding import SparseVector, SqliteEmbeddingCache
from rag_pipeline.parsing.images import open_picture
from rag_pipeline.store import EmbeddedReplica, VectorModels, points_from_cache
from rag_pipeline.store.schema import DocumentFacts
from rag_pipeline_tests.conftest import Cli, needs_tesseract
from rag_pipeline_tests.documents import pdf_with_figures, photo, scanned_pdf, text_picture
from rag_pipeline_tests.embedding.test_image_models import tiny_captioner
from rag_pipeline_tests.index_state import live_chunks, point_count
from rag_pipeline_tests.test_indexing import _metadata, _query, _status
from serving.preview import preview
from serving.retrieval import Retriever
from serving.server import BackgroundServer

# Every picture is read by OCR too (image files always are).
pytestmark = needs_tesseract


def _picture_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "heron.png").write_bytes(photo(11))
    open_picture(photo(12)).save(folder / "owl.jpg", quality=92)
    text_picture(folder / "notice.png", ["Library closed on Monday", "for the annual inventory"])
    text_picture(folder / "zh.png", ["北京大学图书馆周一闭馆"], fontname="china-s")
    pdf_with_figures(folder / "figures.pdf", pages=3)
    scanned_pdf(folder / "scan.pdf", ["Quarterly maintenance report", "Pump station seven"])
    return folder


@pytest.fixture(scope="session")
def picture_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The image settings of the indexes here: CLIP with random weights (the image extra, which
    .ci/run installs) and a tiny random BLIP captioner, made once per run."""
    pytest.importorskip("open_clip")
    captioner = tiny_captioner(tmp_path_factory.mktemp("blip"))
    return {"clip_model": "ViT-B-32", "clip_pretrained": None, "caption_model": str(captioner)}


def _image_home(
    root: Path, source: Path, images: dict[str, Any], stored: dict[str, Any] | None = None
) -> Path:
    home = root / "home"
    home.mkdir(parents=True)
    (home / "settings.json").write_text(json.dumps({"images": images, **(stored or {})}))
    assert main(["index", "--home", str(home), "--source", str(source)]) == 0
    return home


@pytest.fixture(scope="module")
def pictures_indexed(
    tmp_path_factory: pytest.TempPathFactory, picture_models: dict[str, Any]
) -> Settings:
    """Indexed with the stage files and pictures in another folder, reached through fsspec (as
    an object store would be), by the run and its parser processes; read there by the page."""
    root = tmp_path_factory.mktemp("pictures")
    shared = {"indexing": {"stage_url": (root / "shared").as_uri()}}
    source = _picture_corpus(root / "pictures")
    return load_settings(_image_home(root, source, picture_models, shared))


def _picture_rows(settings: Settings, doc_id: str) -> list[dict[str, Any]]:
    return [row for row in live_chunks(settings.home, doc_id) if row["modality"] == "image"]


def test_every_picture_becomes_a_point_with_page_box_and_caption(
    cli: Cli, pictures_indexed: Settings
) -> None:
    status = _status(cli, pictures_indexed.home)
    assert {row["state"] for row in status.values()} == {"indexed"}, status
    figures = _picture_rows(pictures_indexed, "pictures/figures.pdf")
    assert [(row["page_start"], row["bboxes"][0]["x0"]) for row in figures] == [
        (1, 100.0),
        (2, 100.0),
        (3, 100.0),
    ]
    assert all(row["text"] and row["phash"] for row in figures)  # captioned, hashed
    (heron,) = _picture_rows(pictures_indexed, "pictures/heron.png")
    assert (pictures_indexed.stage_root / heron["image_file"]).is_file()
    assert pictures_indexed.stage_root.protocol == "file"  # fsspec's, not the OS path
    assert not (pictures_indexed.home / "images").exists()
    assert not (pictures_indexed.home / "stages").exists()
    assert _picture_rows(pictures_indexed, "pictures/scan.pdf") == []  # a scan is text


def test_an_image_query_finds_the_identical_picture_first(pictures_indexed: Settings) -> None:
    catalog = Catalog(pictures_indexed)
    store = EmbeddedReplica(pictures_indexed, catalog)
    store.refresh()
    try:
        retriever = Retriever(pictures_indexed, store)
        source = pictures_indexed.watched_folders[0]
        found = retriever.search_by_picture(open_picture((source / "heron.png").read_bytes()))
        assert found[0].payload["doc_id"] == "pictures/heron.png"
        assert found[0].image_score == pytest.approx(1.0, abs=1e-3)
        figure = retriever.search_by_picture(open_picture(photo(2)))[0].payload
        assert (figure["doc_id"], figure["page"], figure["bbox"]) == (
            "pictures/figures.pdf",
            2,
            [100.0, 200.0, 420.0, 440.0],
        )
        # A text query also searches the pictures through CLIP's text tower.
        assert len(retriever.retrieve("a heron").pictures) > 0
    finally:
        store.close()
        catalog.close()


def test_words_in_scans_and_in_chinese_images_are_found_with_their_boxes(
    cli: Cli, pictures_indexed: Settings
) -> None:
    home = pictures_indexed.home
    scan = _query(cli, home, "pump station seven maintenance")[0]
    assert (scan["doc_id"], scan["page"], scan["modality"]) == ("pictures/scan.pdf", 1, "text")
    assert 40 <= scan["bbox"][0] < scan["bbox"][2] <= 555
    notice = _query(cli, home, "图书馆 闭馆")[0]
    assert notice["doc_id"] == "pictures/zh.png" and "图书馆" in notice["text"]
    with Catalog(pictures_indexed) as catalog:
        shown = preview(pictures_indexed, catalog, notice["chunk_id"])
    assert shown.png and shown.png.startswith(b"\x89PNG")  # the image, its words highlighted


def test_a_captioned_picture_is_found_by_its_caption_and_cited_on_its_page(
    cli: Cli, pictures_indexed: Settings
) -> None:
    (figure, *_) = _picture_rows(pictures_indexed, "pictures/figures.pdf")
    hits = _query(cli, pictures_indexed.home, figure["text"], k=8)
    assert "image" in {hit["modality"] for hit in hits}
    with Catalog(pictures_indexed) as catalog:
        shown = preview(pictures_indexed, catalog, figure["chunk_id"])
    assert shown.page == 1 and shown.png  # page 1 rendered, the figure's box highlighted


def test_the_chat_page_shows_found_pictures_and_searches_by_an_uploaded_image(
    pictures_indexed: Settings,
) -> None:
    from gradio_client import Client, handle_file

    with BackgroundServer(pictures_indexed) as server:
        client = Client(server.url + "/", verbose=False)
        try:
            *_, found = client.predict(
                "library inventory", "default", [], [], [], [], "", "", api_name="/ask"
            )
            heron = pictures_indexed.watched_folders[0] / "heron.png"
            evidence, similar = client.predict(
                handle_file(heron), "default", [], [], [], "", "", api_name="/similar_pictures"
            )
            # Each picture drawn by the picture route (which checks who asks), a citation link.
            first = re.search(r"<img src='(/api/picture\?[^']+)'", similar["value"])
            assert first is not None
            drawn = httpx.get(server.url + html.unescape(first.group(1)), timeout=60)
        finally:
            client.close()
    assert found["visible"] and "href='#cite:" in found["value"]  # CLIP's, beside the answer
    assert evidence.index("heron.png") < evidence.index("figures.pdf")
    captions = re.findall(r"<span class='caption'>([^<]+)</span>", similar["value"])
    assert captions[0] == "heron.png · p. 1"
    assert drawn.status_code == 200 and drawn.headers["content-type"] == "image/png"


@pytest.mark.parametrize("stages", ["home", "fsspec"])
def test_an_image_folder_is_indexed_changed_and_deleted_incrementally(
    cli: Cli, tmp_path: Path, stages: str, picture_models: dict[str, Any]
) -> None:
    source = tmp_path / "photos"
    source.mkdir()
    for seed in (1, 2, 3):
        (source / f"{seed}.png").write_bytes(photo(seed))
    shared = {"indexing": {"stage_url": (tmp_path / "shared").as_uri()}}
    home = _image_home(tmp_path, source, picture_models, shared if stages == "fsspec" else None)
    (source / "2.png").write_bytes(photo(20))  # changed
    (source / "3.png").rename(source / "three.png")  # renamed: nothing to embed
    (source / "1.png").unlink()  # deleted
    result = cli("index", "--home", home)
    assert "added 1, changed 1, unchanged 0, deleted 2, failed 0" in result.out, result.out
    changed = _metadata(home, "image_embeddings", "photos/2.png")[0]
    assert (changed["embedded"], changed["cached"]) == (1, 0)
    renamed = _metadata(home, "image_embeddings", "photos/three.png")[0]
    assert (renamed["embedded"], renamed["cached"]) == (0, 1)
    assert set(_status(cli, home)) == {"photos/2.png", "photos/three.png"}
    assert point_count(home, "photos/1.png") == 0 and point_count(home) == 2
    kept = {path.name for path in (load_settings(home).stage_root / "images").rglob("*.png")}
    assert len(kept) == 2  # the deleted and the replaced pictures' files are gone


def test_chunk_rows_written_before_pictures_existed_still_become_text_points(
    tmp_path: Path,
) -> None:
    """A home indexed by an earlier version keeps its catalog rows (no modality, no picture
    fields) for documents whose version did not change; the page rebuilds points from them."""
    row = {
        "chunk_id": "docs/a.md@v1#0",
        "chunk_index": 0,
        "text": "Owls hunt at night.",
        "text_hash": "h0",
        "page_start": None,
        "page_end": None,
        "bboxes": [],
        "section": ["Owls"],
        "token_count": 7,
        "lang": "en",
    }
    cache = SqliteEmbeddingCache(tmp_path / "cache.sqlite")
    models = dataclasses.replace(
        VectorModels.of(load_settings(tmp_path)), dense="dense", sparse="sparse", image=None
    )
    cache.put_many("dense", {"h0": np.ones(4, np.float32).tobytes()})
    sparse = SparseVector(np.array([3]), np.array([0.5], np.float32))
    cache.put_many("sparse", {"h0": sparse.to_bytes()})
    facts = DocumentFacts("docs/a.md", "/docs/a.md", "markdown", "a", "v1", "sha", 0.0)
    (point,) = points_from_cache([row], facts, cache, models)
    cache.close()
    assert point.payload["modality"] == "text" and point.image is None
