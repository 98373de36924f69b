"""Governing from the open workspace's Sources, in Chromium through the real server: a governor
archives a document listed there and puts it back; a contributor sees his own upload taken out of
search marked as such, and what he may do about it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from rag_pipeline.availability import set_availability
from rag_pipeline.catalog import Catalog
from rag_pipeline.config import Settings, UserSettings, load_settings
from rag_pipeline.ids import DEFAULT_WORKSPACE
from rag_pipeline_tests.conftest import open_workspace
from rag_pipeline_tests.processes import within
from serving.access import User, add_user
from serving.server import BackgroundServer
from serving.uploads import documents_offline
from serving.workspaces import ServedWorkspaces

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CONTRIBUTING = UserSettings(workspaces=[DEFAULT_WORKSPACE], contribute=[DEFAULT_WORKSPACE])
UPLOADS = {
    "pelicans.md": "# Pelicans\n\nPelicans scoop fish into their throat pouch.\n",
    "herons.md": "# Herons\n\nHerons wait motionless in shallow water.\n",
}


@dataclass(frozen=True)
class Served:
    url: str
    settings: Settings
    tokens: dict[str, str]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A served home whose default workspace holds two uploads of bob's, indexed; bob a
    contributor, gov its governor."""
    root = tmp_path_factory.mktemp("governing")
    home, sent = root / "home", root / "sent"
    tokens = {
        "bob": add_user(home, "bob", None, [DEFAULT_WORKSPACE], contribute=[DEFAULT_WORKSPACE]),
        "gov": add_user(home, "gov", None, [DEFAULT_WORKSPACE], govern=[DEFAULT_WORKSPACE]),
    }
    settings = load_settings(home)
    workspaces = ServedWorkspaces(settings)
    try:
        sent.mkdir()
        for name, text in UPLOADS.items():
            copy = sent / uuid.uuid4().hex
            copy.write_text(text, encoding="utf-8")
            workspaces.upload(User("bob", CONTRIBUTING), DEFAULT_WORKSPACE, [(name, copy)])
        within(300, "the uploads indexed", lambda: not workspaces.indexing(DEFAULT_WORKSPACE))
    finally:
        workspaces.close()
    with BackgroundServer(settings) as server:
        yield Served(server.url, settings, tokens)


def _sources_of(served: Served, browser: Browser, user: str) -> Page:
    """The page signed in as ``user``, the default workspace open, its Sources shown."""
    page = browser.new_context(
        extra_http_headers={"Authorization": f"Bearer {served.tokens[user]}"}
    ).new_page()
    page.goto(served.url + "/")
    open_workspace(page)
    page.get_by_text("Sources", exact=True).click()
    return page


def _offline(settings: Settings) -> dict[str, str]:
    with Catalog(settings) as catalog:
        return dict(documents_offline(catalog))


def test_a_governor_archives_a_document_from_the_sources_and_puts_it_back(
    served: Served, browser: Browser
) -> None:
    from playwright.sync_api import expect

    page = _sources_of(served, browser, "gov")
    row = page.locator("#sources [data-doc='uploads/pelicans.md']")
    expect(row).to_contain_text("indexed, 1 chunk", timeout=30_000)
    row.locator("button.govern", has_text="archive").click()
    expect(row).to_contain_text("archived: out of search", timeout=30_000)
    assert _offline(served.settings) == {"uploads/pelicans.md": "archived"}
    # The governor's other document keeps its "archive"; this one offers only "put back".
    expect(row.locator("button.govern")).to_have_text("put back")
    herons = page.locator("#sources [data-doc='uploads/herons.md'] button.govern")
    expect(herons).to_have_text("archive")

    row.locator("button.govern", has_text="put back").click()
    expect(row.locator("button.govern")).to_have_text("archive", timeout=30_000)
    expect(row).not_to_contain_text("out of search")
    assert _offline(served.settings) == {}


def test_a_reader_or_contributor_sees_no_governing_buttons(
    served: Served, browser: Browser
) -> None:
    from playwright.sync_api import expect

    page = _sources_of(served, browser, "bob")
    row = page.locator("#sources [data-doc='uploads/pelicans.md']")
    expect(row).to_contain_text("indexed, 1 chunk", timeout=30_000)
    expect(page.locator("#sources button.govern")).to_have_count(0)
    expect(row.locator("button.remove")).to_have_count(1)  # his own, in search


def test_a_contributor_sees_his_own_upload_a_governor_archived_and_who_may_put_it_back(
    served: Served, browser: Browser
) -> None:
    from playwright.sync_api import expect

    set_availability(served.settings, "uploads/herons.md", "archived", "gov")
    try:
        page = _sources_of(served, browser, "bob")
        row = page.locator("#sources [data-doc='uploads/herons.md']")
        expect(row).to_have_text(
            "uploads/herons.md archived by a governor: only a governor may replace or put it back",
            timeout=30_000,
        )
        expect(row.locator("button")).to_have_count(0)  # neither his to remove nor to govern
        assert "download" not in row.inner_text()  # out of his search, his reading too
    finally:
        set_availability(served.settings, "uploads/herons.md", "active", "gov")
