"""A document taken offline (archived, rejected) is offline on the page too, in Chromium through
the real server: its page picture is refused to its readers and to other workspaces' users but
shown to those who may govern it, an old citation of it says it was taken offline, and its
readers no longer find it in Sources, the filters or the count, where a governor sees it
marked."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from rag_pipeline.catalog import Catalog
from rag_pipeline.cli import main
from rag_pipeline.config import Settings, load_settings
from rag_pipeline.workspaces import create_workspace
from rag_pipeline_tests.conftest import ask_on_the_page, open_workspace, signed_in, workspace_card
from rag_pipeline_tests.index_state import live_chunks
from serving.access import add_user
from serving.preview import DOCUMENT_OFFLINE, PASSAGE_OFFLINE, PreviewError, preview
from serving.server import BackgroundServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser

REPORT = "docs/report.pdf"


@dataclass(frozen=True)
class Served:
    url: str
    home: Path


@pytest.fixture(scope="module")
def served(indexed: Settings) -> Iterator[Served]:
    """The corpus served to a reader and an editor (who governs) of the default workspace, and
    an outsider, who uses another workspace only (passwords: <name>-password)."""
    home = indexed.home
    elsewhere = create_workspace(indexed, "Elsewhere")
    add_user(home, "reader", "reader-password", ["default"])
    add_user(home, "editor", "editor-password", ["default"], ["default"])
    add_user(home, "outsider", "outsider-password", [elsewhere.id])
    with BackgroundServer(load_settings(home)) as server:
        yield Served(server.url, home)


def _status(served: Served, drawn: str, user: str) -> int:
    auth = (user, f"{user}-password")
    return httpx.get(served.url + drawn, auth=auth, timeout=60).status_code


def _taken(served: Served, state: str, doc_id: str, *chunk: str) -> None:
    """``rag-pipeline <state> doc_id [--chunk N]`` run on the served home."""
    assert main([state, doc_id, *chunk, "--home", str(served.home)]) == 0


def test_an_archived_documents_page_picture_is_refused_to_readers_and_outsiders_not_governors(
    served: Served, browser: Browser
) -> None:
    from playwright.sync_api import expect

    page = signed_in(browser, served.url, "reader", "reader-password")
    try:
        open_workspace(page)
        ask_on_the_page(page, "Which product codes does hybrid search still find?")
        page.locator("#evidence a.citation").first.click(timeout=60_000)
        image = page.locator("#preview-image img")
        image.wait_for(timeout=30_000)
        drawn = image.get_attribute("src") or ""
        assert drawn.startswith("/api/preview?") and "workspace=default" in drawn
        # No picture of the page comes from Gradio's cache, which serves it to anyone.
        sources = page.locator("img").evaluate_all("pictures => pictures.map(p => p.src)")
        assert not [source for source in sources if "/gradio_api/file=" in source]
        shown = page.request.get(served.url + drawn)  # as the browser fetched it: the session
        assert shown.status == 200 and shown.headers["content-type"] == "image/png"
        assert _status(served, drawn, "outsider") == 404  # another workspace's user

        _taken(served, "archive", REPORT)
        try:
            assert page.request.get(served.url + drawn).status == 404
            assert _status(served, drawn, "outsider") == 404
            assert _status(served, drawn, "editor") == 200  # to look before putting it back
            # The old citation, clicked again: the preview says so, and shows no page.
            page.locator("#evidence a.citation").first.click()
            expect(page.locator("#preview-text")).to_have_text(DOCUMENT_OFFLINE, timeout=30_000)
            expect(page.locator("#preview-image")).to_be_hidden()
        finally:
            _taken(served, "activate", REPORT)
    finally:
        page.context.close()


def test_a_rejected_document_or_passage_is_previewed_as_taken_offline(served: Served) -> None:
    chunk = live_chunks(served.home, REPORT)[0]["chunk_id"]
    settings = load_settings(served.home)
    for chunk_index, said in (((), DOCUMENT_OFFLINE), (("--chunk", "0"), PASSAGE_OFFLINE)):
        _taken(served, "reject", REPORT, *chunk_index)
        try:
            with Catalog(settings) as catalog:
                with pytest.raises(PreviewError, match=f"^{said}$"):
                    preview(settings, catalog, chunk, drawn=False)
                assert preview(settings, catalog, chunk, drawn=False, offline_shown=True).pictured
        finally:
            _taken(served, "activate", REPORT, *chunk_index)


def test_an_archived_document_leaves_a_readers_sources_filters_and_count_a_governor_sees_it_marked(
    served: Served, browser: Browser
) -> None:
    from playwright.sync_api import expect

    _taken(served, "archive", REPORT)
    try:
        for user, governs in (("reader", False), ("editor", True)):
            page = signed_in(browser, served.url, user, f"{user}-password")
            try:
                # Three documents indexed; the archived one counted for its governor only.
                facts = workspace_card(page, "Default").locator(".facts")
                expect(facts).to_contain_text("3 documents" if governs else "2 documents")
                open_workspace(page)
                expect(page.locator("#workspace-status")).to_have_text(
                    f"{3 if governs else 2} documents indexed"
                )
                page.get_by_text("Sources", exact=True).click()
                listed = page.locator(f"#sources [data-doc='{REPORT}']")
                expect(page.locator("#sources [data-doc='docs/guide.md']")).to_be_visible()
                if governs:
                    expect(listed).to_contain_text("archived: out of search, indexed")
                else:
                    expect(listed).to_have_count(0)
                page.get_by_text("Filters", exact=True).click()
                page.get_by_label("Documents", exact=True).click()
                choices = page.get_by_role("option")
                expect(choices.filter(has_text="docs/guide.md")).to_have_count(1)
                expect(choices.filter(has_text=REPORT)).to_have_count(1 if governs else 0)
            finally:
                page.context.close()
    finally:
        _taken(served, "activate", REPORT)
