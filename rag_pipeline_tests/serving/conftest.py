"""An indexed home the serving tests share (indexed once per module by the real pipeline), and
the browser the page is tried in."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rag_pipeline.catalog import Catalog
from rag_pipeline.cli import main
from rag_pipeline.config import Settings, load_settings
from rag_pipeline_tests.documents import two_column_pdf

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

CHROMIUM = Path("/usr/bin/chromium")

GUIDE = """# Field guide

## Herons

Herons stand still in shallow water. They strike fish with their long bills.

## Owls

Owls hunt at night. Their soft feathers make their flight almost silent.
"""
CHINESE = (
    "长江是中国最长的河流，全长约六千三百公里。三峡大坝位于湖北省宜昌市，是世界上最大的水电站。"
)


def write_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    two_column_pdf(folder / "report.pdf")
    (folder / "guide.md").write_text(GUIDE, encoding="utf-8")
    (folder / "rivers.txt").write_text(CHINESE, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Settings of a home holding the indexed corpus (read-only for the tests that use it)."""
    root = tmp_path_factory.mktemp("served")
    source = write_corpus(root / "docs")
    assert main(["index", "--home", str(root / "home"), "--source", str(source)]) == 0
    return load_settings(root / "home")


@pytest.fixture(scope="module")
def catalog(indexed: Settings) -> Iterator[Catalog]:
    with Catalog(indexed) as opened:
        yield opened


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's headless Chromium, driven by Playwright, without its background traffic."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            yield browser
        finally:
            browser.close()


def signed_in(browser: Browser, url: str, name: str, password: str) -> Page:
    """A page of its own browser context, signed in with the sign-in form the page sends it to
    (close it with ``page.context.close()``)."""
    page = browser.new_context().new_page()
    page.goto(url + "/")
    page.locator("#name").fill(name)
    page.locator("#password").fill(password)
    page.locator("#sign-in").click()
    page.wait_for_url(url + "/")
    return page


def workspace_card(page: Page, name: str) -> Locator:
    """The card of the workspace with this name, on the page's home."""
    return page.locator("#workspace-cards .card").filter(
        has=page.locator(f".name:text-is('{name}')")
    )


def open_workspace(page: Page, name: str = "Default") -> None:
    """Open a workspace by its card on the page's home, and wait for its chat."""
    workspace_card(page, name).get_by_role("button", name="Open").click(timeout=30_000)
    page.locator("#question textarea").wait_for(timeout=30_000)
