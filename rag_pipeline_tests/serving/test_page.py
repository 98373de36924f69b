"""The real page on 127.0.0.1: driven by gradio_client, over HTTP, and in headless Chromium."""

from __future__ import annotations

import io
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx
import pytest
from PIL import Image

from rag_pipeline.cli import main
from rag_pipeline.config import Settings, load_settings
from rag_pipeline_tests.conftest import ask_on_the_page, open_workspace
from rag_pipeline_tests.index_state import live_chunks
from rag_pipeline_tests.serving.conftest import write_corpus
from serving.history import History
from serving.server import BackgroundServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture(scope="module")
def served(indexed: Settings) -> Iterator[str]:
    with BackgroundServer(indexed) as server:
        yield server.url


def test_the_gradio_client_gets_a_streamed_cited_answer(served: str) -> None:
    from gradio_client import Client

    client = Client(served + "/", verbose=False)
    try:
        job = client.submit(
            "When do owls hunt?", "default", [], [], [], [], "", "", api_name="/ask"
        )
        states = list(job)
        chat, _, _, evidence, pictures = job.result()
    finally:
        client.close()
    answer = chat[-1]["content"]
    answer_text = answer if isinstance(answer, str) else "".join(p.get("text", "") for p in answer)
    assert "Owls hunt at night" in answer_text and "#cite:" in answer_text
    assert "guide.md" in evidence and "class='citation'" in evidence
    assert pictures["visible"] is False  # no pictures indexed
    assert len(states) >= 1


def test_a_kept_conversation_reopens_with_its_evidence_and_can_be_deleted(
    served: str, indexed: Settings
) -> None:
    from gradio_client import Client

    def kept() -> dict[str, str]:
        history = History(indexed.home)
        try:
            return {c.title: c.id for c in history.conversations("local")}
        finally:
            history.close()

    client = Client(served + "/", verbose=False)
    try:
        client.predict("Where do herons stand?", "default", [], [], [], [], "", "", api_name="/ask")
        conversation = kept()["Where do herons stand?"]
        chat, evidence = client.predict(
            conversation, "default", api_name="/open"
        )  # states stay inside
        assert [message["role"] for message in chat] == ["user", "assistant"]
        assert "guide.md" in evidence
        client.predict("default", api_name="/delete")  # deletes the session's open conversation
    finally:
        client.close()
    assert conversation not in kept().values()


def test_the_search_api_answers_over_http(served: str) -> None:
    response = httpx.get(f"{served}/api/search", params={"q": "三峡大坝在哪里", "k": 3})
    assert response.status_code == 200
    documents = response.json()
    assert documents[0]["id"] == "docs/rivers.txt"
    assert {"id", "title", "url", "chunks", "extra"} <= documents[0].keys()
    # The original file's route, in the workspace searched (as the README shows it).
    assert documents[0]["url"] == "/api/file?doc_id=docs/rivers.txt&workspace=default"
    assert httpx.get(f"{served}/api/search", params={"q": " "}).status_code == 400


@pytest.mark.parametrize(
    "doc_id",
    ["../../../../etc/passwd", "/etc/passwd", "docs/../../home/settings.json", "docs/nothing.md"],
)
def test_the_file_link_refuses_anything_but_an_indexed_document(served: str, doc_id: str) -> None:
    response = httpx.get(f"{served}/api/file", params={"doc_id": doc_id})
    assert response.status_code == 404
    raw = httpx.get(f"{served}/api/file?doc_id={quote(doc_id, safe='/.')}")
    assert raw.status_code == 404 and b"root:" not in raw.content


def test_the_file_link_serves_an_indexed_document(served: str) -> None:
    response = httpx.get(f"{served}/api/file", params={"doc_id": "docs/guide.md"})
    assert response.status_code == 200 and b"Owls hunt at night" in response.content
    assert response.headers["content-disposition"].startswith("attachment")


def test_a_pdf_citation_preview_is_a_png_with_the_page(served: str, indexed: Settings) -> None:
    chunk = live_chunks(indexed.home, "docs/report.pdf")[0]["chunk_id"]
    response = httpx.get(f"{served}/api/preview", params={"chunk_id": chunk})
    assert response.status_code == 200 and response.headers["content-type"] == "image/png"
    assert _has_highlight(Image.open(io.BytesIO(response.content)).convert("RGB"))


def test_in_a_browser_a_cited_answer_opens_its_highlighted_page(
    served: str, browser: Browser
) -> None:
    from playwright.sync_api import expect

    page = browser.new_page()
    page.goto(served + "/")
    open_workspace(page)
    ask_on_the_page(page, "Which product codes does hybrid search still find?")
    citation = page.locator("#evidence a.citation").first
    citation.wait_for(timeout=60_000)
    assert "report.pdf" in page.locator("#evidence").inner_text()
    assert page.locator("#chat a[href^='#cite:']").count() >= 1
    citation.click()
    image = page.locator("#preview-image img")
    image.wait_for(timeout=30_000)
    drawn = image.get_attribute("src") or ""
    assert drawn.startswith("/api/preview?chunk_id=")  # drawn by the route, not Gradio's cache
    assert page.locator("#preview-image a").get_attribute("href") == drawn  # opens it alone
    with httpx.Client(base_url=served) as http:
        png = http.get(drawn).content
    assert _has_highlight(Image.open(io.BytesIO(png)).convert("RGB"))
    assert "page" in page.locator("#preview-text").inner_text()
    assert page.locator("#original-file").get_attribute("href").startswith("/api/file")
    # The next answer's first citation replaces the page shown: a text file's passage.
    ask_on_the_page(page, "When do owls hunt?")
    expect(page.locator("#preview-text")).to_contain_text("docs/guide.md", timeout=60_000)
    expect(page.locator("#preview-image")).to_be_hidden()
    page.locator("#new-conversation").click()  # a fresh chat: nothing previewed
    expect(page.locator("#preview-text")).to_have_text("", timeout=30_000)


def _has_highlight(image: Image.Image) -> bool:
    """Whether the page shows the amber highlight (blank paper under it turns amber)."""
    small = image.resize((image.width // 4, image.height // 4))
    return any(r > 230 and 190 < g < 250 and b < 200 for r, g, b in small.getdata())


def test_the_page_answers_while_an_indexing_run_writes_and_shows_its_result(
    tmp_path: Path, index_process: Callable[[Path], subprocess.Popen[str]]
) -> None:
    source = write_corpus(tmp_path / "docs")
    home = tmp_path / "home"
    assert main(["index", "--home", str(home), "--source", str(source)]) == 0
    settings = load_settings(home, serving={"refresh_seconds": 0.5})
    with BackgroundServer(settings) as server:
        (source / "storks.md").write_text("# Storks\n\nStorks nest on rooftops.", "utf-8")
        shutil.copy(source / "report.pdf", source / "report-copy.pdf")
        run = index_process(home)
        answered = 0
        while run.poll() is None:
            response = httpx.get(f"{server.url}/api/search", params={"q": "owls"}, timeout=30)
            assert response.status_code == 200, response.text
            answered += 1
        assert run.returncode == 0 and answered > 0
        finished = time.monotonic()
        while time.monotonic() - finished < 30:
            found = httpx.get(f"{server.url}/api/search", params={"q": "storks nest"}).json()
            if found and found[0]["id"] == "docs/storks.md":
                break
            time.sleep(0.2)
        else:
            pytest.fail("the new document did not show up within 30 s of the run's end")
