"""In Chromium, through the real server: a quote from a passage's second page is linked, listed,
previewed and opened at that page; the preview steps to the passage's other pages, and is wide
enough to read, zooming in place on a click."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, unquote, urlsplit

import httpx
import pytest

from rag_pipeline.config import Settings, load_settings
from rag_pipeline_tests.conftest import IndexedPlaces, ask_on_the_page, open_workspace
from rag_pipeline_tests.serving.test_citing import index_two_page_guide
from serving.server import BackgroundServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

# A laptop's window: the preview shares it with the chat and the sources.
VIEWPORT = {"width": 1280, "height": 800}
PAGE_WIDTH = 420  # points: the guide's pages (see index_two_page_guide)


@pytest.fixture(scope="module")
def served(indexed_places: IndexedPlaces) -> Iterator[str]:
    settings: Settings = load_settings(
        indexed_places.fresh("two-pages", index_two_page_guide) / "home"
    )
    with BackgroundServer(settings) as server:
        yield server.url


def _asked(browser: Browser, served: str) -> Page:
    """The lighthouse question asked, its answer's first citation previewed."""
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(served + "/")
    open_workspace(page)
    ask_on_the_page(page, "How tall is the Quillon lighthouse?")
    page.locator("#evidence a.citation").first.wait_for(timeout=60_000)
    page.locator("#preview-image img").wait_for(timeout=30_000)
    return page


def _shown_page(page: Page) -> str | None:
    """The page number the preview's picture is drawn at."""
    drawn = page.locator("#preview-image img").get_attribute("src") or ""
    return parse_qs(urlsplit(drawn).query).get("page", [None])[0]


def test_a_quote_from_a_passages_second_page_is_linked_listed_previewed_and_opened_there(
    served: str, browser: Browser
) -> None:
    from playwright.sync_api import expect

    page = _asked(browser, served)
    # The preview follows the answer once it is whole (while it streams, it may show page 1).
    expect(page.locator("#preview-text")).to_contain_text("page 2", timeout=30_000)
    assert _shown_page(page) == "2"
    linked = page.locator("#chat a[href^='#cite:']").first.get_attribute("href") or ""
    assert unquote(linked).endswith("&page=2")
    assert "p. 2" in page.locator("#evidence .cite .where").first.inner_text()
    # The original opens at the cited page, under its own name (Chromium's PDF viewer titles
    # its tab by the address's last part).
    original = page.locator("#original-file").get_attribute("href") or ""
    address = urlsplit(original)
    assert address.path == "/api/file/guide.pdf" and address.fragment == "page=2"
    response = httpx.get(served + original.split("#")[0])
    assert response.status_code == 200 and response.content.startswith(b"%PDF-")
    assert response.headers["content-disposition"] == 'inline; filename="guide.pdf"'
    page.close()


def test_the_preview_steps_to_the_passages_other_page_and_back(
    served: str, browser: Browser
) -> None:
    from playwright.sync_api import expect

    page = _asked(browser, served)
    expect(page.locator("#next-page")).to_have_count(0)  # page 2 is its last
    # The steps and the original's link above the page drawn, in sight with its top.
    steps = page.locator("#previous-page").bounding_box()
    original = page.locator("#original-file").bounding_box()
    drawn = page.locator("#preview-image img").bounding_box()
    assert steps is not None and original is not None and drawn is not None
    assert steps["y"] < drawn["y"] and original["y"] < drawn["y"]
    assert drawn["y"] < VIEWPORT["height"]
    page.locator("#previous-page").click()
    expect(page.locator("#preview-text")).to_contain_text("page 1 of", timeout=30_000)
    assert _shown_page(page) == "1"
    expect(page.locator("#previous-page")).to_have_count(0)  # page 1 is its first
    page.locator("#next-page").click()
    expect(page.locator("#preview-text")).to_contain_text("page 2 of", timeout=30_000)
    assert _shown_page(page) == "2"
    page.close()


def test_the_preview_is_readable_beside_the_chat_and_zooms_in_place_on_a_click(
    served: str, browser: Browser
) -> None:
    from playwright.sync_api import expect

    page = _asked(browser, served)
    picture = page.locator("#preview-image img")
    expect(picture).to_have_js_property("complete", True)
    beside = picture.bounding_box()
    # At least its size in print: a pixel per point, 11 pt text 11 px high (it was 0.86).
    assert beside is not None and beside["width"] >= PAGE_WIDTH
    picture.click()
    expect(page.locator(".preview-image.zoomed")).to_have_count(1)
    zoomed = picture.bounding_box()
    natural = picture.evaluate("image => image.naturalWidth")
    assert zoomed is not None and zoomed["width"] == pytest.approx(natural, abs=2)  # + border
    assert zoomed["width"] > beside["width"]
    assert page.url.startswith(served)  # zoomed in place: no tab, no navigation
    page.keyboard.press("Escape")
    expect(page.locator(".preview-image.zoomed")).to_have_count(0)
    page.close()
