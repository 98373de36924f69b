"""What the page says of a workspace and its documents, each to the user who reads it: when they
opened it last (not when someone else did), that a new one holds no documents yet and how to
add some, and no download of a document whose indexing failed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from rag_pipeline.config import load_settings
from rag_pipeline.workspaces import create_workspace, find_workspace
from rag_pipeline_tests.conftest import IndexedPlaces, open_workspace
from serving.access import add_user
from serving.page.render import card_html
from serving.server import BackgroundServer
from serving.workspaces import ServedWorkspaces

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


def _index_with_a_failure(root: Path) -> None:
    from rag_pipeline.cli import main

    folder = root / "docs"
    folder.mkdir()
    (folder / "guide.md").write_text("# Guide\n\nOwls hunt at night.\n", encoding="utf-8")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\nnot a PDF at all\n")  # fails to parse
    assert (
        main(["index", "--home", str(root / "home"), "--source", str(folder)]) == 0
    )  # a failure is reported, not fatal


@dataclass(frozen=True)
class Served:
    url: str
    home: Path
    tokens: dict[str, str]  # each user's bearer token

    def headers(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"}


@pytest.fixture(scope="module")
def served(indexed_places: IndexedPlaces) -> Iterator[Served]:
    """The default workspace (an indexed note and a PDF that failed) and an empty "Shelf";
    an admin, a reader of both, and a contributor to Shelf."""
    home = indexed_places.fresh("a-failure", _index_with_a_failure) / "home"
    create_workspace(load_settings(home), "Shelf")
    tokens = {
        "admin": add_user(home, "admin", None, ["*"], govern=["*"]),
        "reader": add_user(home, "reader", None, ["default", "shelf"]),
        "contributor": add_user(home, "contributor", None, ["shelf"], contribute=["shelf"]),
    }
    with BackgroundServer(load_settings(home)) as server:
        yield Served(server.url, home, tokens)


def _page(browser: Browser, served: Served, user: str) -> Page:
    context = browser.new_context(extra_http_headers=served.headers(user))
    page = context.new_page()
    page.goto(served.url + "/")
    return page


def test_when_a_workspace_was_opened_is_each_users_own(served: Served) -> None:
    workspaces = ServedWorkspaces(load_settings(served.home))
    try:
        admin = workspaces.authenticator.user({"authorization": f"Bearer {served.tokens['admin']}"})
        assert admin is not None
        workspaces.opened(admin, "shelf")
    finally:
        workspaces.close()
    shelf = find_workspace(load_settings(served.home), "shelf")
    assert card_html(shelf, "admin", governs=True).endswith("opened just now</div>")
    assert card_html(shelf, "reader", governs=False).endswith("not opened yet</div>")


def test_a_new_workspaces_card_says_it_holds_no_documents_yet(
    served: Served, browser: Browser
) -> None:
    from playwright.sync_api import expect

    page = _page(browser, served, "reader")
    card = page.locator("#workspace-cards .card").filter(has_text="Shelf")
    expect(card.locator(".facts")).to_have_text("no documents yet · not opened yet")
    page.context.close()


@pytest.mark.parametrize(
    ("user", "said"),
    [
        ("contributor", "Upload files under Sources"),
        ("reader", "Ask someone who may contribute to this workspace"),
    ],
)
def test_an_empty_workspace_says_how_to_add_documents_to_whoever_opens_it(
    served: Served, browser: Browser, user: str, said: str
) -> None:
    from playwright.sync_api import expect

    page = _page(browser, served, user)
    open_workspace(page, "Shelf")
    expect(page.locator("#chat")).to_contain_text(said, timeout=30_000)
    if user == "contributor":
        expect(page.locator("#chat")).to_contain_text("rag-pipeline sources add DIR --workspace")
    # A workspace with documents says none of it.
    page.locator("#to-workspaces").click()
    if user == "reader":
        open_workspace(page, "Default")
        expect(page.locator("#chat")).not_to_contain_text(said, timeout=30_000)
    page.context.close()


def test_the_hint_on_adding_documents_goes_once_the_first_upload_is_indexed(
    tmp_path: Path, browser: Browser
) -> None:
    from playwright.sync_api import expect

    note = tmp_path / "owls.md"
    note.write_text("# Owls\n\nOwls hunt at night.\n", encoding="utf-8")
    settings = load_settings(tmp_path / "home")
    create_workspace(settings, "Shelf")  # watches its upload folder alone
    with BackgroundServer(settings) as server:
        page = browser.new_page()
        page.goto(server.url + "/")
        open_workspace(page, "Shelf")
        chat = page.locator("#chat")
        expect(chat).to_contain_text("Upload files under Sources", timeout=30_000)
        page.get_by_role("button", name="Sources").click()
        page.locator("#upload input[type=file]").set_input_files(str(note))
        outcome = page.locator("#upload-outcomes [data-upload='owls.md']")
        expect(outcome).to_have_text("owls.md searchable", timeout=300_000)
        expect(chat).not_to_contain_text("No documents here yet")
        page.close()


def test_a_document_whose_indexing_failed_is_neither_offered_nor_served(
    served: Served, browser: Browser
) -> None:
    from playwright.sync_api import expect

    original = f"{served.url}/api/file"
    for doc_id, status in (("docs/broken.pdf", 404), ("docs/guide.md", 200)):
        response = httpx.get(original, params={"doc_id": doc_id}, headers=served.headers("admin"))
        assert response.status_code == status, doc_id
    page = _page(browser, served, "admin")
    open_workspace(page)
    page.get_by_text("Sources", exact=True).click()
    failed = page.locator("#sources [data-doc='docs/broken.pdf']")
    expect(failed).to_contain_text("failed", timeout=30_000)
    expect(failed.locator("a.download")).to_have_count(0)
    expect(page.locator("#sources [data-doc='docs/guide.md'] a.download")).to_have_count(1)
    page.context.close()


def test_users_opening_a_workspace_at_once_are_each_remembered_and_a_renaming_kept(
    tmp_path: Path,
) -> None:
    import threading

    from rag_pipeline.workspaces import mark_opened, rename_workspace

    shelf = create_workspace(load_settings(tmp_path / "home"), "Shelf")
    failures: list[BaseException] = []
    start = threading.Barrier(3)

    def at_once(work: Callable[[], object]) -> threading.Thread:
        """A thread doing ``work`` as the others start theirs; what it raises kept."""

        def run() -> None:
            start.wait()
            try:
                work()
            except BaseException as error:  # said by the assertion below
                failures.append(error)

        return threading.Thread(target=run)

    def opening(team: str) -> None:
        for number in range(40):
            mark_opened(shelf, f"{team}-{number}")

    threads = [at_once(lambda: opening("a")), at_once(lambda: opening("b"))]
    threads.append(at_once(lambda: rename_workspace(shelf, "Shelf renamed")))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    reopened = find_workspace(shelf.settings, shelf.id)
    assert reopened.name == "Shelf renamed"
    assert set(reopened.opened_by) == {f"{team}-{n}" for team in ("a", "b") for n in range(40)}
    assert [path.name for path in shelf.home.glob(".workspace.json.*.tmp")] == []
